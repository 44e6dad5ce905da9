"""ember.data: a dataset in Ember's formats (Criteo TSV, schema TSV; plain or gzip),
read by the native readers of ember-worker, partitioned by rank (by file or by a
user-ID column, as the model config's ``data.partition_by`` says), yielding torch
tensors, with a cursor that checkpoints.

    config = ember.load_config("configs/quickstart.pbtxt")
    data = ember.data.Dataset(config, "train", rank=0, world_size=1)
    for batch in data:              # every epoch of training.epochs
        batch.labels                # float32 [B]
        batch.dense                 # float32 [B, dense columns] (transforms applied)
        batch.ids["item_id"]        # int64 [IDs of the batch], batch.offsets[...] [B + 1]

Parsing runs on a background thread (the GIL is released while the native reader
parses), ``prefetch`` batches ahead. ``state()`` is the cursor of the next batch not yet
handed out (epoch, file index, line), ``load_state`` continues from one: what a job's
checkpoint keeps.
"""

import queue
import threading

import torch

from . import _ember
from .errors import FailedPreconditionError, InvalidArgumentError

_END = object()


class Batch:
    """One batch: labels, weights, dense (torch tensors sharing the reader's NumPy
    buffers), per-feature IDs and offsets (CSR: example i's IDs are
    ids[f][offsets[f][i]:offsets[f][i + 1]]), the EVAL columns (test data), and the
    cursor it starts at."""

    __slots__ = ("size", "labels", "weights", "dense", "ids", "offsets", "eval", "features",
                 "cursor", "step", "prepared", "_raw")

    def __init__(self, raw, features, eval_columns, cursor):
        self.size = raw["size"]
        self.labels = torch.from_numpy(raw["labels"])
        self.weights = torch.from_numpy(raw["weights"])
        self.dense = torch.from_numpy(raw["dense"])
        self.features = features
        self.ids = {f: torch.from_numpy(a) for f, a in zip(features, raw["ids"])}
        self.offsets = {f: torch.from_numpy(a) for f, a in zip(features, raw["offsets"])}
        self.eval = {c: torch.from_numpy(a) for c, a in zip(eval_columns, raw["eval"])}
        self.cursor = cursor
        self.step = 0
        self.prepared = None  # its pulls, started early (ember.torch; SSP/ASP prefetch)
        self._raw = raw

    @classmethod
    def from_tensors(cls, labels, ids, offsets, dense=None, weights=None):
        """A batch built in Python (features in ``ids``' order): for data that does not
        come from an Ember reader."""
        features = list(ids)
        n = int(labels.shape[0])
        raw = {"size": n, "labels": labels.detach().to(torch.float32).numpy(),
               "weights": (weights if weights is not None else torch.ones(n)).detach().to(torch.float32).numpy(),
               "dense": (dense if dense is not None else torch.zeros(n, 0)).detach().to(torch.float32).numpy(),
               "ids": [ids[f].detach().numpy() for f in features],
               "offsets": [offsets[f].detach().numpy() for f in features],
               "eval": []}
        return cls(raw, features, [], None)

    def native_ids(self, features):
        """The NumPy IDs and offsets of ``features`` (in that order)."""
        index = {f: i for i, f in enumerate(self.features)}
        missing = [f for f in features if f not in index]
        if missing:
            raise InvalidArgumentError(
                f"the batch has no feature {missing[0]!r}; it has {self.features}")
        return ([self._raw["ids"][index[f]] for f in features],
                [self._raw["offsets"][index[f]] for f in features])


class Dataset:
    """One rank's partition of a dataset, over ``epochs`` epochs.

    ``split``: "train" or "test" (the config's data paths) or a path. Test data is read
    with its EVAL columns, one epoch. ``batch_size`` and ``epochs`` default to the
    config's training section."""

    def __init__(self, config, split="train", rank=0, world_size=1, batch_size=None,
                 epochs=None, with_eval_columns=None, prefetch=2):
        if split == "train":
            path = config.train_path
        elif split == "test":
            path = config.test_path
            if not path:
                raise InvalidArgumentError(f"config '{config.name}' has no data.test_path")
        else:
            path = str(split)
        training = config.training
        self.config = config
        self.path = path
        self.rank, self.world_size = rank, world_size
        self.batch_size = int(batch_size if batch_size is not None else training["batch_size"])
        if self.batch_size <= 0:
            raise InvalidArgumentError(f"batch_size {self.batch_size} is not > 0")
        self.epochs = int(epochs if epochs is not None else (1 if split == "test" else training["epochs"]))
        if self.epochs <= 0:
            raise InvalidArgumentError(f"epochs {self.epochs} is not > 0")
        if with_eval_columns is None:
            with_eval_columns = split == "test"
        self.features = [f["name"] for f in config.features]
        self.eval_columns = config.eval_columns if with_eval_columns else []
        self._reader = _ember.Reader(config, path, rank=rank, world_size=world_size,
                                     with_eval_columns=bool(with_eval_columns))
        self._prefetch = max(1, int(prefetch))
        self.epoch = 0
        self._head = None        # the next batch, read but not handed out
        self._queue = None
        self._thread = None
        self._stop = threading.Event()
        self._started = False

    # -- the cursor ------------------------------------------------------------------
    def state(self):
        """The cursor of the next batch to be handed out: {epoch, file_index, line}. At
        the end of an epoch that is the next epoch's start ({epoch + 1, 0, 0}): this
        rank has nothing left of the epoch (in a job whose epochs end with the last
        worker, the others may still be reading theirs)."""
        head = self.peek()
        if head is None:
            return {"epoch": min(self.epoch + 1, self.epochs), "file_index": 0, "line": 0}
        return dict(head.cursor)

    def load_state(self, cursor):
        """Continues from a ``state()`` of a dataset over the same data and options."""
        if self._started:
            raise FailedPreconditionError("load_state must come before the first batch")
        epoch = int(cursor["epoch"])
        if not 0 <= epoch <= self.epochs:
            raise InvalidArgumentError(f"cursor epoch {epoch} is not in [0, {self.epochs}]")
        self.epoch = epoch
        if epoch < self.epochs:
            self._reader.seek(int(cursor["file_index"]), int(cursor["line"]))

    def resume(self, state, origin="checkpoint"):
        """Continues a job's reading after a checkpoint's worker state (a JoinJob
        answer's ``state``), as this dataset's rank of its world size: the checkpoint's
        own world size continues each rank's cursor; another one continues the epoch
        with every example the checkpoint's workers had not consumed read exactly once
        by one rank (docs/ARCHITECTURE.md "Resuming at another worker count"). Returns
        the data progress that this world size's checkpoints carry (bytes).
        FailedPreconditionError when the dataset's files are not the checkpoint's."""
        if self._started:
            raise FailedPreconditionError("resume must come before the first batch")
        first_out = self.config.training.get("epoch_end", "FIRST_OUT") == "FIRST_OUT"
        point = self._reader.resume_from(state, self.epochs, origin, first_out)
        self.epoch = int(point["epoch"])
        return point["progress"]

    @property
    def dataset_files(self):
        """The dataset's file names (within its path, sorted), as checkpoints record them."""
        return self._reader.dataset_files

    # -- reading ---------------------------------------------------------------------
    def _produce(self, q, stop):
        try:
            while not stop.is_set():
                start = self._reader.position
                raw = self._reader.next(self.batch_size)
                if raw is None:
                    q.put((_END, self._reader.position))
                    return
                q.put((raw, start))
        except BaseException as e:  # handed to the consumer
            q.put((e, None))

    def _start_epoch(self):
        self._started = True
        self._stop = threading.Event()
        self._queue = queue.Queue(maxsize=self._prefetch)
        self._thread = threading.Thread(target=self._produce, args=(self._queue, self._stop),
                                        daemon=True, name=f"ember-data-{self.rank}")
        self._thread.start()

    def _stop_thread(self):
        if self._thread is None:
            return
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()
        self._thread = None
        self._queue = None

    def peek(self):
        """The next batch of the current epoch, or None at its end (and at the end of
        the last epoch). Does not hand it out."""
        if self._head is not None:
            return self._head
        if self.epoch >= self.epochs:
            return None
        if self._thread is None:
            if getattr(self, "_epoch_ended", False):
                return None
            self._start_epoch()
        item, position = self._queue.get()
        if isinstance(item, BaseException):
            self._thread.join()
            self._thread = None
            raise item
        if item is _END:
            self._thread.join()
            self._thread = None
            self._epoch_ended = True
            return None
        cursor = {"epoch": self.epoch, "file_index": position[0], "line": position[1]}
        self._head = Batch(item, self.features, self.eval_columns, cursor)
        return self._head

    def pop(self):
        """Hands out the next batch of the current epoch (None at its end)."""
        batch = self.peek()
        self._head = None
        return batch

    def next_epoch(self):
        """Ends the current epoch (dropping its unread batches: every worker ends an
        epoch when the first runs out) and starts the next one."""
        self._stop_thread()
        self._head = None
        self._epoch_ended = False
        self.epoch += 1
        if self.epoch < self.epochs:
            self._reader.rewind()

    def __iter__(self):
        """Every remaining batch of every remaining epoch (one worker; a job's
        ``Attempt.steps`` makes workers agree on epoch ends)."""
        while self.epoch < self.epochs:
            batch = self.pop()
            if batch is None:
                self.next_epoch()
                continue
            yield batch

    @property
    def stats(self):
        """The reader's counts: lines, examples, malformed, first_errors."""
        return self._reader.stats

    @property
    def files(self):
        return self._reader.files

    def close(self):
        self._stop_thread()

    def __del__(self):
        try:
            self._stop_thread()
        except Exception:
            pass
