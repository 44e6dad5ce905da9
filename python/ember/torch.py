"""ember.torch: PyTorch modules over Ember's PS tables.

``EmbeddingCollection`` maps features to PS tables (several features may share one
table) with SUM, MEAN or no pooling ("none": the rows per ID, jagged, for attention
over a history). Its forward pulls each table's unique IDs of the batch once (the
native dedup and the per-shard parallel pulls of ember-worker) and pools them: with
ember-worker's own SUM/MEAN pooling and its backward (worker/training/sparse_features.h)
when every feature is pooled, else with ``torch.nn.functional.embedding_bag`` over the
pulled rows. Its backward pushes one gradient per unique ID, which the table's
server-side optimizer applies. In BSP jobs with several workers the
gradients are first summed across workers per ID in rank order and each ID is pushed
once (worker/training/sparse_exchange.h), so the model does not depend on the number
of shards and is bitwise reproducible.

``DistributedOptimizer`` wraps a torch optimizer: ``step()`` all-reduces (averages)
the dense gradients over the job's workers (Gloo) and then steps, Horovod-style. Every
rank then holds the same dense weights.

    emb = ember.torch.EmbeddingCollection.from_config(attempt.client, config,
                                                      collective=attempt.collective)
    pooled = emb(batch)                 # {feature: float32 [B, dim]}
    loss = criterion(model(batch.dense, pooled), batch.labels)
    opt.zero_grad(); loss.backward()    # pushes the sparse gradients
    opt.step()                          # all-reduces the dense ones, then steps

Gradient scale: sparse gradients are multiplied by 1 / world_size, dense ones
averaged, so that with each worker's loss a mean over its own batch the update is the
one of the mean over the global batch. In a job (ember.Job's ``Attempt.steps``) the
weights are each worker's share of the step's examples (``gradient_scale``, the
optimizer's ``local_weight``): the same when the batches are equal, and still the global
batch's mean when they are not (an epoch's last batches, LAST_OUT's empty steps).
"""

import collections
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import _ember
from .client import Table  # noqa: F401  (ember.torch.Table for convenience)
from .errors import FailedPreconditionError, InvalidArgumentError

Jagged = collections.namedtuple("Jagged", ["values", "offsets"])
Jagged.__doc__ = """Un-pooled rows of a feature: values [IDs, dim], offsets [B + 1]."""

_POOLINGS = ("sum", "mean", "none")

# Seconds this process spent, by stage, since it started (ember.Job reports the split
# of a step: what is left of a step's time is compute).
stage_seconds = {"pull": 0.0, "exchange": 0.0, "push": 0.0, "all_reduce": 0.0}


def pad(jagged, max_len=None):
    """A Jagged feature as (padded [B, L, dim], mask [B, L] bool), keeping each
    example's last ``max_len`` IDs (all when None). Differentiable in ``values``."""
    values, offsets = jagged
    lengths = (offsets[1:] - offsets[:-1])
    b = lengths.numel()
    length = int(lengths.max()) if b > 0 and lengths.numel() else 0
    if max_len is not None:
        length = min(length, int(max_len))
    dim = values.shape[1]
    if length == 0:
        return values.new_zeros(b, 0, dim), torch.zeros(b, 0, dtype=torch.bool)
    keep = torch.clamp(lengths, max=length)
    pos = torch.arange(length).unsqueeze(0).expand(b, length)
    mask = pos < keep.unsqueeze(1)
    # Example i's kept IDs are its last keep[i]: source index offsets[i+1] - keep[i] + pos.
    src = (offsets[1:] - keep).unsqueeze(1) + pos
    src = torch.where(mask, src, torch.zeros_like(src))
    padded = values.index_select(0, src.reshape(-1)).reshape(b, length, dim)
    return padded * mask.unsqueeze(-1).to(values.dtype), mask


class _PooledFeatures(torch.autograd.Function):
    """Every feature SUM/MEAN-pooled by the native SparseBatch, [B, pooled width];
    backward runs its native backward and pushes the rows' gradients."""

    @staticmethod
    def forward(ctx, prepared, anchor):
        ctx.prepared = prepared
        return torch.from_numpy(prepared.native.pool())

    @staticmethod
    def backward(ctx, d_pooled):
        ctx.prepared.push_pooled(d_pooled)
        return None, None


class _SparseRows(torch.autograd.Function):
    """The pulled rows of every table as tensors; backward pushes their gradients."""

    @staticmethod
    def forward(ctx, prepared, anchor):
        ctx.prepared = prepared
        return tuple(torch.from_numpy(r) for r in prepared.rows)

    @staticmethod
    def backward(ctx, *grads):
        ctx.prepared.push(grads)
        return None, None


class PreparedBatch:
    """A batch whose unique IDs are known and whose pulls are in flight
    (EmbeddingCollection.prepare); forward collects them."""

    def __init__(self, collection, batch, step):
        self.collection = collection
        self.batch = batch
        self.step = step
        self.native = _ember.SparseLookup(collection._client.native, collection.table_names,
                                          collection._feature_tables, collection.poolings)
        ids, offsets = batch.native_ids(collection.feature_names)
        self.unique, self.inverse = self.native.prepare(ids, offsets, collection.feature_names)
        self.offsets = offsets
        t0 = time.monotonic()
        self.native.start_pull(step)
        self._start_seconds = time.monotonic() - t0
        self.rows = None

    def wait(self):
        if self.rows is None:
            t0 = time.monotonic()
            self.rows = self.native.finish_pull()
            stage_seconds["pull"] += time.monotonic() - t0 + self._start_seconds
        return self.rows

    def push(self, grads):
        arrays = []
        for g, r in zip(grads, self.rows):
            if g is None:
                arrays.append(np.zeros_like(r))
            else:
                arrays.append(g.detach().to(torch.float32).contiguous().numpy())
        self._pushed(self.native.push, arrays)

    def push_pooled(self, d_pooled):
        self._pushed(self.native.push_pooled,
                     d_pooled.detach().to(torch.float32).contiguous().numpy())

    def _pushed(self, push, grads):
        c = self.collection
        collective = c.collective if c.consistency == "bsp" else None
        # SSP/ASP: the pushes stay in flight until a later prepare (flush) waits for
        # them. BSP waits here: the step's pushes are applied when backward returns
        # (with several workers the dense all-reduce after it is the step barrier).
        wait = c.consistency == "bsp"
        exchange, push = push(grads, self.step, c.gradient_scale, collective, wait)
        stage_seconds["exchange"] += exchange
        stage_seconds["push"] += push
        if not wait:
            c._in_flight.append(self)

    def finish_push(self):
        stage_seconds["push"] += self.native.finish_push()


class EmbeddingCollection(torch.nn.Module):
    """Features -> PS tables, pooled. ``tables``: ``ember.Table(...)`` texts (or dicts
    with "text"); created on the PS (idempotent; ALREADY_EXISTS when the PS holds the
    table with another config, e.g. another dim). ``features``: dicts or tuples
    (name, table[, pooling]) with pooling "sum" (default), "mean" or "none"; a "dim"
    key, when given, must equal the table's. ``consistency``: "bsp" (the default; the
    cross-worker sparse exchange), "ssp" or "asp" (each worker pushes its own
    gradients)."""

    def __init__(self, client, tables, features, collective=None, consistency="bsp"):
        super().__init__()
        self._client = client
        self.collective = collective
        consistency = str(consistency).lower()
        if consistency not in ("bsp", "ssp", "asp"):
            raise InvalidArgumentError(f"consistency {consistency!r} is not bsp, ssp or asp")
        self.consistency = consistency
        world = collective.world_size if collective is not None else 1
        self.gradient_scale = 1.0 / world
        self.table_names, self.dims = [], {}
        for t in tables:
            text = t["text"] if isinstance(t, dict) else t
            created = client.create_table(text)
            if created["name"] in self.dims:
                raise InvalidArgumentError(f"table '{created['name']}' is given twice")
            self.table_names.append(created["name"])
            self.dims[created["name"]] = created["dim"]
        index = {n: i for i, n in enumerate(self.table_names)}
        self.feature_names, self._feature_tables, self.poolings = [], [], []
        for f in features:
            if isinstance(f, dict):
                name, table = f.get("name"), f.get("table")
                pooling, dim = f.get("pooling", "sum"), f.get("dim")
            else:
                name, table = f[0], f[1]
                pooling = f[2] if len(f) > 2 else "sum"
                dim = None
            if table not in index:
                raise InvalidArgumentError(
                    f"feature '{name}': table '{table}' is not one of {self.table_names}")
            pooling = str(pooling).lower()
            if pooling not in _POOLINGS:
                raise InvalidArgumentError(
                    f"feature '{name}': pooling {pooling!r} is not one of {_POOLINGS}")
            if dim is not None and int(dim) != self.dims[table]:
                raise InvalidArgumentError(
                    f"feature '{name}': dim {dim} differs from table '{table}''s dim "
                    f"{self.dims[table]}")
            if name in self.feature_names:
                raise InvalidArgumentError(f"feature '{name}' is given twice")
            self.feature_names.append(name)
            self._feature_tables.append(index[table])
            self.poolings.append(pooling)
        self.step = 0
        self.staleness = 1
        # Every feature pooled: the native pooling (one [B, width] output, sliced).
        self._native_pooling = "none" not in self.poolings
        self._columns, at = [], 0
        for name, t in zip(self.feature_names, self._feature_tables):
            width = self.dims[self.table_names[t]]
            self._columns.append((name, at, width))
            at += width
        self._in_flight = []  # PreparedBatch whose pushes are in flight

    @classmethod
    def from_config(cls, client, config, collective=None, consistency=None, pooling=None):
        """The tables and features of a model config (ember.load_config). ``pooling``:
        {feature: "sum" | "mean" | "none"} overrides; ``consistency`` defaults to the
        config's training.consistency."""
        pooling = dict(pooling or {})
        names = {f["name"] for f in config.features}
        unknown = sorted(set(pooling) - names)
        if unknown:
            raise InvalidArgumentError(f"pooling names unknown feature(s) {unknown}; "
                                       f"the config has {sorted(names)}")
        features = [{"name": f["name"], "table": f["table"],
                     "pooling": pooling.get(f["name"], f["pooling"])} for f in config.features]
        collection = cls(client, config.tables, features, collective=collective,
                         consistency=consistency or config.training["consistency"])
        collection.staleness = max(1, int(config.training["staleness"]))
        return collection

    def dim(self, feature):
        return self.dims[self.table_names[self._feature_tables[self.feature_names.index(feature)]]]

    def flush(self, keep=0):
        """Waits until at most ``keep`` batches' pushes are in flight (0: every push is
        applied); raises the first push error."""
        while len(self._in_flight) > keep:
            self._in_flight.pop(0).finish_push()

    def empty_step(self, step):
        """This worker's part of a BSP step in which it has no example (a job's
        training.epoch_end LAST_OUT; ember.Job calls it): the sparse exchange with
        nothing to add, after which it pushes the summed gradients of the IDs it owns.
        Without a collective of several workers, or in SSP/ASP, there is nothing to do."""
        if self.consistency != "bsp" or self.collective is None or \
                self.collective.world_size <= 1:
            return
        from .data import Batch
        none = torch.zeros(0, dtype=torch.int64)
        empty = Batch.from_tensors(torch.zeros(0), {f: none for f in self.feature_names},
                                   {f: torch.zeros(1, dtype=torch.int64)
                                    for f in self.feature_names})
        prepared = self.prepare(empty, step)
        rows = prepared.wait()
        if self._native_pooling:
            width = sum(w for _, _, w in self._columns)
            prepared.push_pooled(torch.zeros(0, width))
        else:
            prepared.push([None] * len(rows))

    def prepare(self, batch, step=None):
        """Dedups the batch's IDs per table and starts their pulls (SSP/ASP: call it for
        the next batch before this step's backward to overlap them). In BSP every
        earlier push is applied first; in SSP all but the last staleness - 1 steps'
        (ASP: 4); outside training, all."""
        if self.consistency == "bsp" or not (self.training and torch.is_grad_enabled()):
            self.flush(0)
        else:
            self.flush(self.staleness - 1 if self.consistency == "ssp" else 4)
        return PreparedBatch(self, batch, self.step if step is None else step)

    def forward(self, batch):
        """{feature: pooled [B, dim]} (a Jagged for pooling "none"). With every feature
        pooled, pooling and its backward run natively (SparseBatch::Pool/Backward);
        otherwise with embedding_bag over the pulled rows."""
        if isinstance(batch, PreparedBatch):
            prepared = batch
        elif getattr(batch, "prepared", None) is not None and batch.prepared.collection is self:
            prepared, batch.prepared = batch.prepared, None  # prefetched (Attempt.steps)
        else:
            prepared = self.prepare(batch)
        rows_np = prepared.wait()
        grad = torch.is_grad_enabled() and self.training
        if self._native_pooling:
            if grad:
                pooled = _PooledFeatures.apply(prepared, torch.zeros((), requires_grad=True))
            else:
                pooled = torch.from_numpy(prepared.native.pool())
            return {name: pooled[:, at:at + width]
                    for name, at, width in self._columns}
        if grad:
            anchor = torch.zeros((), requires_grad=True)
            rows = _SparseRows.apply(prepared, anchor)
        else:
            rows = tuple(torch.from_numpy(r) for r in rows_np)
        out = {}
        for f, name in enumerate(self.feature_names):
            t = self._feature_tables[f]
            inverse = torch.from_numpy(prepared.inverse[f])
            offsets = torch.from_numpy(prepared.offsets[f])
            if self.poolings[f] == "none":
                out[name] = Jagged(rows[t].index_select(0, inverse), offsets)
            else:
                pooled = F.embedding_bag(inverse, rows[t], offsets, mode="sum",
                                         include_last_offset=True)
                if self.poolings[f] == "mean":  # sum / count (0 IDs: zeros); torch's CPU
                    counts = (offsets[1:] - offsets[:-1]).clamp(min=1)  # mean backward is slow
                    pooled = pooled / counts.unsqueeze(1).to(pooled.dtype)
                out[name] = pooled
        return out


class DistributedOptimizer:
    """Wraps a torch optimizer so that ``step()`` first averages the gradients of
    ``params`` (default: every parameter of the optimizer) over the collective's
    workers, in one all-reduce (deterministic: every rank gets the same bits). With no
    collective (one worker) it is the optimizer itself. The all-reduce is also the
    step's barrier in BSP: no worker pulls the next batch before every worker pushed.
    A parameter without a gradient takes part as zeros. ``local_weight`` multiplies
    this worker's gradients before the average: its share of the step's examples times
    the world size (Attempt.steps sets it; 1 when the workers' batches are equal)."""

    def __init__(self, optimizer, collective=None):
        self.optimizer = optimizer
        self.collective = collective
        self.local_weight = 1.0
        self._params = [p for g in optimizer.param_groups for p in g["params"]]
        self._buffer = None

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def all_reduce(self):
        """Averages the gradients over the workers now (step() calls it)."""
        if self.collective is None or self.collective.world_size == 1:
            return
        n = sum(p.numel() for p in self._params)
        if self._buffer is None or self._buffer.size != n + 1:
            self._buffer = np.zeros(n + 1, dtype=np.float32)
        buf, at = self._buffer, 0
        for p in self._params:
            k = p.numel()
            if p.grad is None:
                buf[at:at + k] = 0
            else:
                g = p.grad.detach()
                if not torch.isfinite(g).all():
                    raise InvalidArgumentError(
                        "a dense gradient is not finite; nothing was all-reduced (the other "
                        "workers fail at their collective timeout)")
                buf[at:at + k] = g.reshape(-1).to(torch.float32).numpy()
            at += k
        if self.local_weight != 1.0:
            buf[:n] *= np.float32(self.local_weight)
        buf[n] = 1.0  # the step's barrier: every worker takes part even without params
        t0 = time.monotonic()
        self.collective.all_reduce_sum(buf)
        stage_seconds["all_reduce"] += time.monotonic() - t0
        world = float(self.collective.world_size)
        at = 0
        with torch.no_grad():
            for p in self._params:
                k = p.numel()
                g = torch.from_numpy(buf[at:at + k] / world).reshape(p.shape).to(p.dtype)
                if p.grad is None:
                    p.grad = g.clone()
                else:
                    p.grad.copy_(g)
                at += k

    def step(self, closure=None):
        self.all_reduce()
        return self.optimizer.step(closure)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state)


def evaluate(predict, dataset, true_prob_column=None):
    """Test AUC and log loss of ``predict(batch) -> logits`` over ``dataset`` (run under
    torch.no_grad: nothing is pushed), and the oracle's AUC when the data has the true
    probability (the config's eval.true_prob_column)."""
    if true_prob_column is None:
        true_prob_column = dataset.config.eval.get("true_prob_column", "")
    scores, labels, oracle = [], [], []
    with torch.no_grad():
        for batch in dataset:
            scores.append(torch.sigmoid(predict(batch).reshape(-1)).to(torch.float32).numpy())
            labels.append(batch.labels.numpy())
            if true_prob_column and true_prob_column in batch.eval:
                oracle.append(batch.eval[true_prob_column].numpy())
    if not scores:
        raise FailedPreconditionError(f"no test examples in {dataset.path}")
    s, y = np.concatenate(scores), np.concatenate(labels)
    out = {"test_examples": int(s.size), "test_auc": _ember.roc_auc(s, y),
           "test_logloss": _ember.log_loss(s, y)}
    if oracle:
        o = np.concatenate(oracle).astype(np.float32)
        out["oracle_auc"] = _ember.roc_auc(o, y)
        out["oracle_logloss"] = _ember.log_loss(o, y)
    return out
