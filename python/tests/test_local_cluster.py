# Copyright 2026 The Ember Authors.
"""Tests of python/ember/local.py: LocalCluster runs the real binaries (build/bin, or
$EMBER_BIN) and emberctl checks what they serve.

    /usr/bin/python3 -m pytest -q python/tests/test_local_cluster.py
"""

import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess

import pytest

_LOCAL_PY = pathlib.Path(__file__).resolve().parents[1] / "ember" / "local.py"


def _load_local():
    # By path: python/ember/__init__.py imports the compiled module, which a test of
    # this pure-Python file must not need.
    spec = importlib.util.spec_from_file_location("ember_local_under_test", _LOCAL_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


local = _load_local()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _shards(cluster):
    """`emberctl shards list --json` of the cluster, run as an operator would."""
    result = subprocess.run(
        [os.path.join(cluster.bin_dir, "emberctl"), f"--coordinator={cluster.coordinator}",
         f"--admin_token_file={cluster.admin_token_file}", "shards", "list", "--json"],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    return listing["epoch"], {s["shard_id"]: s for s in listing["shards"]}


def _assert_serves(cluster, i, shards, epoch):
    shard = shards[i]
    assert shard["state"] == "ALIVE"
    assert shard["address"] == cluster.shard_addresses[i]
    assert shard["error"] is None  # it answered GetShardInfo
    assert shard["epoch"] == epoch
    assert shard["slots"] > 0


@pytest.fixture(scope="module")
def cluster():
    with local.LocalCluster(shards=2) as c:
        yield c


def test_missing_bin_dir_names_the_path(tmp_path):
    missing = tmp_path / "no-such-bin"
    with pytest.raises(FileNotFoundError, match="build first") as error:
        local.LocalCluster(bin_dir=missing)
    assert str(missing) in str(error.value)


def test_ember_bin_names_the_binary_missing_there(tmp_path, monkeypatch):
    (tmp_path / "ember-coordinator").write_text("#!/bin/sh\n")
    (tmp_path / "ember-coordinator").chmod(0o755)
    monkeypatch.setenv("EMBER_BIN", str(tmp_path))
    with pytest.raises(FileNotFoundError) as error:
        local.LocalCluster()
    assert f"{tmp_path} (no ember-ps)" in str(error.value)


def test_two_shards_serve_their_slots(cluster):
    assert cluster.coordinator.startswith("127.0.0.1:")
    assert sorted(cluster.shard_addresses) == [0, 1]
    epoch, shards = _shards(cluster)
    assert epoch > 0
    assert sorted(shards) == [0, 1]
    for i in (0, 1):
        _assert_serves(cluster, i, shards, epoch)
    assert "2 alive" in cluster.emberctl("status", "--sample_ms=0").stdout


def test_a_killed_shard_restarts_with_its_slots(cluster):
    _, before = _shards(cluster)
    old_pid = cluster.pids()["ps-1"]

    assert cluster.kill_shard(1) == -signal.SIGKILL
    assert not _alive(old_pid)
    assert "ps-1" not in cluster.pids()

    assert cluster.restart_shard(1) == cluster.shard_addresses[1]
    assert cluster.pids()["ps-1"] != old_pid
    epoch, after = _shards(cluster)
    for i in (0, 1):
        _assert_serves(cluster, i, after, epoch)
    assert after[1]["slots"] == before[1]["slots"]
    assert after[1]["address"] == before[1]["address"]


def test_a_killed_coordinator_restarts_on_its_address(cluster):
    address = cluster.coordinator
    assert cluster.kill_coordinator() == -signal.SIGKILL
    assert cluster.restart_coordinator() == address
    epoch, shards = _shards(cluster)
    for i in (0, 1):
        _assert_serves(cluster, i, shards, epoch)


def test_a_killed_follower_restarts_on_its_address(cluster):
    address = cluster.start_serving()
    assert address == cluster.serving_addresses[0]
    assert cluster.kill_serving(0) == -signal.SIGKILL
    assert cluster.start_serving(0) == address


def test_stop_leaves_no_process():
    with local.LocalCluster(shards=1) as c:
        follower = c.start_serving(wait_following=True)
        status = json.loads(c.emberctl("serving", "status", f"--serving={follower}",
                                       "--json").stdout)
        assert status["ready"]
        pids = c.pids()
        root = c.root
        assert sorted(pids) == ["coordinator", "ps-0", "serving-0"]
        assert c.stop() == {"serving-0": 0, "ps-0": 0, "coordinator": 0}  # clean exits
    assert c.stop() == {}  # idempotent (and __exit__ stopped nothing more)
    assert not any(_alive(pid) for pid in pids.values())
    assert not os.path.exists(root)  # the temporary root is removed


def test_a_process_that_exits_at_start_fails_with_its_log():
    c = local.LocalCluster(coordinator_flags=("--no_such_flag=1",))
    try:
        with pytest.raises(RuntimeError, match="coordinator exited") as error:
            c.start()
        assert "no_such_flag" in str(error.value)  # the log's tail, with the usage error
        assert c.pids() == {}
        assert "no_such_flag" in c.log_tail("coordinator")  # the logs stay for a look
    finally:
        shutil.rmtree(c.root, ignore_errors=True)
