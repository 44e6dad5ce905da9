"""ember.Client: tables, pulls and pushes on a PS cluster, checksums.

Every method raises an ``ember.errors`` exception carrying the status code on
failure; a push with a non-finite gradient or a wrong shape is refused before
anything is sent. IDs are int64 (torch has no uint64; the 64 bits are used as they
are) or uint64 NumPy arrays, or int64 torch tensors.
"""

import numpy as np

from . import _ember
from .errors import InvalidArgumentError

_OPTIMIZERS = {"sgd": "SGD", "adagrad": "ADAGRAD", "adam": "ADAM", "ftrl": "FTRL"}
_INITIALIZERS = {"uniform": "UNIFORM", "normal": "NORMAL", "zeros": "ZEROS"}


def Table(name, dim, optimizer="adagrad", learning_rate=None, initial_accumulator=None,
          initializer=None, init_scale=None, seed=None, **optimizer_fields):
    """A table config in TableConfig text format (proto/ember/v1/table.proto), for
    ``Client.create_table`` and ``ember.torch.EmbeddingCollection``. Unset fields take
    the cluster's defaults. Extra keyword arguments are OptimizerConfig fields
    (``epsilon``, ``beta1``, ``ftrl_l1``, ...)."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"table name must be a non-empty string, got {name!r}")
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 4096:
        raise InvalidArgumentError(f"table '{name}': dim must be an int in 1..4096, got {dim!r}")
    kind = _OPTIMIZERS.get(str(optimizer).lower())
    if kind is None:
        raise InvalidArgumentError(
            f"table '{name}': optimizer {optimizer!r} is not one of {sorted(_OPTIMIZERS)}")
    opt = [f"kind: {kind}"]
    if learning_rate is not None:
        opt.append(f"learning_rate: {float(learning_rate)!r}")
    if initial_accumulator is not None:
        opt.append(f"initial_accumulator: {float(initial_accumulator)!r}")
    for key, value in optimizer_fields.items():
        opt.append(f"{key}: {float(value)!r}")
    parts = [f'name: "{name}"', f"dim: {dim}"]
    if seed is not None:
        parts.append(f"seed: {int(seed)}")
    if initializer is not None or init_scale is not None:
        init = []
        if initializer is not None:
            ikind = _INITIALIZERS.get(str(initializer).lower())
            if ikind is None:
                raise InvalidArgumentError(
                    f"table '{name}': initializer {initializer!r} is not one of "
                    f"{sorted(_INITIALIZERS)}")
            init.append(f"kind: {ikind}")
        if init_scale is not None:
            init.append(f"scale: {float(init_scale)!r}")
        parts.append("initializer { " + " ".join(init) + " }")
    parts.append("optimizer { " + " ".join(opt) + " }")
    return " ".join(parts)


def as_ids(ids, what="ids"):
    """IDs as a 1-D int64/uint64 NumPy array (a CPU torch tensor is viewed, not copied)."""
    if hasattr(ids, "detach") and hasattr(ids, "numpy"):  # a torch tensor
        if ids.device.type != "cpu":
            raise InvalidArgumentError(f"{what}: IDs must be on the CPU, got {ids.device}")
        ids = ids.detach().numpy()
    if isinstance(ids, (list, tuple)):
        ids = np.asarray(ids, dtype=np.int64)
    if not isinstance(ids, np.ndarray):
        raise InvalidArgumentError(
            f"{what}: expected an int64 array or tensor, got {type(ids).__name__}")
    return ids


def as_floats(values):
    if hasattr(values, "detach") and hasattr(values, "numpy"):
        values = values.detach()
        if values.device.type != "cpu":
            values = values.cpu()
        values = values.numpy()
    return values


class Client:
    """A client of a PS cluster: the native PsClient (per-shard parallel pulls and
    pushes, deadlines, retries, redirects to moved slots, exactly-once pushes).

    Give the coordinator (the cluster map, shards and tables come from it) or, without
    one, the shards: ``Client(shards={0: "127.0.0.1:7000"})``. ``attempt`` fences the
    calls to a job attempt (ember.Job sets it). ``job`` names a job whose tables are its
    own (``ember.Job(own_tables=True)``): every call uses that job's store on the shards;
    empty, the cluster's shared tables. ``tls=(ca, cert, key)`` for a mutual-TLS
    cluster."""

    def __init__(self, coordinator="", shards=None, worker_id=None, attempt=0,
                 deadline_s=30.0, connect_timeout_s=30.0, tls=None, job=""):
        ca, cert, key = tls if tls else ("", "", "")
        self._native = _ember.Client(coordinator=coordinator, shards=dict(shards or {}),
                                     worker_id=worker_id, attempt=attempt,
                                     deadline_s=deadline_s,
                                     connect_timeout_s=connect_timeout_s,
                                     tls_ca=ca, tls_cert=cert, tls_key=key, job=job)
        self.coordinator = coordinator

    @property
    def native(self):
        return self._native

    @property
    def shards(self):
        """Shards that own slots in the client's map."""
        return self._native.shards

    def create_table(self, config):
        """Creates a table on every shard (idempotent for an equal config) and returns
        its normalized config as a dict (name, dim, text). ``config``: an
        ``ember.Table(...)`` or TableConfig text. ALREADY_EXISTS for a conflicting one."""
        return self._native.create_table(config)

    def table(self, name):
        """The normalized config of a table (name, dim, text); NOT_FOUND if unknown."""
        return self._native.table(name)

    def pull(self, table, ids, step=0):
        """The rows of ``ids``: float32 [len(ids), dim]. IDs never stored read as their
        deterministic init vector (a pull never creates a row)."""
        return self._native.pull(table, as_ids(ids), step)

    def push(self, table, ids, grads, step=0):
        """Applies gradients (float32 [len(ids), dim]) with the table's server-side
        optimizer, exactly once. Non-finite gradients are refused; nothing is applied."""
        self._native.push(table, as_ids(ids), as_floats(grads), step)

    def checksum(self, table=""):
        """{table: (rows, digest)} over every shard: comparable across shard counts,
        restores and followers."""
        return self._native.checksum(table)

    def refresh(self):
        """Reloads the cluster map from the coordinator now."""
        self._native.refresh()
