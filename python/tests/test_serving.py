"""A Python job as operators and serving see it: emberctl lists it and checkpoints it on
request, and an ember-serving follower serves its rows and its dense parameters, which
ember.serving loads into the PyTorch model."""

import hashlib
import importlib.util
import os
import subprocess
import sys
import time

import numpy as np
import torch

import ember
import ember.serving
import ember.state
from conftest import REPO, write_config


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_emberctl_checkpoints_a_python_job_and_a_follower_serves_it(quickstart_data, tmp_path):
    base, _ = quickstart_data
    # Small batches, no checkpoint period: every checkpoint but step 0's and the last
    # is one an operator asked for.
    config = write_config(tmp_path / "c.pbtxt", base,
                          replace=[("batch_size: 1024", "batch_size: 128")])
    with ember.local.LocalCluster(shards=2) as cluster:
        log = open(tmp_path / "worker.log", "w")
        worker = subprocess.Popen(
            [sys.executable, os.path.join(REPO, "examples", "dlrm.py"), f"--config={config}",
             f"--coordinator={cluster.coordinator}", "--no_eval", f"--run_dir={tmp_path}/run",
             f"--result_json={tmp_path}/result.json", "--threads=1"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while "step " not in open(tmp_path / "worker.log").read():
            assert worker.poll() is None and time.monotonic() < deadline, \
                open(tmp_path / "worker.log").read()
            time.sleep(0.05)
        status = cluster.emberctl("status").stdout
        assert "quickstart" in status and "RUNNING" in status, status
        created = cluster.emberctl("checkpoint", "create", "--job=quickstart",
                                   "--wait_ms=60000").stdout
        taken = created.split()[-1]  # "checkpoint NAME"
        assert worker.wait(timeout=300) == 0, open(tmp_path / "worker.log").read()[-3000:]
        log.close()
        lines = [l for l in open(tmp_path / "worker.log") if l.startswith("checkpoint ")]
        names = [l.split()[1] for l in lines]
        # Step 0's, then the operator's: a checkpoint of its own, or the run's last when
        # the request reached the workers at their final barrier (a fast run).
        assert len(names) >= 2 and " at step 0 " in lines[0], lines
        assert taken in names[1:], (created, lines)
        listed = cluster.emberctl("checkpoint", "list", "--job=quickstart").stdout
        assert all(name in listed for name in names), listed
        assert "FINISHED" in cluster.emberctl("status").stdout

        import json
        result = json.load(open(tmp_path / "result.json"))
        address = cluster.start_serving(wait_following=True)
        follower = ember.serving.Follower(address)
        client = ember.Client(cluster.coordinator)
        client.create_table(ember.load_config(config).tables[1]["text"])  # register "item"
        ids = np.arange(1, 2001, dtype=np.int64)
        deadline = time.monotonic() + 60
        while not np.array_equal(follower.lookup("item", ids), client.pull("item", ids)):
            assert time.monotonic() < deadline, "the follower never caught up"
            time.sleep(0.1)
        dlrm = load_example("dlrm")
        torch.manual_seed(7)  # other weights than the job's
        model = dlrm.DLRM(3, 8, 16)
        step = follower.load_dense(model)
        assert step == result["steps"]
        digest = hashlib.blake2b(ember.state.parameters_to_bytes(model), digest_size=8)
        assert int.from_bytes(digest.digest(), "little") == result["dense_checksum"]
