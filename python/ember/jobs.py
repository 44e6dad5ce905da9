"""ember.Job: a Python training job, joined the way ember-worker joins one.

    job = ember.Job(config, coordinator="127.0.0.1:6000", rank=r, world_size=w)
    def train(attempt):                   # one attempt; called again after a recovery
        torch.manual_seed(0)
        model = MyModel(); opt = ember.torch.DistributedOptimizer(torch.optim.Adam(...),
                                                                  attempt.collective)
        emb = ember.torch.EmbeddingCollection.from_config(attempt.client, config,
                                                          collective=attempt.collective)
        data = ember.data.Dataset(config, "train", attempt.rank, attempt.world_size)
        attempt.track(model, opt, data)   # restores the attempt's checkpoint, if any
        for batch in attempt.steps(data, emb):
            ...forward, backward, opt.step()...
        return attempt.finish()
    result = job.run(train)

The coordinator's job protocol (coordinator.proto JoinJob, Checkpoint, GetJob,
FinishJob): each attempt is fenced (its PS calls name the attempt), its workers meet
in a Gloo collective of their own, and checkpoints are consistent cuts at a step
barrier holding the PS rows, the dense parameters (little-endian float32, what
ember-serving serves), the optimizer state and model buffers (ember/state.py) and every
rank's reader cursor. When a PS shard, a peer or the coordinator fails (UNAVAILABLE,
DEADLINE_EXCEEDED, ABORTED), ``run`` rejoins; the coordinator restores the newest
checkpoint and ``train`` runs again from it. In BSP the model then equals bitwise the
one of a run without the failure (docs/ARCHITECTURE.md invariant 5), provided ``train``
is deterministic (seed torch; no dropout randomness outside the checkpoint).
"""

import hashlib
import json
import math
import os
import signal
import socket
import sys
import threading
import time

import numpy as np

from . import _ember
from . import state as dense_state
from .client import Client
from .errors import (AbortedError, DeadlineExceededError, EmberError, FailedPreconditionError,
                     InvalidArgumentError)

_PYTHON_JOB = b"ember.torch job v1"


def _say(line):
    print(line, file=sys.stdout, flush=True)


def _worker_range(workers):
    """(MIN, MAX) of ``workers``: None (a fixed-size run: (0, 0)), a pair or "MIN:MAX"."""
    if workers is None:
        return 0, 0
    if isinstance(workers, str):
        try:
            low, high = (int(p) for p in workers.split(":"))
        except ValueError:
            raise InvalidArgumentError(f'workers {workers!r} is not "MIN:MAX"') from None
        workers = (low, high)
    try:
        low, high = workers
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"workers {workers!r} is not (MIN, MAX)") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
        raise InvalidArgumentError(f"workers {workers!r}: MIN and MAX must be integers")
    if low < 1 or low > high:
        raise InvalidArgumentError(
            f"worker range {low}..{high}: needs 1 <= MIN <= MAX")
    return low, high


class AttemptResized(BaseException):
    """Raised by ``Attempt.steps`` in an elastic run after the resize checkpoint: the
    attempt ends at that cut and ``Job.run`` rejoins at the new world size (or returns,
    on a worker that leaves). A BaseException, like KeyboardInterrupt, so that a
    ``train`` that catches Exception lets it through."""

    def __init__(self, step, leaving):
        super().__init__(f"the run resizes at step {step}")
        self.step, self.leaving = step, leaving


class Job:
    """A training job on the cluster of ``coordinator``. ``config``: the model config
    (data, tables, features, training schedule; ember.load_config). ``name`` defaults to
    the config's. Every run of a job on one coordinator needs its own ``generation`` (or
    ``run_id``).
    ``resume_from``: "" (the PS rows as they are), "latest" or a checkpoint name.
    ``rows`` (a new run without ``resume_from``): "continue" trains on from the rows the
    PS tables hold, "fresh" empties every table first; required once any run trained on
    the cluster (the coordinator refuses to guess). ``run_id`` instead of ``generation``
    (every worker of the run the same, e.g. a Kubernetes Job's UID): the coordinator
    allocates the run's generation, so a new run needs no hand-picked, growing number.
    ``own_tables=True``: the job's tables are its own (a store of the job's on every PS
    shard, with its own attempts, restores and checkpoints), so that it trains beside
    other jobs on one cluster; every worker of a run says the same.

    Elastic runs (docs/ARCHITECTURE.md "Elastic runs"): ``workers=(MIN, MAX)`` instead
    of ``rank`` and ``world_size``, the same on every worker of the run; the
    coordinator (started with a checkpoint directory) gives each attempt's ranks. A
    worker that starts while the run trains joins it at a checkpoint (not before step
    ``join_at_step``); a worker sent SIGTERM (or past ``leave_at_step``) leaves at one,
    while at least MIN stay, and ``run`` returns ``{"left": True, ...}``. No example is
    read twice or skipped across the sizes. ``member`` names the worker (default
    HOSTNAME-PID)."""

    def __init__(self, config, coordinator, rank=None, world_size=None, generation=0, name=None,
                 resume_from="", rows=None, collective_host="127.0.0.1",
                 collective_timeout_s=60.0,
                 ps_deadline_s=30.0, recovery_timeout_s=600.0, max_recoveries=100,
                 run_dir=None, tls=None, log=_say, workers=None, member=None,
                 join_at_step=0, leave_at_step=0, run_id=None, own_tables=False):
        if run_id is not None and (not isinstance(run_id, str) or
                                   not 1 <= len(run_id.encode()) <= 128):
            raise InvalidArgumentError(f"run_id {run_id!r} is not a string of 1..128 bytes")
        if run_id is not None and generation:
            raise InvalidArgumentError(
                "give the run's run_id or its generation, not both (the coordinator "
                "allocates the generation of a run_id)")
        self.run_id = run_id or ""
        self.min_workers, self.max_workers = _worker_range(workers)
        elastic = self.max_workers > 0
        if elastic and (rank is not None or world_size is not None):
            raise InvalidArgumentError(
                "an elastic worker's rank and world size are the coordinator's to assign: "
                "give workers=(MIN, MAX) without rank and world_size")
        if not elastic and (join_at_step or leave_at_step or member is not None):
            raise InvalidArgumentError(
                "join_at_step, leave_at_step and member are for elastic runs: give "
                "workers=(MIN, MAX)")
        for what, step in (("join_at_step", join_at_step), ("leave_at_step", leave_at_step)):
            if not isinstance(step, int) or step < 0:
                raise InvalidArgumentError(f"{what} {step!r} is not an integer >= 0")
        rank = 0 if rank is None else rank
        world_size = 1 if world_size is None else world_size
        if not isinstance(world_size, int) or world_size < 1 or not 0 <= rank < world_size:
            raise InvalidArgumentError(f"rank {rank} is not in [0, world_size {world_size})")
        if member is None:
            member = f"{socket.gethostname()}-{os.getpid()}"
        if elastic and not 1 <= len(member.encode()) <= 128:
            raise InvalidArgumentError(
                f"an elastic worker needs a member id of 1..128 bytes (has {len(member.encode())})")
        self.member = member
        self.join_at_step, self.leave_at_step = join_at_step, leave_at_step
        self.leave_requested = False  # SIGTERM, in an elastic run
        self.empty_steps = 0  # steps this worker took with no data (LAST_OUT), all attempts
        # An epoch ends when the first worker runs out of data in it (FIRST_OUT), or the
        # last (LAST_OUT: the others take empty steps; Attempt.steps).
        self.first_out = config.training.get("epoch_end", "FIRST_OUT") == "FIRST_OUT"
        if not coordinator:
            raise InvalidArgumentError("a Job needs the coordinator's address")
        if rows not in (None, "continue", "fresh"):
            raise InvalidArgumentError(f'rows must be "continue", "fresh" or None, not {rows!r}')
        if rows == "fresh" and resume_from:
            raise InvalidArgumentError(
                'rows="fresh" with resume_from: the checkpoint\'s rows replace the PS rows '
                "anyway; give one of them")
        self.config = config
        self.name = name or config.name
        self.coordinator = coordinator
        self.rank, self.world_size, self.generation = rank, world_size, generation
        self.resume_from = resume_from
        self.rows = rows or ""
        if not isinstance(own_tables, bool):
            raise InvalidArgumentError(f"own_tables {own_tables!r} is not True or False")
        self.own_tables = own_tables
        self.collective_host = collective_host
        self.collective_timeout_s = collective_timeout_s
        self.ps_deadline_s = ps_deadline_s
        self.recovery_timeout_s = recovery_timeout_s
        self.max_recoveries = max_recoveries
        self.run_dir = run_dir
        self.tls = tls
        self.log = log or (lambda line: None)
        self.digest, self.config_bytes = config.job_digest(_PYTHON_JOB)
        ca, cert, key = tls if tls else ("", "", "")
        self.jobs = _ember.JobClient(coordinator, tls_ca=ca, tls_cert=cert, tls_key=key)

    @property
    def elastic(self):
        return self.max_workers > 0

    def _who(self):
        if not self.elastic:
            return f"worker {self.rank}"
        return f"worker '{self.member}'" if self.rank is None else \
            f"worker {self.rank} ('{self.member}')"

    def run(self, train):
        """Runs ``train(attempt)`` until an attempt finishes; rejoins after a
        recoverable failure (at most max_recoveries times) and, in an elastic run, after
        a resize. Returns what train returned (``{"left": True, ...}`` on an elastic
        worker that left the run)."""
        if not self.elastic:
            return self._run(train)
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            return self._run(train)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _on_sigterm(self, signum, frame):
        if self.leave_requested:  # a second SIGTERM ends the worker at once
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.leave_requested = True
        self.log(f"{self._who()}: SIGTERM: leaving the run at its next checkpoint")

    def _run(self, train):
        after, reason = 0, ""
        run_id = self.run_id  # until the coordinator answers the run's generation
        run = f"run '{run_id}'" if run_id else f"generation {self.generation}"
        if self.elastic:
            self.rank = None
            self.log(f"{self._who()}: joining job '{self.name}' ({run}, "
                     f"{self.min_workers} to {self.max_workers} workers) at {self.coordinator}")
        else:
            self.log(f"worker {self.rank}/{self.world_size}: joining job '{self.name}' "
                     f"({run}) at {self.coordinator}")
        recoveries = resizes = 0
        resized = False
        while True:
            # An elastic worker waits for its first place as long as it takes (a run at
            # its maximum, a worker started before its run).
            first = self.elastic and resizes == 0 and recoveries == 0
            try:
                join = self.jobs.join(self.name, 0 if run_id else self.generation,
                                      self.rank or 0, self.world_size,
                                      self.resume_from, self.digest, self.config_bytes,
                                      after_attempt=after, reason=reason,
                                      timeout_s=math.inf if first else self.recovery_timeout_s,
                                      unreachable_timeout_s=self.collective_timeout_s,
                                      report=lambda line: self.log(f"{self._who()}: {line}"),
                                      rows=self.rows, min_workers=self.min_workers,
                                      max_workers=self.max_workers, member=self.member,
                                      join_at_step=self.join_at_step, run_id=run_id,
                                      own_tables=self.own_tables)
            except FailedPreconditionError:
                if self.elastic and self._run_finished():
                    self.log(f"{self._who()}: the run finished before this worker got a place")
                    return {"left": True, "steps": 0, "resizes": resizes}
                raise
            if run_id:
                # Rejoins (and the collective's rendezvous) name the run by the generation
                # the coordinator gave it.
                self.generation = join["generation"]
                self.log(f"{self._who()}: run '{run_id}' is generation {self.generation}")
                run_id = ""
            if self.elastic:
                self.rank, self.world_size = join["rank"], join["world_size"]
                if not 0 <= self.rank < self.world_size:
                    raise EmberError(f"the coordinator gave rank {self.rank} of "
                                     f"{self.world_size}", code="INTERNAL", code_value=13)
                self.log(f"{self._who()}: attempt {join['attempt']} has {self.world_size} "
                         f"worker(s)")
            if recoveries > 0 and not resized:
                try:
                    record = self.jobs.get_job(self.name, 2.0)
                    if record["failure"] and reason not in record["failure"]:
                        self.log(f"{self._who()}: attempt {after} was ended by: "
                                 f"{record['failure']}")
                except EmberError:
                    pass
            attempt = None
            resized = False
            try:
                attempt = Attempt(self, join, recoveries, resizes)
                result = train(attempt)
                self._finish(join["attempt"])
                return result
            except AttemptResized as r:
                resizes += 1
                resized = True
                if r.leaving:
                    self.log(f"{self._who()}: left the run at step {r.step} (attempt "
                             f"{join['attempt']}); the others go on without it")
                    return {"left": True, "steps": r.step, "rank": self.rank,
                            "resizes": resizes, "empty_steps": self.empty_steps}
                # Not a failure: the next attempt starts from the checkpoint just taken.
                after, reason = join["attempt"], "resize"
            except EmberError as e:
                if not e.recoverable or recoveries >= self.max_recoveries:
                    raise
                self.log(f"{self._who()}: attempt {join['attempt']} failed, rejoining: {e}")
                after, reason = join["attempt"], str(e)
                recoveries += 1
            finally:
                if attempt is not None:
                    attempt.close()

    def _run_finished(self):
        try:
            record = self.jobs.get_job(self.name, 2.0)
        except EmberError:
            return False
        return record["phase"] == "FINISHED" and self.generation in (0, record["generation"])


    def _finish(self, attempt):
        """The run is over only once rank 0 recorded its end (after its evaluation and
        checksums): rank 0 records it (AbortedError if the attempt was rolled back
        meanwhile: rejoin); the other ranks wait for it (up to recovery_timeout_s) and
        rejoin when the attempt was rolled back first (docs/ARCHITECTURE.md "Jobs in
        attempts", step 7)."""
        if self.rank == 0:
            self.jobs.finish(self.name, self.generation, attempt, self.collective_timeout_s)
            return
        try:
            self.jobs.await_finished(self.name, self.generation, attempt,
                                     self.recovery_timeout_s)
        except AbortedError:
            raise
        except EmberError as e:  # rank 0 is gone, or the job failed: a rejoin cannot help
            raise FailedPreconditionError(
                f"waiting for rank 0 to finish the job: {e}") from e


class Attempt:
    """One attempt of a job on this worker: ``client`` (fenced to the attempt),
    ``collective`` (this attempt's workers), the restored ``checkpoint`` ("" none) and
    the position: ``step``, ``examples`` (over all workers), ``epoch``."""

    def __init__(self, job, join, recoveries, resizes=0):
        self.job = job
        self.resizes = resizes
        self.number = join["attempt"]
        self.checkpoint = join["checkpoint"]
        self.checkpoints_enabled = join["checkpoints"]
        self.recoveries = recoveries
        self.rank, self.world_size = job.rank, job.world_size
        self._state = join["state"]
        self.step = 0
        self.examples = 0
        self.epoch = 0
        self.checkpoints_taken = 0
        self._last_checkpoint_step = None
        self._last_checkpoint_time = time.monotonic()
        self._next_poll = time.monotonic() + 1.0
        self._model = self._optimizer = self._dataset = None
        self.epoch_examples = []     # data examples trained in each epoch, over all workers
        self._data_progress = None   # what earlier world sizes consumed of the epoch (bytes)
        self._pending_join_step = None  # elastic, rank 0: the earliest waiting worker's step
        self._said_min = False
        self._curve = []
        self._interval = [0.0, 0.0]
        self._start = None
        self._start_examples = 0
        self._stage = {"step": 0.0}
        self.client = Client(job.coordinator, attempt=self.number, deadline_s=job.ps_deadline_s,
                             connect_timeout_s=job.collective_timeout_s, tls=job.tls,
                             job=join["tables_job"])
        ca, cert, key = job.tls if job.tls else ("", "", "")
        if job.world_size > 1:
            job.log(f"worker {self.rank}/{self.world_size}: waiting for the other "
                    f"{self.world_size - 1} worker(s) of attempt {self.number}")
        try:
            self.collective = _ember.Collective(
                coordinator=job.coordinator, job=f"{job.name}.a{self.number}",
                generation=job.generation, rank=self.rank, world_size=self.world_size,
                host=job.collective_host, timeout_s=job.collective_timeout_s,
                tls_ca=ca, tls_cert=cert, tls_key=key)
        except DeadlineExceededError as e:
            if recoveries > 0 or self.checkpoint:
                raise  # a recovery waits for restarted peers (max_recoveries)
            # A fresh run's missing peers never started: waiting longer changes nothing.
            raise FailedPreconditionError(
                f"{e.message}; start every rank 0..{self.world_size - 1} with "
                f"world_size={self.world_size} against the same coordinator, each able to "
                f"reach the others at its collective_host (every run of a job on one "
                f"coordinator needs its own generation)") from None
        if self._state is not None:
            s = self._state
            if len(s["cursors"]) != s["world_size"]:
                raise FailedPreconditionError(
                    f"checkpoint {self.checkpoint} has {len(s['cursors'])} cursors for "
                    f"{s['world_size']} workers")
            self.step, self.examples, self.epoch = s["step"], s["examples"], s["epoch"]
            self.epoch_examples = list(s.get("epoch_examples", []))
            self._last_checkpoint_step = self.step

    # -- the model -------------------------------------------------------------------
    def track(self, model, optimizer, dataset):
        """The model, optimizer and dataset this attempt checkpoints; restores them from
        the attempt's checkpoint when there is one. Call before ``steps``."""
        self._model, self._optimizer, self._dataset = model, optimizer, dataset
        if self._state is None:
            return
        origin = f"checkpoint {self.checkpoint}"
        dense_state.load_parameters(model, self._state["dense_parameters"], origin)
        dense_state.load_optimizer_state(model, optimizer,
                                         self._state["dense_optimizer_state"], origin)
        if (dataset.rank, dataset.world_size) != (self.rank, self.world_size):
            raise InvalidArgumentError(
                f"the dataset is rank {dataset.rank} of {dataset.world_size}, the attempt "
                f"rank {self.rank} of {self.world_size}: build it with attempt.rank and "
                f"attempt.world_size")
        # At the checkpoint's world size each rank continues its cursor; at another one
        # the epoch continues with every unread example read once (Dataset.resume).
        self._data_progress = dataset.resume(self._state, origin)
        # The attempt's epoch is the checkpoint's; a rank that had read all of it then
        # (LAST_OUT) resumes its reader at the next one and takes empty steps until the
        # others finish theirs.
        self.epoch = min(dataset.epoch, self.epoch)
        if self.rank == 0:
            saved = self._state["world_size"]
            resized = "" if saved == self.world_size else \
                f" ({saved} worker(s) then, {self.world_size} now)"
            self.job.log(f"resuming from checkpoint {self.checkpoint} at step {self.step} "
                         f"(attempt {self.number}){resized}")

    # -- the loop --------------------------------------------------------------------
    def steps(self, dataset=None, embeddings=None, max_steps=None):
        """The batches of this worker, one per global step, until the schedule ends
        (epochs, or max_steps: the config's training.max_steps when None). Every worker
        ends an epoch when the first runs out of data in it (training.epoch_end
        FIRST_OUT, the default) or when the last does (LAST_OUT: every example of the
        epoch is trained; a worker whose share ran out takes empty steps here, without
        yielding: its part of the BSP sparse exchange of ``embeddings`` and of the
        tracked DistributedOptimizer's all-reduce, so a loop must make no other
        collective call per step). Between steps it takes the checkpoints the config
        (checkpoint.every_steps / every_seconds) or an operator (emberctl checkpoint
        create) asks for, and one at the end. Sets ``embeddings.step`` (the pulls'
        step), ``batch.step``, and the gradients' weights: this worker's share of the
        step's examples (``embeddings.gradient_scale``, the optimizer's
        ``local_weight``), so that the update is the one of the global batch's mean even
        when the workers' batches differ in size."""
        dataset = dataset or self._dataset
        if dataset is None:
            raise InvalidArgumentError("steps() needs the dataset (or track() first)")
        if max_steps is None:
            max_steps = self.job.config.training["max_steps"] or None
        every = self.job.config.checkpoint["every_steps"]
        world = self.world_size
        first_out = self.job.first_out
        if not first_out and world > 1 and self._model is None:
            raise FailedPreconditionError(
                "training.epoch_end LAST_OUT: call attempt.track(model, optimizer, dataset) "
                "before steps(): a worker out of data takes empty steps with the "
                "optimizer's all-reduce")
        self._start, self._start_examples = time.monotonic(), self.examples
        self._start_step = self.step
        from . import torch as ember_torch  # the stage clocks (torch is imported by then)
        self._stages_at_start = dict(ember_torch.stage_seconds)
        distributed = isinstance(self._optimizer, ember_torch.DistributedOptimizer)
        if self.job.elastic and self.rank == 0:
            self._poll_job(0.5)  # the workers already waiting to join
        while True:
            if max_steps is not None and self.step >= max_steps:
                break
            # A rank resumed past the epoch (it had read its share, LAST_OUT) has none.
            head = dataset.peek() if dataset.epoch == self.epoch else None
            has = head is not None
            agree = np.array([1.0 if has else 0.0, float(head.size) if has else 0.0,
                              1.0 if self.rank == 0 and self._checkpoint_wanted() else 0.0,
                              self._elastic_votes()], dtype=np.float32)
            if world > 1:
                self.collective.all_reduce_sum(agree)
            if agree[0] < 0.5 or (first_out and agree[0] < world - 0.5):
                if dataset.epoch == self.epoch:
                    dataset.next_epoch()
                self.epoch += 1
                if self.epoch >= dataset.epochs:
                    break
                continue
            # Checkpoints are cut here, between steps, every pushed update applied: a
            # fresh run's first (before any push), every_steps', the one rank 0 or an
            # operator asked for, and (elastic) a resize's, after which the attempt ends
            # and the next one starts from the cut at the new world size (every rank
            # decided the same from the same sum).
            resize, leaving = self._elastic_decision(int(round(float(agree[3]))))
            if self.checkpoints_enabled and (resize or (
                    self._last_checkpoint_step != self.step and (
                        self._last_checkpoint_step is None or agree[2] > 0.5
                        or (every and self.step % every == 0)))):
                self.take_checkpoint(dataset, embeddings, resize=resize, leaving=leaving)
                if resize:
                    raise AttemptResized(self.step, leaving)
            if not has:  # LAST_OUT: the others still have data in this epoch
                self._empty_step(embeddings, distributed)
                self._count_step(agree[1], 0)
                continue
            batch = dataset.pop()
            batch.step = self.step
            # This worker's share of the step's examples (exactly 1 / world and 1 with
            # equal batches: the same bits as without weights).
            global_examples = float(agree[1])
            if distributed:
                self._optimizer.local_weight = batch.size * world / global_examples
            if embeddings is not None:
                embeddings.gradient_scale = batch.size / global_examples
                embeddings.step = self.step
                if embeddings.consistency != "bsp":
                    # SSP/ASP: the next batch's pulls overlap this step (they may miss
                    # this step's pushes: staleness >= 1).
                    following = dataset.peek()
                    if following is not None and following.prepared is None:
                        following.prepared = embeddings.prepare(following, self.step + 1)
            t0 = time.monotonic()
            yield batch
            self._stage["step"] += time.monotonic() - t0
            self._count_step(agree[1], batch.size)
        if embeddings is not None:
            embeddings.flush(0)
        if world > 1:
            self.collective.barrier()  # every worker's pushes are applied
        self._train_seconds = time.monotonic() - self._start
        if self.checkpoints_enabled and self._last_checkpoint_step != self.step:
            self.take_checkpoint(dataset, embeddings)
        self._maybe_log(force=True)

    def _count_step(self, global_examples, examples):
        self.step += 1
        self.examples += int(global_examples)
        while len(self.epoch_examples) <= self.epoch:
            self.epoch_examples.append(0)
        self.epoch_examples[self.epoch] += int(global_examples)
        self._interval[1] += float(examples)
        self._maybe_log()

    def _empty_step(self, embeddings, distributed):
        """A step of this worker with no example (LAST_OUT): the collective calls the
        others' step makes, with nothing of its own: the BSP sparse exchange (it still
        pushes the summed gradients of the IDs it owns) and the dense all-reduce, after
        which it applies the same dense update as every rank."""
        self.job.empty_steps += 1
        if embeddings is not None:
            embeddings.step = self.step
            embeddings.empty_step(self.step)
        if distributed:
            self._optimizer.zero_grad()
            self._optimizer.step()

    def record_loss(self, loss, examples):
        """This worker's mean loss over its batch of ``examples`` (for progress lines
        and the run directory's curve; rank 0's figures)."""
        self._interval[0] += float(loss) * examples

    def _maybe_log(self, force=False):
        every = self.job.config.training["log_every_steps"] or 50
        if self._interval[1] == 0 or (not force and self.step % every != 0):
            return
        loss = self._interval[0] / self._interval[1]
        self._curve.append({"step": self.step, "examples": self.examples, "loss": loss})
        self._interval = [0.0, 0.0]
        if self.rank == 0:
            rate = (self.examples - self._start_examples) / max(time.monotonic() - self._start, 1e-9)
            self.job.log(f"step {self.step:6d}  examples {self.examples:9d}  {rate:8.0f} ex/s  "
                         f"loss {loss:.5f}")

    def _checkpoint_wanted(self):
        if not self.checkpoints_enabled:
            return False
        every_s = self.job.config.checkpoint["every_seconds"]
        now = time.monotonic()
        if every_s and now - self._last_checkpoint_time >= every_s:
            return True
        if now < self._next_poll:
            return False
        record = self._poll_job(0.2)
        return bool(record and record["checkpoint_requested"])

    def _poll_job(self, timeout_s):
        """The job's record (None when the coordinator did not answer: the next poll is
        10 s later); notes the workers waiting to join an elastic run."""
        now = time.monotonic()
        try:
            record = self.job.jobs.get_job(self.job.name, timeout_s)
        except EmberError:
            self._next_poll = now + 10.0
            return None
        self._next_poll = now + 1.0
        steps = [p["join_at_step"] for p in record.get("pending", [])]
        self._pending_join_step = min(steps) if steps else None
        return record

    # -- elastic runs (docs/ARCHITECTURE.md "Elastic runs", as ember-worker's votes) --
    def _wants_to_leave(self):
        job = self.job
        return job.leave_requested or (job.leave_at_step > 0 and self.step >= job.leave_at_step)

    def _elastic_votes(self):
        """This rank's votes for the step's agreement: 8 to leave, and on rank 0 4 when
        a worker waits to join at or before this step and the world is below MAX."""
        if not self.job.elastic:
            return 0.0
        votes = 8.0 if self._wants_to_leave() else 0.0
        if (self.rank == 0 and self._pending_join_step is not None
                and self._pending_join_step <= self.step
                and self.world_size < self.job.max_workers):
            votes += 4.0
        return votes

    def _elastic_decision(self, decisions):
        """(resize at this step, this worker leaves) from the summed votes: the same on
        every rank. Leavers wait while the rest would be fewer than MIN."""
        if not self.job.elastic:
            return False, False
        leavers, join = decisions >> 3, bool((decisions >> 2) & 1)
        may_leave = leavers > 0 and self.world_size - leavers >= self.job.min_workers
        if leavers > 0 and not may_leave and self.rank == 0 and not self._said_min:
            self._said_min = True
            self.job.log(f"elastic: {leavers} worker(s) asked to leave at step {self.step}, but "
                         f"the run needs at least {self.job.min_workers} of its "
                         f"{self.world_size}; they train on until workers join")
        return join or may_leave, may_leave and self._wants_to_leave()

    def take_checkpoint(self, dataset=None, embeddings=None, resize=False, leaving=False):
        """A checkpoint at this step barrier: every worker calls it at the same step
        (``steps`` does), after its pushes are applied. Fails the attempt (on every
        worker) when it fails. ``resize`` (elastic): the cut a resize starts from;
        ``leaving``: this worker leaves at it."""
        dataset = dataset or self._dataset
        if embeddings is not None:
            embeddings.flush(0)
        if self._model is None:
            raise FailedPreconditionError("track(model, optimizer, dataset) before checkpointing")
        if self.world_size > 1:
            self.collective.barrier()
        cursor = json.dumps(dict(dataset.state(), leaving=bool(leaving))).encode()
        send = [b""] * self.world_size
        send[0] = cursor
        cursors = self.collective.all_to_all(send) if self.world_size > 1 else [cursor]
        failed = None
        if self.rank == 0:
            state = {
                "step": self.step, "examples": self.examples, "world_size": self.world_size,
                "epoch": self.epoch,
                "dense_parameters": dense_state.parameters_to_bytes(self._model),
                "dense_optimizer_state": dense_state.optimizer_state_to_bytes(
                    self._model, self._optimizer),
                "config_digest": self.job.digest, "config": self.job.config_bytes,
                "cursors": [dict(json.loads(c), rank=r) for r, c in enumerate(cursors)],
                "data": self._data_progress, "data_files": dataset.dataset_files,
                "epoch_examples": self.epoch_examples,
            }
            try:
                m = self.job.jobs.checkpoint(self.job.name, self.job.generation, self.number,
                                             state, self.job.recovery_timeout_s, resize=resize)
                leavers = sum(1 for c in state["cursors"] if c["leaving"])
                self.job.log(f"checkpoint {m['name']} at step {self.step} "
                             f"({'delta' if m['incremental'] else 'full'}, "
                             f"{m['bytes'] / 1e6:.1f} MB, {m['seconds']:.2f}s)" +
                             (f": the run resizes ({leavers} of {self.world_size} worker(s) "
                              f"leave)" if resize else ""))
            except EmberError as e:
                failed = e
        flag = np.array([0.0 if failed is None else 1.0], dtype=np.float32)
        if self.world_size > 1:
            self.collective.all_reduce_sum(flag)
        if failed is not None:
            raise failed
        if flag[0] > 0.5:
            raise AbortedError(f"checkpoint at step {self.step} failed on rank 0")
        self._last_checkpoint_step = self.step
        self._last_checkpoint_time = time.monotonic()
        self.checkpoints_taken += 1

    # -- the end ---------------------------------------------------------------------
    def checksums(self):
        """(sparse rows, sparse digest, dense digest) of the model now: equal across
        shard counts and in BSP across runs; call after ``steps`` ended."""
        tables = [t["name"] for t in self.job.config.tables]
        sums = self.client.checksum()
        rows, h = 0, hashlib.blake2b(digest_size=8)
        for name in sorted(sums):
            if tables and name not in tables:
                continue
            rows += sums[name][0]
            h.update(f"{name}:{sums[name][0]}:{sums[name][1]};".encode())
        dense = hashlib.blake2b(dense_state.parameters_to_bytes(self._model), digest_size=8)
        return rows, int.from_bytes(h.digest(), "little"), int.from_bytes(dense.digest(), "little")

    def finish(self, evaluation=None):
        """The run's result (a dict: steps, examples, examples_per_sec, checksums, the
        evaluation's figures), written by rank 0 into the job's run_dir as ember-worker
        writes it (result.json, metrics.tsv, training.svg)."""
        seconds = getattr(self, "_train_seconds", None) or 1e-9
        result = {"steps": self.step, "examples": self.examples, "train_seconds": seconds,
                  "examples_per_sec": (self.examples - self._start_examples) / seconds,
                  "final_loss": self._curve[-1]["loss"] if self._curve else 0.0,
                  "attempt": self.number, "recoveries": self.recoveries,
                  "rank": self.rank, "world_size": self.world_size, "resizes": self.resizes,
                  "left": False, "examples_per_epoch": list(self.epoch_examples),
                  "empty_steps": self.job.empty_steps,
                  "checkpoints": self.checkpoints_taken, "resumed_from": self.checkpoint}
        if self._model is not None:
            rows, sparse, dense = self.checksums()
            result.update({"sparse_rows": rows, "sparse_checksum": sparse,
                           "dense_checksum": dense,
                           "model_checksum": int.from_bytes(hashlib.blake2b(
                               f"{sparse}:{dense}".encode(), digest_size=8).digest(), "little")})
        if evaluation:
            result.update(evaluation)
            if self._curve:
                self._curve[-1]["test_auc"] = evaluation.get("test_auc")
                self._curve[-1]["test_logloss"] = evaluation.get("test_logloss")
        stages = self.stage_split()
        if stages:
            result["stage_seconds"] = stages
        if self.rank == 0:
            line = (f"done: {self.step} steps, {self.examples} examples in {seconds:.1f}s "
                    f"({result['examples_per_sec']:.0f} ex/s)")
            if evaluation and "test_auc" in evaluation:
                line += f", test AUC {evaluation['test_auc']:.4f}"
                if "oracle_auc" in evaluation:
                    line += f" (oracle {evaluation['oracle_auc']:.4f})"
            self.job.log(line)
            if stages:
                total = max(sum(stages.values()), 1e-9)
                self.job.log("rank 0 step time: " + ", ".join(
                    f"{k.replace('_', '-')} {100 * v / total:.0f}%" for k, v in stages.items()))
            if self.job.run_dir:
                os.makedirs(self.job.run_dir, exist_ok=True)
                _ember.write_run_directory(self.job.run_dir, self.job.config, self.world_size,
                                           result, self._curve)
        return result

    def stage_split(self):
        """Seconds of this attempt's steps by stage: pull, compute (forward, backward
        and optimizer math: what is left), exchange (BSP sparse all-to-all), push,
        all-reduce (dense gradients)."""
        if getattr(self, "_stages_at_start", None) is None:
            return {}
        from . import torch as ember_torch
        now = {k: v - self._stages_at_start.get(k, 0.0)
               for k, v in ember_torch.stage_seconds.items()}
        compute = max(self._stage["step"] - sum(now.values()), 0.0)
        return {"pull": now["pull"], "compute": compute, "exchange": now["exchange"],
                "push": now["push"], "all_reduce": now["all_reduce"]}

    def close(self):
        """Leaves the attempt's collective and client (peers fail fast, not at their
        timeout)."""
        self.collective = None
        self.client = None
