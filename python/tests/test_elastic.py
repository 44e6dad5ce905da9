"""Elastic Python jobs (ember.Job(workers=(MIN, MAX))) on real clusters: a run that
grows 2 -> 3 and shrinks 3 -> 2 while it trains reads every example of its data once
(no line twice, none skipped: each file is consumed as one unbroken prefix), gives the
same model in two runs of the same schedule, and its leaving worker exits 0; the same
schedule partitioned by a column reads no line twice; a SIGTERM'd worker leaves; and the
Job's refusals of a bad worker range (docs/ARCHITECTURE.md "Elastic runs"). The workers
are elastic_worker.py processes over data written here."""

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ember
import ember.cli
import ember.local
from ember.errors import InvalidArgumentError

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "elastic_worker.py")
FILES, LINES = 6, 5000  # 6 files of 5000 examples; line_id = file * 100000 + line


def write_job(root, name, lines_per_file, seed, epoch_end=""):
    """Files of `lines_per_file` examples under root/train (line_id = file * 100000 +
    line) and a one-epoch config over them; the config's path."""
    data = root / "train"
    data.mkdir()
    rng = random.Random(seed)
    for f, lines in enumerate(lines_per_file):
        with open(data / f"part-{f:02d}.tsv", "w") as out:
            out.write("label\tline_id\tuser_id\tprice\n")
            for line in range(1, lines + 1):
                user = rng.randrange(500)
                click = 1 if rng.random() < 0.2 + 0.5 * (user % 2) else 0
                out.write(f"{click}\t{f * 100000 + line}\t{user}\t{rng.random() * 10:.3f}\n")
    config = root / f"{name}.pbtxt"
    config.write_text(f"""
name: "{name}"
data {{
  format: SCHEMA_TSV
  train_path: "{data}"
  partition_by: "file"
  columns {{ name: "label" kind: LABEL }}
  columns {{ name: "line_id" kind: CATEGORICAL id_encoding: DECIMAL }}
  columns {{ name: "user_id" kind: CATEGORICAL id_encoding: DECIMAL }}
  columns {{ name: "price" kind: DENSE transform: LOG1P }}
}}
tables {{ name: "line" dim: 4 }}
tables {{ name: "user" dim: 4 }}
features {{ column: "line_id" table: "line" }}
features {{ column: "user_id" table: "user" }}
training {{ batch_size: 64 epochs: 1 {epoch_end} }}
checkpoint {{ every_steps: 20 }}
""")
    return str(config)


@pytest.fixture(scope="module")
def elastic_config(tmp_path_factory):
    return write_job(tmp_path_factory.mktemp("elastic"), "elastic_py", [LINES] * FILES, 7)


def start(cluster, config, out, member, *flags):
    log = open(os.path.join(out, f"worker-{member}.log"), "a")
    proc = subprocess.Popen(
        [sys.executable, WORKER, f"--config={config}", f"--coordinator={cluster.coordinator}",
         f"--member={member}", f"--out={out}", *flags],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return proc, log


def wait_all(procs, timeout=300):
    deadline = time.monotonic() + timeout
    for member, (p, log) in procs.items():
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q, _ in procs.values():
                q.kill()
            pytest.fail(f"worker {member} did not end: {open(log.name).read()[-3000:]}")
        log.close()
        assert p.returncode == 0, f"worker {member}: {open(log.name).read()[-3000:]}"


def run_schedule(config, out, max_steps=100):
    """2 workers (a, b); c joins at step 30; b leaves at step 60; max_steps in all (0:
    the epoch). Returns {member: result} and every line each attempt trained."""
    os.makedirs(out)
    common = ["--workers=2:3", f"--max_steps={max_steps}"]
    with ember.local.LocalCluster(shards=2,
                                  coordinator_flags=("--elastic_settle_ms=1000",)) as cluster:
        # c first: it waits (join_at_step 30 keeps it out of the first world) so that
        # rank 0 knows of it from the first step, whatever the start-up times.
        procs = {"c": start(cluster, config, out, "c", *common, "--join_at_step=30")}
        time.sleep(1.0)
        procs["a"] = start(cluster, config, out, "a", *common)
        procs["b"] = start(cluster, config, out, "b", *common, "--leave_at_step=60")
        wait_all(procs)
    results = {m: json.load(open(os.path.join(out, f"result-{m}.json"))) for m in procs}
    lines = np.concatenate([np.load(p) for p in sorted(glob.glob(os.path.join(out, "lines-*.npy")))])
    logs = {m: open(os.path.join(out, f"worker-{m}.log")).read() for m in procs}
    return results, lines, logs


def test_a_run_grows_and_shrinks_reading_every_example_once(elastic_config, tmp_path):
    models = []
    for run in ("one", "two"):
        results, lines, logs = run_schedule(elastic_config, str(tmp_path / run))
        left = {m for m, r in results.items() if r["left"]}
        assert left == {"b"}, results
        final = [r for r in results.values() if not r["left"]]
        assert {r["rank"] for r in final} == {0, 1}, results
        ranks0 = [r for r in final if r["rank"] == 0][0]
        assert ranks0["steps"] == 100 and ranks0["resizes"] == 2, ranks0
        assert "the run resizes (0 of 2 worker(s) leave)" in logs["a"], logs["a"][-3000:]
        assert "the run resizes (1 of 3 worker(s) leave)" in logs["a"], logs["a"][-3000:]
        assert "left the run at step 60" in logs["b"], logs["b"][-2000:]
        # 30 steps of 2 workers, 30 of 3, 40 of 2: every batch full (no file ran out).
        expected = (30 * 2 + 30 * 3 + 40 * 2) * 64
        assert ranks0["examples"] == expected and ranks0["examples_per_epoch"] == [expected]
        # Exactly once: no line twice, and each file read as one prefix from its first
        # line (a skipped line would leave a hole; a line read twice shows here too).
        assert len(lines) == expected and len(np.unique(lines)) == expected
        for f in range(FILES):
            got = np.sort(lines[(lines // 100000) == f] % 100000)
            assert np.array_equal(got, np.arange(1, len(got) + 1)), (f, got[:5], len(got))
        models.append((ranks0["sparse_rows"], ranks0["sparse_checksum"],
                       ranks0["dense_checksum"]))
    assert models[0] == models[1], models  # BSP: the schedule alone fixes the model


def test_partitioned_by_a_column_every_example_is_read_once(elastic_config, tmp_path):
    # Every rank reads every file and keeps its residue of Mix64(user_id): a resize
    # stacks a hash layer (docs/ARCHITECTURE.md "Resuming at another worker count").
    by_user = str(tmp_path / "by_user.pbtxt")
    with open(elastic_config) as f:
        text = f.read()
    assert 'partition_by: "file"' in text
    with open(by_user, "w") as f:
        f.write(text.replace('partition_by: "file"', 'partition_by: "user_id"'))
    results, lines, logs = run_schedule(by_user, str(tmp_path / "run"))
    final = [r for r in results.values() if not r["left"] and r["rank"] == 0][0]
    expected = (30 * 2 + 30 * 3 + 40 * 2) * 64
    assert final["steps"] == 100 and final["resizes"] == 2, final
    assert final["examples"] == expected and final["examples_per_epoch"] == [expected]
    assert len(lines) == expected and len(np.unique(lines)) == expected  # none twice


UNEVEN = [4000, 600, 3000, 600, 2000, 300]  # lines per file: rank 1 of 2 runs out first


@pytest.fixture(scope="module")
def last_out_config(tmp_path_factory):
    """A one-epoch LAST_OUT config over six files of UNEVEN sizes: with 2 workers rank
    1's share (1,500 lines) ends at step 24, rank 0's (9,000) at step 141."""
    return write_job(tmp_path_factory.mktemp("last_out"), "elastic_last_out", UNEVEN, 11,
                     epoch_end="epoch_end: LAST_OUT")


def test_last_out_trains_every_example_of_uneven_files_across_sizes(last_out_config, tmp_path):
    # The epoch ends with the last worker (training.epoch_end LAST_OUT): the one whose
    # share ran out takes empty steps (its part of the sparse exchange and of the dense
    # all-reduce) until the others finish, also across the resizes at steps 30 (a
    # worker out of data then) and 60. Every line of the data is trained exactly once,
    # where FIRST_OUT would end the epoch at step 24, and two runs give the same model.
    total = sum(UNEVEN)
    models = []
    for run in ("one", "two"):
        results, lines, logs = run_schedule(last_out_config, str(tmp_path / run), max_steps=0)
        assert {m for m, r in results.items() if r["left"]} == {"b"}, results
        final = [r for r in results.values() if not r["left"]]
        rank0 = [r for r in final if r["rank"] == 0][0]
        assert rank0["resizes"] == 2 and rank0["steps"] > 60, rank0
        assert rank0["examples"] == total and rank0["examples_per_epoch"] == [total], rank0
        assert len(lines) == total and len(np.unique(lines)) == total
        for f, n in enumerate(UNEVEN):  # every line of every file, once
            got = np.sort(lines[(lines // 100000) == f] % 100000)
            assert np.array_equal(got, np.arange(1, n + 1)), (f, got[:5], len(got), n)
        # Rank 1 of the first two workers ran out at step 24 or 25 and took empty steps
        # until the resize at step 30.
        assert sum(r["empty_steps"] for r in results.values()) >= 5, results
        models.append((rank0["sparse_rows"], rank0["sparse_checksum"], rank0["dense_checksum"]))
    assert models[0] == models[1], models  # BSP: the schedule alone fixes the model


def test_a_worker_sent_sigterm_leaves_at_a_checkpoint_and_exits_0(elastic_config, tmp_path):
    out = str(tmp_path)
    common = ["--workers=1:2", "--max_steps=200", "--step_sleep_ms=20"]
    with ember.local.LocalCluster(shards=1,
                                  coordinator_flags=("--elastic_settle_ms=1000",)) as cluster:
        procs = {m: start(cluster, elastic_config, out, m, *common) for m in ("a", "b")}
        deadline = time.monotonic() + 120
        while not glob.glob(os.path.join(cluster.checkpoint_dir, "**", "ckpt-00000000002*"),
                            recursive=True):
            assert time.monotonic() < deadline, "no checkpoint at step 20"
            assert all(p.poll() is None for p, _ in procs.values()), "a worker ended early"
            time.sleep(0.05)
        procs["b"][0].send_signal(signal.SIGTERM)
        wait_all(procs)
    results = {m: json.load(open(os.path.join(out, f"result-{m}.json"))) for m in procs}
    log_b = open(os.path.join(out, "worker-b.log")).read()
    assert results["b"]["left"] and "SIGTERM: leaving the run" in log_b, log_b[-2000:]
    a = results["a"]
    assert not a["left"] and a["rank"] == 0 and a["world_size"] == 1, a
    assert a["steps"] == 200 and a["resizes"] == 1, a
    lines = np.concatenate([np.load(p) for p in glob.glob(os.path.join(out, "lines-*.npy"))])
    assert len(lines) == a["examples"] == sum(a["examples_per_epoch"])
    assert len(np.unique(lines)) == len(lines)


def test_a_bad_worker_range_is_refused(elastic_config):
    config = ember.load_config(elastic_config)
    for workers in [(0, 2), (3, 2), "2", "a:b", (1.5, 2), 3]:
        with pytest.raises(InvalidArgumentError):
            ember.Job(config, "127.0.0.1:1", workers=workers, log=None)
    with pytest.raises(InvalidArgumentError, match="coordinator's to assign"):
        ember.Job(config, "127.0.0.1:1", workers=(1, 2), rank=0, world_size=2, log=None)
    with pytest.raises(InvalidArgumentError, match="for elastic runs"):
        ember.Job(config, "127.0.0.1:1", join_at_step=5, log=None)
    with pytest.raises(InvalidArgumentError, match="member id"):
        ember.Job(config, "127.0.0.1:1", workers="1:2", member="x" * 129, log=None)
    args = ember.cli.parser("elastic", elastic_config, "run").parse_args(
        ["--coordinator=127.0.0.1:1", "--workers=2:3", "--rank=1", "--world_size=3"])
    with pytest.raises(InvalidArgumentError, match="leave out --rank and --world_size"):
        ember.cli.start_job(args, config)
    with pytest.raises(InvalidArgumentError, match="integer >= 0"):
        ember.Job(config, "127.0.0.1:1", workers="1:2", leave_at_step=-1, log=None)
