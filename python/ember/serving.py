"""ember.serving: score a PyTorch model online from an ember-serving follower.

    follower = ember.serving.Follower("127.0.0.1:7100")
    rows = follower.lookup("item", ids)          # float32 [len(ids), dim]
    step = follower.load_dense(model)            # the pinned/current dense parameters

The follower applies every shard's update stream after bootstrapping from a checkpoint,
so its rows are fresh; its dense parameters are those of one checkpoint (the model
version, pinned with `emberctl serving pin`), in the layout ember.Job writes
(ember/state.py: named_parameters order, float32).
"""

from . import _ember
from .client import as_ids
from .state import load_parameters


class Follower:
    """A client of one ember-serving follower. ``tls=(ca, cert, key)`` for mTLS."""

    def __init__(self, address, deadline_s=10.0, tls=None):
        ca, cert, key = tls if tls else ("", "", "")
        self._native = _ember.ServingClient(address, deadline_s, ca, cert, key)
        self.address = address

    def lookup(self, table, ids):
        """The follower's rows of ``ids`` (unknown IDs read as the table's init
        vector, as on the PS)."""
        return self._native.lookup(table, as_ids(ids))

    def dense_parameters(self):
        """(float32 bytes, checkpoint name, training step) of the served model version."""
        return self._native.dense_parameters()

    def load_dense(self, model):
        """Loads the served dense parameters into ``model`` (the class the job trained);
        returns the checkpoint's step."""
        data, checkpoint, step = self._native.dense_parameters()
        load_parameters(model, data, origin=f"model version {checkpoint} of {self.address}")
        return step
