"""Python jobs on real clusters: a 2-worker BSP job ends bitwise equal on 1 and on 3
shards, and a PS SIGKILL during a job is recovered with the model bitwise equal to the
fault-free run's (docs/ARCHITECTURE.md invariants 5 and 6). The workers are
examples/dlrm.py processes."""

import glob
import json
import os
import subprocess
import sys
import time

import pytest

import ember.local
from conftest import REPO, write_config

EXAMPLE = os.path.join(REPO, "examples", "dlrm.py")


def start_workers(cluster, config, out_dir, world=2, extra=(), only=None, evaluate=False):
    procs = []
    for rank in range(world) if only is None else [only]:
        log = open(os.path.join(out_dir, f"worker{rank}.log"), "a")
        procs.append((subprocess.Popen(
            [sys.executable, EXAMPLE, f"--config={config}", f"--coordinator={cluster.coordinator}",
             f"--rank={rank}", f"--world_size={world}", *([] if evaluate else ["--no_eval"]),
             f"--run_dir={out_dir}/run", f"--result_json={out_dir}/result{rank}.json", *extra],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS="1")), log))
    return procs


def wait_workers(procs, out_dir, timeout=240):
    deadline = time.monotonic() + timeout
    for rank, (p, log) in enumerate(procs):
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q, _ in procs:
                q.kill()
            pytest.fail(f"worker {rank} did not finish: {open(log.name).read()[-3000:]}")
        log.close()
        assert p.returncode == 0, open(log.name).read()[-3000:]
    return [json.load(open(os.path.join(out_dir, f"result{r}.json"))) for r in range(len(procs))]


def model_of(result):
    return (result["sparse_rows"], result["sparse_checksum"], result["dense_checksum"],
            result["steps"], result["examples"])


def test_bsp_two_workers_are_bitwise_equal_on_one_and_three_shards(quickstart_data, tmp_path):
    config, _ = quickstart_data
    models = []
    for shards in (1, 3):
        out = tmp_path / f"s{shards}"
        out.mkdir()
        with ember.local.LocalCluster(shards=shards) as cluster:
            results = wait_workers(start_workers(cluster, config, str(out)), str(out))
        assert results[0]["dense_checksum"] == results[1]["dense_checksum"]  # same weights
        models.append(model_of(results[0]))
    assert models[0] == models[1], models
    assert models[0][0] > 1000 and models[0][3] > 20  # it trained


def run_with_fault(config, tmp_path, name, fault):
    """Runs the 2-worker job on 2 shards and calls fault(cluster, procs, restart) once its
    step-20 checkpoint exists; returns rank 0's result and log."""
    out = tmp_path / name
    out.mkdir()
    with ember.local.LocalCluster(shards=2) as cluster:
        procs = start_workers(cluster, config, str(out))
        deadline = time.monotonic() + 120
        while not glob.glob(os.path.join(cluster.checkpoint_dir, "**", "ckpt-00000000002*"),
                            recursive=True):
            assert time.monotonic() < deadline, "no checkpoint at step 20"
            assert all(p.poll() is None for p, _ in procs), "a worker ended early"
            time.sleep(0.05)

        def restart(rank):
            procs[rank][0].wait()
            procs[rank][1].close()
            procs[rank] = start_workers(cluster, config, str(out), only=rank)[0]

        fault(cluster, procs, restart)
        got = wait_workers(procs, str(out))
    return got[0], open(os.path.join(out, "worker0.log")).read()


@pytest.fixture(scope="module")
def fault_free(quickstart_data, tmp_path_factory):
    base, _ = quickstart_data
    root = tmp_path_factory.mktemp("faults")
    config = write_config(root / "ckpt.pbtxt", base,
                          replace=[("batch_size: 1024", "batch_size: 256")],
                          append="\ncheckpoint { every_steps: 10 }\n")
    clean = root / "clean"
    clean.mkdir()
    with ember.local.LocalCluster(shards=2) as cluster:
        expected = wait_workers(start_workers(cluster, config, str(clean)), str(clean))
    return config, expected[0]


def test_a_ps_sigkill_is_recovered_bitwise(fault_free, tmp_path):
    config, expected = fault_free

    def kill_shard_1(cluster, procs, restart):
        cluster.kill_shard(1)  # SIGKILL
        cluster.restart_shard(1)

    got, log = run_with_fault(config, tmp_path, "ps", kill_shard_1)
    assert "rejoining" in log and "resuming from checkpoint" in log, log[-3000:]
    assert got["recoveries"] >= 1
    assert model_of(got) == model_of(expected)


def test_a_worker_sigkill_is_recovered_bitwise(fault_free, tmp_path):
    config, expected = fault_free

    def kill_rank_1(cluster, procs, restart):
        procs[1][0].kill()  # SIGKILL; its supervisor starts it again
        restart(1)

    got, log = run_with_fault(config, tmp_path, "worker", kill_rank_1)
    assert "rejoining" in log and "resuming from checkpoint" in log, log[-3000:]
    assert model_of(got) == model_of(expected)


def test_a_coordinator_sigkill_loses_nothing(fault_free, tmp_path):
    config, expected = fault_free

    def kill_coordinator(cluster, procs, restart):
        cluster.kill_coordinator()
        cluster.restart_coordinator()

    got, log = run_with_fault(config, tmp_path, "coordinator", kill_coordinator)
    assert model_of(got) == model_of(expected), log[-3000:]


def test_ssp_and_asp_jobs_train_every_example(quickstart_data, tmp_path):
    base, _ = quickstart_data
    for mode in ("SSP", "ASP"):
        config = write_config(tmp_path / f"{mode}.pbtxt", base,
                              replace=[("consistency: BSP", f"consistency: {mode}")])
        out = tmp_path / mode
        out.mkdir()
        with ember.local.LocalCluster(shards=2) as cluster:
            results = wait_workers(start_workers(cluster, config, str(out), evaluate=True),
                                   str(out))
        assert results[0]["examples"] == 60000, results[0]
        assert results[0]["dense_checksum"] == results[1]["dense_checksum"]  # same weights
        assert results[0]["sparse_rows"] > 1000
        # It learned: 0.651 in both modes (2026-12-02); a model that does not learn: 0.5.
        assert results[0]["test_auc"] > 0.62, (mode, results[0])


def test_a_missing_peer_fails_a_fresh_job_once_naming_the_fix(quickstart_data, tmp_path):
    import ember
    from ember import errors
    config = ember.load_config(quickstart_data[0])
    with ember.local.LocalCluster(shards=1) as cluster:
        job = ember.Job(config, cluster.coordinator, rank=0, world_size=2,
                        collective_timeout_s=2.0, log=None)
        t0 = time.monotonic()
        with pytest.raises(errors.FailedPreconditionError, match="start every rank 0..1"):
            job.run(lambda attempt: pytest.fail("an attempt ran without its peer"))
        assert time.monotonic() - t0 < 30  # one rendezvous timeout, not 100 recoveries


def test_a_second_run_says_what_it_does_with_the_rows(quickstart_data):
    import ember
    from ember import errors
    config = ember.load_config(quickstart_data[0])
    with pytest.raises(errors.InvalidArgumentError, match="rows must be"):
        ember.Job(config, "127.0.0.1:1", rows="maybe", log=None)
    with pytest.raises(errors.InvalidArgumentError, match="resume_from"):
        ember.Job(config, "127.0.0.1:1", rows="fresh", resume_from="latest", log=None)
    with ember.local.LocalCluster(shards=1) as cluster:
        first = ember.Job(config, cluster.coordinator, generation=1, log=None)
        assert first.run(lambda attempt: "first") == "first"  # a new cluster: no choice
        unsaid = ember.Job(config, cluster.coordinator, generation=2, log=None)
        with pytest.raises(errors.FailedPreconditionError, match="--rows=continue"):
            unsaid.run(lambda attempt: pytest.fail("a run that said nothing trained"))
        fresh = ember.Job(config, cluster.coordinator, generation=3, rows="fresh", log=None)
        assert fresh.run(lambda attempt: "fresh") == "fresh"


def test_runs_named_by_run_id_get_their_generations_from_the_coordinator(quickstart_data):
    import ember
    from ember import errors
    config = ember.load_config(quickstart_data[0])
    with pytest.raises(errors.InvalidArgumentError, match="not both"):
        ember.Job(config, "127.0.0.1:1", run_id="a", generation=3, log=None)
    with pytest.raises(errors.InvalidArgumentError, match="1..128 bytes"):
        ember.Job(config, "127.0.0.1:1", run_id="x" * 129, log=None)
    with ember.local.LocalCluster(shards=1) as cluster:
        seen = []
        for run_id in ("uid-1", "uid-2"):
            job = ember.Job(config, cluster.coordinator, run_id=run_id, rows="continue",
                            log=None)
            assert job.run(lambda attempt: attempt.job.generation) == job.generation
            seen.append(job.generation)
        assert seen[0] >= 1 and seen[1] > seen[0], seen  # no hand-picked numbers
        # A superseded run is refused, naming the newer generation.
        old = ember.Job(config, cluster.coordinator, run_id="uid-1", rows="continue", log=None)
        with pytest.raises(errors.FailedPreconditionError):
            old.run(lambda attempt: pytest.fail("a superseded run trained"))


def test_jobs_with_tables_of_their_own_run_at_once_with_their_own_rows(quickstart_data):
    """Two jobs with own_tables train at once on one cluster and name the same table;
    each sees only its own rows (ps.proto PullRequest.job), and a third job's join on the
    shared tables goes on beside them."""
    import threading

    import numpy as np

    import ember
    from ember import errors
    config = ember.load_config(quickstart_data[0])
    with pytest.raises(errors.InvalidArgumentError, match="own_tables"):
        ember.Job(config, "127.0.0.1:1", own_tables="yes", log=None)
    with ember.local.LocalCluster(shards=2) as cluster:
        both_in = threading.Barrier(2, timeout=60)
        rows = {}

        def train(attempt, grad):
            client = attempt.client
            client.create_table(ember.Table("shared_name", dim=4, optimizer="sgd",
                                            learning_rate=1.0))
            both_in.wait()  # both attempts are running at once
            client.push("shared_name", [1, 2, 3], np.full((3, 4), grad, np.float32))
            both_in.wait()
            rows[attempt.job.name] = client.pull("shared_name", [1, 2, 3])
            return attempt.job.name

        jobs = [ember.Job(config, cluster.coordinator, name=name, own_tables=True, log=None)
                for name in ("own-a", "own-b")]
        results = {}
        threads = [threading.Thread(target=lambda j=j, g=g: results.update(
            {j.name: j.run(lambda attempt: train(attempt, g))}))
            for j, g in zip(jobs, (1.0, 2.0))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert results == {"own-a": "own-a", "own-b": "own-b"}
        # SGD with learning rate 1 from the same init rows: each job's rows moved by its
        # own gradient only.
        np.testing.assert_allclose(rows["own-a"] - rows["own-b"], np.full((3, 4), 1.0),
                                   atol=1e-6)
        # The shared tables were never touched: a client of them does not know the table.
        with pytest.raises(errors.NotFoundError):
            ember.Client(cluster.coordinator).table("shared_name")
