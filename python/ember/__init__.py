"""Ember from Python: train any PyTorch model against Ember's PS cluster.

    import ember                      # export PYTHONPATH=$PWD/build/python
    client = ember.Client(coordinator="127.0.0.1:6000")
    client.create_table(ember.Table("item", dim=16, optimizer="adagrad", learning_rate=0.1))
    rows = client.pull("item", ids)   # numpy float32 [len(ids), 16]

Modules: ``ember.torch`` (EmbeddingCollection, DistributedOptimizer), ``ember.data``
(Dataset: Ember's readers, partitioned by rank, with checkpointed cursors),
``ember.Job`` (the coordinator's job protocol: attempts, checkpoints, recovery),
``ember.serving`` (a follower's embeddings and dense parameters), ``ember.local``
(a cluster of real processes on loopback). docs/PYTHON.md has the whole guide.

The native part (``ember._ember``) does not link libtorch; arrays cross as NumPy
buffers, so any torch version works.
"""

from . import errors
from . import _ember
from .errors import EmberError, RECOVERABLE
from ._ember import ModelConfig, roc_auc, log_loss
from .client import Client, Table
from .jobs import Job, Attempt

__version__ = _ember.__version__


def load_config(path):
    """Reads a model config (text format, or JSON for ``.json``): the data's columns,
    the tables and the features, as ember-worker reads them (docs/OPERATIONS.md "Model
    config"). The dense section may be left out: the dense model is yours."""
    return _ember.load_model_config(str(path))


def parse_config(text, base_dir="", origin="<text>"):
    """As load_config, from text; relative data paths resolve against base_dir."""
    return _ember.parse_model_config(text, base_dir, origin)


__all__ = ["Client", "Table", "Job", "Attempt", "ModelConfig", "EmberError", "RECOVERABLE",
           "errors", "load_config", "parse_config", "roc_auc", "log_loss"]
