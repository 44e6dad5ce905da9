"""Fixtures of the Python tests (run by ctest as python_test, or by hand:
``PYTHONPATH=build/python /usr/bin/python3 -m pytest -q python/tests``).

Every server is a real process on ephemeral loopback ports (ember.local.LocalCluster),
stopped by PID at the end; the data is ember-datagen's, generated once per session."""

import os
import subprocess

import pytest
import torch

import ember.local

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

torch.set_num_threads(1)  # deterministic and fair to the other tests on 2 cores


@pytest.fixture
def cluster():
    with ember.local.LocalCluster(shards=2) as c:
        yield c


@pytest.fixture(scope="session")
def quickstart_data(tmp_path_factory):
    """(config path, data dir): the quickstart model over 60000 training examples of
    ember-datagen's data (2 files, so 2 workers partition it by file)."""
    root = tmp_path_factory.mktemp("quickstart")
    data = root / "data"
    subprocess.run([os.path.join(ember.local.find_bin_dir(), "ember-datagen"), f"--out={data}",
                    "--train_examples=60000", "--test_examples=10000", "--train_files=2"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(REPO, "configs", "quickstart.pbtxt")) as f:
        text = f.read().replace("../run/quickstart/data", str(data))
    config = root / "quickstart.pbtxt"
    config.write_text(text)
    return str(config), str(data)


def write_config(path, base, replace=(), append=""):
    with open(base) as f:
        text = f.read()
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new)
    with open(path, "w") as f:
        f.write(text + append)
    return str(path)


@pytest.fixture(scope="session")
def conversions_data(tmp_path_factory):
    """(config path, data dir): configs/quickstart_cvr.pbtxt over 60000 training examples
    of ember-datagen --conversions (clicks and a planted conversion truth)."""
    root = tmp_path_factory.mktemp("quickstart_cvr")
    data = root / "data"
    subprocess.run([os.path.join(ember.local.find_bin_dir(), "ember-datagen"), f"--out={data}",
                    "--train_examples=60000", "--test_examples=10000", "--train_files=2",
                    "--conversions"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(REPO, "configs", "quickstart_cvr.pbtxt")) as f:
        text = f.read().replace("../run/quickstart_cvr/data", str(data))
    config = root / "quickstart_cvr.pbtxt"
    config.write_text(text)
    return str(config), str(data)
