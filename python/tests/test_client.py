"""ember.Client against a real 2-shard cluster: pushes apply the table's optimizer
exactly as documented, checksums, and bad input (a clear exception, nothing applied)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import errors


def test_push_applies_sgd_and_adagrad_as_documented(cluster):
    c = ember.Client(cluster.coordinator)
    c.create_table(ember.Table("sgd", dim=4, optimizer="sgd", learning_rate=0.5))
    c.create_table(ember.Table("ada", dim=4, optimizer="adagrad", learning_rate=0.1,
                               initial_accumulator=0.1))
    ids = np.array([1, 7, 2**62 + 3], dtype=np.int64)
    g = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    w0 = c.pull("sgd", ids)
    c.push("sgd", ids, g)
    np.testing.assert_allclose(c.pull("sgd", ids), w0 - 0.5 * g, rtol=1e-6, atol=1e-7)
    a0 = c.pull("ada", ids)
    c.push("ada", ids, g)
    c.push("ada", ids, g)
    acc1 = 0.1 + g * g
    w1 = a0 - 0.1 * g / (np.sqrt(acc1) + 1e-8)
    w2 = w1 - 0.1 * g / (np.sqrt(acc1 + g * g) + 1e-8)
    np.testing.assert_allclose(c.pull("ada", ids), w2, rtol=1e-5, atol=1e-6)
    sums = c.checksum()
    assert sums["sgd"][0] == 3 and sums["ada"][0] == 3


def test_uint64_and_int64_ids_are_the_same_rows(cluster):
    c = ember.Client(cluster.coordinator)
    c.create_table(ember.Table("t", dim=2, optimizer="sgd", learning_rate=1.0))
    big = np.array([2**63 + 11], dtype=np.uint64)
    c.push("t", big, np.ones((1, 2), np.float32))
    np.testing.assert_array_equal(c.pull("t", big), c.pull("t", big.view(np.int64)))


def test_bad_input_is_refused_and_applies_nothing(cluster):
    c = ember.Client(cluster.coordinator)
    c.create_table(ember.Table("t", dim=4, optimizer="sgd", learning_rate=1.0))
    ids = np.array([1, 2], dtype=np.int64)
    before = c.pull("t", ids)
    with pytest.raises(errors.InvalidArgumentError, match="int64"):
        c.pull("t", ids.astype(np.float64))
    with pytest.raises(errors.InvalidArgumentError, match="1-D"):
        c.pull("t", ids.reshape(2, 1))
    with pytest.raises(errors.InvalidArgumentError, match=r"shape \(2, 3\) is not \(2, 4\)"):
        c.push("t", ids, np.ones((2, 3), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="float32"):
        c.push("t", ids, np.ones((2, 4), np.float64))
    for bad in (np.nan, np.inf):
        g = np.ones((2, 4), np.float32)
        g[1, 2] = bad
        with pytest.raises(errors.InvalidArgumentError, match="not finite.*nothing was pushed"):
            c.push("t", ids, g)
    with pytest.raises(errors.NotFoundError, match="'nope'"):
        c.pull("nope", ids)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        ember.Table("t", dim=0)
    np.testing.assert_array_equal(c.pull("t", ids), before)
    assert c.checksum("t")["t"][0] == 0  # no row was ever stored


def test_a_conflicting_table_config_is_already_exists(cluster):
    c = ember.Client(cluster.coordinator)
    c.create_table(ember.Table("t", dim=4))
    c.create_table(ember.Table("t", dim=4))  # idempotent
    with pytest.raises(errors.EmberError) as e:
        c.create_table(ember.Table("t", dim=8))
    assert e.value.code in ("ALREADY_EXISTS", "FAILED_PRECONDITION")
    assert "dim" in str(e.value)


def test_a_down_shard_fails_within_the_deadline(cluster):
    import time
    c = ember.Client(cluster.coordinator, deadline_s=2.0)
    c.create_table(ember.Table("t", dim=4))
    ids = np.arange(64, dtype=np.int64)  # spans both shards
    cluster.kill_shard(1)
    t0 = time.monotonic()
    with pytest.raises(errors.EmberError) as e:
        c.pull("t", ids)
    assert e.value.recoverable, e.value
    assert time.monotonic() - t0 < 10


def test_no_coordinator_fails_with_unavailable_within_the_timeout():
    import socket
    import time
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError):
        ember.Client(f"127.0.0.1:{port}", connect_timeout_s=1.0, deadline_s=1.0)
    assert time.monotonic() - t0 < 15


def test_a_cluster_token_from_the_environment(tmp_path, monkeypatch):
    """A plaintext cluster with --cluster_token_file (docs/SECURITY.md): table creation
    without the token is UnauthenticatedError naming the variable; with
    $EMBER_CLUSTER_TOKEN_FILE set it works."""
    token = tmp_path / "cluster_token"
    token.write_text("python-test-token\n")
    flag = [f"--cluster_token_file={token}"]
    with ember.local.LocalCluster(shards=1, coordinator_flags=flag, ps_flags=flag) as c:
        monkeypatch.delenv("EMBER_CLUSTER_TOKEN_FILE", raising=False)
        with pytest.raises(errors.UnauthenticatedError) as e:
            ember.Client(c.coordinator).create_table(ember.Table("t", dim=4))
        assert "EMBER_CLUSTER_TOKEN_FILE" in str(e.value)
        assert "python-test-token" not in str(e.value)
        monkeypatch.setenv("EMBER_CLUSTER_TOKEN_FILE", str(token))
        ember.Client(c.coordinator).create_table(ember.Table("t", dim=4))


_FAULTS_OF_FIFTY_STEPS = r"""
import resource
import numpy as np
import ember  # noqa: F401  (importing the package sets the thresholds)

def step():
    # One step's worth of 1 MiB buffers (pulled rows, gradients, tensors), freed together.
    arrays = [np.ones(131072) for _ in range(4)]
    return sum(float(a[0]) for a in arrays)

for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults_of_fifty_steps(**env):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
                          "EMBER_MALLOC_DEFAULTS")}
    clean.update(env)
    out = subprocess.run([sys.executable, "-c", _FAULTS_OF_FIFTY_STEPS], env=clean,
                         capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.split()[-1])


def test_importing_ember_keeps_freed_buffers_for_the_next_step():
    # glibc's defaults hand a step's 4 MiB back and fault ~1,000 pages in again per step;
    # with the thresholds `import ember` sets (common/malloc_tuning.h) none come back.
    kept = _faults_of_fifty_steps()
    defaults = _faults_of_fifty_steps(EMBER_MALLOC_DEFAULTS="1")
    assert kept < 50, kept
    assert defaults > 50 * 500, defaults
