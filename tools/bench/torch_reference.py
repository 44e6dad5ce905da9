#!/usr/bin/python3
# Copyright 2026 The Ember Authors.
"""The Ember model in plain PyTorch, single process: the reference a user would run
instead of Ember for a small job, and the single-machine baseline for Ember's figures.

    /usr/bin/python3 tools/bench/torch_reference.py --config=configs/quickstart.pbtxt --json

Reads the model config (protobuf text format or JSON, proto/ember/v1/model.proto),
loads the whole train and test sets into tensors first (not timed), then trains
exactly Ember's model for the configured epochs in file order (no shuffle):

  * one embedding table per config table (a weight used through F.embedding_bag, or
    F.embedding when every example has exactly one ID), shared by the features that
    name it; raw IDs remapped to dense rows over train and test; SUM or MEAN pooling
    (MEAN = sum / count, no IDs = zeros); UNIFORM(-scale, scale), NORMAL(0, scale) or
    ZEROS init; sparse gradients; per-table SGD or Adagrad exactly as Ember's PS
    applies them (Adagrad: a += g^2; w -= lr * g / (sqrt(a) + eps), a starting at
    initial_accumulator; SparseRowOptimizer below, numerically torch.optim.Adagrad
    but O(rows touched) per step);
  * dense features: DENSE columns in config order, missing -> missing_value, LOG1P =
    sign(x) * log1p(|x|);
  * dense tower: bottom MLP (ReLU after every layer), DOT (DLRM: pairwise dots of
    [bottom, f_1..f_F], strictly lower triangle, after the bottom output), CONCAT or
    CROSS (DCN-v2 over the CONCAT row x0: x_{l+1} = x0 * (W_l x_l + b_l) + x_l, W_l
    full rank or U_l (V_l x + c_l) with cross_rank) interaction, top MLP (ReLU after
    every layer), a final Linear -> 1 logit;
    Xavier-uniform weights, zero biases; BCE-with-logits averaged over the batch;
  * dense optimizer: Adam, SGD or Adagrad with the config's hyperparameters.

Then evaluates exact test AUC (average ranks for ties) and logloss. With --json the last
line of stdout is one JSON object: test_auc, test_logloss, examples_per_sec (training
examples / training wall time, data loading excluded), train_seconds, steps,
load_seconds, train_examples, test_examples, threads; when the test data comes with
ember-datagen's oracle.json also oracle_auc and auc_gap (oracle_auc - test_auc); and
with the config's eval columns, AUC of cold and warm users (model and oracle).

Needs /usr/bin/python3 with Debian's python3-torch, python3-numpy and python3-protobuf,
and protoc on PATH (the config schema is compiled to a temporary directory).
"""

import argparse
import gzip
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------
# Config

def load_config(path):
    """Parses the ModelConfig at `path` (text format, or JSON for *.json). Returns
    (config, model_pb2, table_pb2)."""
    proto_dir = os.path.join(REPO, "proto")
    protos = [os.path.join("ember", "v1", f) for f in ("model.proto", "table.proto")]
    with tempfile.TemporaryDirectory(prefix="ember-proto-") as out:
        subprocess.run(["protoc", "--python_out=" + out, "-I" + proto_dir] + protos,
                       check=True, cwd=proto_dir)
        sys.path.insert(0, out)
        try:
            model_pb2 = importlib.import_module("ember.v1.model_pb2")
            table_pb2 = importlib.import_module("ember.v1.table_pb2")
        finally:
            sys.path.remove(out)
    from google.protobuf import json_format, text_format
    config = model_pb2.ModelConfig()
    with open(path) as f:
        text = f.read()
    if path.endswith(".json"):
        json_format.Parse(text, config)
    else:
        text_format.Parse(text, config)
    return config, model_pb2, table_pb2


def resolve(path, config_path):
    return path if os.path.isabs(path) else os.path.join(os.path.dirname(config_path), path)


def table_settings(table, table_pb2):
    """(init kind, scale, optimizer kind, lr, eps, initial accumulator) with defaults."""
    init = table.initializer
    kind = init.kind or table_pb2.InitializerConfig.UNIFORM
    if init.scale:
        scale = init.scale
    elif kind == table_pb2.InitializerConfig.NORMAL:
        scale = 0.01
    else:
        scale = 0.05  # server/store/table_config.h kDefaultUniformScale
    opt = table.optimizer
    opt_kind = opt.kind or table_pb2.OptimizerConfig.ADAGRAD
    if opt_kind not in (table_pb2.OptimizerConfig.SGD, table_pb2.OptimizerConfig.ADAGRAD):
        raise SystemExit("torch_reference: table %s: only SGD and ADAGRAD are supported" %
                         table.name)
    if opt.freq_power:
        raise SystemExit("torch_reference: table %s: freq_power is not supported" % table.name)
    acc = opt.initial_accumulator if opt.HasField("initial_accumulator") else 1e-6
    # server/store/table_config.cc DefaultLearningRate: SGD 3, ADAGRAD 0.1.
    lr = opt.learning_rate or (3.0 if opt_kind == table_pb2.OptimizerConfig.SGD else 0.1)
    return kind, scale, opt_kind, lr, opt.epsilon or 1e-8, acc


# ---------------------------------------------------------------------------------
# Data

def list_files(path):
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)))
        files = [os.path.join(path, n) for n in names]
    else:
        files = [path]
    if not files:
        raise SystemExit("torch_reference: no files in " + path)
    return files


def split_fields(data, ncols, name):
    """Splits TSV bytes (no header) into one list of byte strings per column. Lines with
    the wrong number of fields are dropped (Ember's reader skips them as malformed)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    flat = b"\t".join(lines).split(b"\t")
    if len(flat) == len(lines) * ncols:
        columns = [flat[j::ncols] for j in range(ncols)]
        # Misaligned rows would put other columns' values under the label.
        if set(columns[0]) <= {b"0", b"1", b"0.0", b"1.0"}:
            return columns
    rows = [r for r in (line.split(b"\t") for line in lines) if len(r) == ncols]
    if len(rows) < len(lines):
        log("%s: skipped %d malformed lines" % (name, len(lines) - len(rows)))
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(ncols)]


def read_columns(path):
    """Returns (header, columns): header names and one list of byte strings per column,
    over every file of `path` in order."""
    header = None
    columns = None
    for name in list_files(path):
        opener = gzip.open if name.endswith(".gz") else open
        with opener(name, "rb") as f:
            data = f.read()
        newline = data.find(b"\n")
        file_header = (data if newline < 0 else data[:newline]).decode().rstrip("\r").split("\t")
        if header is None:
            header = file_header
            columns = [[] for _ in header]
        elif file_header != header:
            raise SystemExit("torch_reference: %s: header differs from the first file" % name)
        body = b"" if newline < 0 else data[newline + 1:]
        for j, values in enumerate(split_fields(body, len(header), name)):
            columns[j].extend(values)
    return header, columns


def parse_floats(values, missing):
    array = np.array(values)
    empty = array == b""
    if empty.any():
        array[empty] = repr(float(missing)).encode()
    return array.astype(np.float64)


def parse_ids(values, encoding, col_pb2):
    """IDs as a numpy array: uint64 for DECIMAL/HEX, the bytes themselves for HASH
    (a distinct string is a distinct ID, which is all the model needs)."""
    if encoding == col_pb2.DECIMAL:
        return np.array(values).astype(np.uint64) if values else np.zeros(0, np.uint64)
    if encoding == col_pb2.HEX:
        return np.array([int(v, 16) for v in values], dtype=np.uint64)
    return np.array(values) if values else np.zeros(0, "S1")


def load_split(path, config, model_pb2, with_eval):
    """Loads one split into numpy arrays laid out by the config."""
    col_pb2 = model_pb2.ColumnConfig
    header, raw = read_columns(path)
    index = {name: j for j, name in enumerate(header)}
    by_name = {c.name: c for c in config.data.columns}
    for c in config.data.columns:
        if c.name not in index and (c.kind != col_pb2.EVAL or with_eval):
            raise SystemExit("torch_reference: %s lacks column %s" % (path, c.name))
    labels = None
    dense = []
    evals = {}
    for c in config.data.columns:
        if c.kind == col_pb2.LABEL:
            labels = parse_floats(raw[index[c.name]], 0).astype(np.float32)
        elif c.kind == col_pb2.DENSE:
            values = parse_floats(raw[index[c.name]], c.missing_value)
            if c.transform == col_pb2.LOG1P:
                values = np.sign(values) * np.log1p(np.abs(values))
            dense.append(values.astype(np.float32))
        elif c.kind == col_pb2.EVAL and with_eval and c.name in index:
            evals[c.name] = parse_floats(raw[index[c.name]], 0)
    sparse = []
    for feature in config.features:
        c = by_name[feature.column]
        values = raw[index[c.name]]
        if c.kind == col_pb2.MULTI_HOT:
            sep = (c.separator or "|").encode()
            counts = np.array([v.count(sep) + 1 if v else 0 for v in values], dtype=np.int64)
            joined = sep.join(v for v in values if v)
            flat = joined.split(sep) if joined else []
        else:
            counts = np.array([1 if v else 0 for v in values], dtype=np.int64)
            flat = [v for v in values if v] if not counts.all() else values
        sparse.append((parse_ids(flat, c.id_encoding, col_pb2), counts))
    n = len(labels)
    return {"labels": labels, "dense": np.stack(dense, axis=1) if dense else
            np.zeros((n, 0), np.float32), "sparse": sparse, "eval": evals}


def remap_ids(config, splits):
    """Replaces raw IDs by dense row indices per table (over all splits, so an ID is one
    row in every feature that shares the table); returns the row count per table."""
    rows = {}
    for table in config.tables:
        parts = [(s, f) for s in splits for f, feature in enumerate(config.features)
                 if feature.table == table.name]
        if not parts:
            rows[table.name] = 1
            continue
        keys = np.concatenate([s["sparse"][f][0] for s, f in parts])
        unique, inverse = np.unique(keys, return_inverse=True)
        start = 0
        for s, f in parts:
            flat, counts = s["sparse"][f]
            s["sparse"][f] = (inverse[start:start + len(flat)].astype(np.int64), counts)
            start += len(flat)
        rows[table.name] = max(len(unique), 1)
    return rows


def make_batches(split, batch_size):
    """Cuts a split into per-batch tensors (done once, before timing)."""
    n = len(split["labels"])
    labels = torch.from_numpy(split["labels"])
    dense = torch.from_numpy(split["dense"])
    feats = []
    for flat, counts in split["sparse"]:
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        feats.append((torch.from_numpy(flat), torch.from_numpy(offsets),
                      torch.from_numpy(counts), bool((counts == 1).all())))
    batches = []
    for start in range(0, n, batch_size):
        end = min(start + batch_size, n)
        per_feature = []
        for flat, offsets, counts, single in feats:
            lo, hi = int(offsets[start]), int(offsets[end])
            ids = flat[lo:hi]
            if single:
                per_feature.append((ids, None, None))
            else:
                per_feature.append((ids, offsets[start:end] - lo,
                                    counts[start:end].clamp(min=1).to(torch.float32).unsqueeze(1)))
        batches.append((labels[start:end], dense[start:end], per_feature))
    return batches


# ---------------------------------------------------------------------------------
# Model

class Model(torch.nn.Module):
    def __init__(self, config, model_pb2, table_pb2, rows, num_dense):
        super().__init__()
        feat_pb2 = model_pb2.FeatureConfig
        tower_pb2 = model_pb2.DenseTowerConfig
        self.tables = torch.nn.ParameterDict()
        self.settings = {}
        for table in config.tables:
            kind, scale, *_ = settings = table_settings(table, table_pb2)
            self.settings[table.name] = settings
            w = torch.empty(rows[table.name], table.dim)
            if kind == table_pb2.InitializerConfig.NORMAL:
                torch.nn.init.normal_(w, 0.0, scale)
            elif kind == table_pb2.InitializerConfig.ZEROS:
                torch.nn.init.zeros_(w)
            else:
                torch.nn.init.uniform_(w, -scale, scale)
            self.tables[table.name] = torch.nn.Parameter(w)
        self.features = [(f.table, f.pooling == feat_pb2.MEAN) for f in config.features]
        dense_cfg = config.dense
        bottom = list(dense_cfg.bottom_mlp) or [64, 16]
        top = list(dense_cfg.top_mlp) or [64, 32]
        self.dot = (dense_cfg.interaction or tower_pb2.DOT) == tower_pb2.DOT
        cross = dense_cfg.interaction == tower_pb2.CROSS
        self.bottom = mlp(num_dense, bottom)
        feature_dims = [{t.name: t.dim for t in config.tables}[f.table] for f in config.features]
        n = len(feature_dims) + 1
        if self.dot:
            if any(d != bottom[-1] for d in feature_dims):
                raise SystemExit("torch_reference: DOT needs every feature dim == %d" % bottom[-1])
            li, lj = torch.tril_indices(n, n, offset=-1)
            self.register_buffer("li", li)
            self.register_buffer("lj", lj)
            top_in = bottom[-1] + n * (n - 1) // 2
        else:
            top_in = bottom[-1] + sum(feature_dims)
        # CROSS: per layer its product, one Linear (full rank) or V then U (cross_rank).
        self.cross = torch.nn.ModuleList()
        if cross:
            rank = dense_cfg.cross_rank
            for _ in range(dense_cfg.cross_layers or 2):
                self.cross.append(torch.nn.Linear(top_in, top_in) if rank == 0 else
                                  torch.nn.Sequential(torch.nn.Linear(top_in, rank),
                                                      torch.nn.Linear(rank, top_in)))
        self.top = mlp(top_in, top)
        self.out = torch.nn.Linear(top[-1], 1)
        for layer in list(self.bottom) + list(self.cross.modules()) + list(self.top) + [self.out]:
            if isinstance(layer, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(layer.weight)
                torch.nn.init.zeros_(layer.bias)

    def forward(self, dense, per_feature):
        x = self.bottom(dense)
        pooled = []
        for (table, mean), (ids, offsets, counts) in zip(self.features, per_feature):
            w = self.tables[table]
            if offsets is None:
                pooled.append(F.embedding(ids, w, sparse=True))
            else:
                v = F.embedding_bag(ids, w, offsets, mode="sum", sparse=True)
                pooled.append(v / counts if mean else v)
        if self.dot:
            # Pairwise dots by gathering the pairs: torch's CPU bmm loops over the batch
            # for matrices this small.
            z = torch.stack([x] + pooled, dim=1)
            dots = (z.index_select(1, self.li) * z.index_select(1, self.lj)).sum(2)
            x = torch.cat([x, dots], dim=1)
        else:
            x = torch.cat([x] + pooled, dim=1)
            x0 = x
            for layer in self.cross:
                x = x0 * layer(x) + x
        return self.out(self.top(x)).squeeze(1)


def mlp(inputs, sizes):
    layers = []
    for size in sizes:
        layers += [torch.nn.Linear(inputs, size), torch.nn.ReLU()]
        inputs = size
    return torch.nn.Sequential(*layers)


class SparseRowOptimizer:
    """Ember's PS optimizers on a table with sparse gradients, O(rows touched) per step.

    Gradients of one step are summed per row (a feature used twice, or two features
    sharing the table, add up), then each touched row is updated once:
      SGD      w -= lr * g
      ADAGRAD  a += g^2; w -= lr * g / (sqrt(a) + eps), a starting at initial_accumulator
    This is the formula of torch.optim.Adagrad (lr_decay 0, weight_decay 0), whose
    sparse path in torch 1.13 costs O(table size) per step (it densifies).
    """

    def __init__(self, param, adagrad, lr, eps, initial_accumulator):
        self.param = param
        self.adagrad = adagrad
        self.lr = lr
        self.eps = eps
        if adagrad:
            self.acc = torch.full_like(param, initial_accumulator, requires_grad=False)

    def zero_grad(self, set_to_none=True):
        self.param.grad = None

    @torch.no_grad()
    def step(self):
        grad = self.param.grad
        if grad is None:
            return
        if not grad.is_sparse:
            grad = grad.to_sparse()
        grad = grad.coalesce()
        rows = grad._indices()[0]
        g = grad._values()
        if self.adagrad:
            acc = self.acc.index_select(0, rows).addcmul_(g, g)
            self.acc.index_copy_(0, rows, acc)
            update = g / acc.sqrt_().add_(self.eps)
        else:
            update = g
        self.param.index_add_(0, rows, update, alpha=-self.lr)


def make_optimizers(model, config, model_pb2, table_pb2):
    optimizers = []
    for name, param in model.tables.items():
        _, _, kind, lr, eps, acc = model.settings[name]
        optimizers.append(SparseRowOptimizer(param, kind == table_pb2.OptimizerConfig.ADAGRAD,
                                             lr, eps, acc))
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("tables.")]
    d = config.dense_optimizer
    kinds = model_pb2.DenseOptimizerConfig
    kind = d.kind or kinds.ADAM
    lr = d.learning_rate or 0.01
    eps = d.epsilon or 1e-8
    if kind == kinds.ADAM:
        optimizers.append(torch.optim.Adam(dense_params, lr=lr, eps=eps,
                                           betas=(d.beta1 or 0.9, d.beta2 or 0.999)))
    elif kind == kinds.ADAGRAD:
        acc = d.initial_accumulator if d.HasField("initial_accumulator") else 1e-6
        optimizers.append(torch.optim.Adagrad(dense_params, lr=lr, eps=eps,
                                              initial_accumulator_value=acc))
    else:
        optimizers.append(torch.optim.SGD(dense_params, lr=lr))
    return optimizers


# ---------------------------------------------------------------------------------
# Evaluation

def exact_auc(scores, labels):
    """ROC AUC with ties counted half (Mann-Whitney U over average ranks); NaN if
    the labels are all equal."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    avg_rank = ends - (counts - 1) / 2.0  # 1-based average rank of each distinct score
    ranks = avg_rank[inverse]
    pos = labels > 0.5
    p = float(pos.sum())
    n = float(len(labels) - p)
    if p == 0 or n == 0:
        return float("nan")
    return float((ranks[pos].sum() - p * (p + 1) / 2) / (p * n))


def logloss(probs, labels):
    p = np.clip(probs, 1e-15, 1 - 1e-15)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log1p(-p)))


def predict(model, batches):
    model.eval()
    out = []
    with torch.no_grad():
        for _, dense, per_feature in batches:
            out.append(torch.sigmoid(model(dense, per_feature)).double().numpy())
    model.train()
    return np.concatenate(out) if out else np.zeros(0)


# ---------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "quickstart.pbtxt"))
    ap.add_argument("--train", help="training data (file or directory); default: the config's")
    ap.add_argument("--test", help="test data (file or directory); default: the config's")
    ap.add_argument("--epochs", type=int, help="default: the config's (1)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1: this model's ops are too small "
                    "for more to pay off; 2 threads ran 2-5x slower on a 2-core machine)")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args()

    torch.set_num_threads(max(1, args.threads))
    config, model_pb2, table_pb2 = load_config(args.config)
    train_path = args.train or resolve(config.data.train_path, args.config)
    test_path = args.test or resolve(config.data.test_path, args.config)
    epochs = args.epochs if args.epochs is not None else (config.training.epochs or 1)
    batch_size = config.training.batch_size or 1024
    if config.data.format == model_pb2.DataConfig.CRITEO_TSV:
        raise SystemExit("torch_reference: only SCHEMA_TSV data is supported")

    t0 = time.time()
    train = load_split(train_path, config, model_pb2, with_eval=False)
    test = load_split(test_path, config, model_pb2, with_eval=True)
    rows = remap_ids(config, [train, test])
    torch.manual_seed(config.dense.init_seed or 1)
    model = Model(config, model_pb2, table_pb2, rows, train["dense"].shape[1])
    optimizers = make_optimizers(model, config, model_pb2, table_pb2)
    train_batches = make_batches(train, batch_size)
    test_batches = make_batches(test, 8192)
    load_seconds = time.time() - t0
    n_train = len(train["labels"])
    log("loaded %d train / %d test examples in %.1f s; table rows %s" %
        (n_train, len(test["labels"]), load_seconds, rows))

    log_every = config.training.log_every_steps or 100
    steps = 0
    t0 = time.time()
    for epoch in range(epochs):
        loss_sum, loss_n = 0.0, 0
        for labels, dense, per_feature in train_batches:
            for opt in optimizers:
                opt.zero_grad(set_to_none=True)
            logits = model(dense, per_feature)
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            loss.backward()
            for opt in optimizers:
                opt.step()
            steps += 1
            loss_sum += float(loss)
            loss_n += 1
            if steps % log_every == 0:
                elapsed = time.time() - t0
                log("epoch %d step %d loss %.4f %.0f examples/s" %
                    (epoch, steps, loss_sum / loss_n, steps * batch_size / elapsed))
                loss_sum, loss_n = 0.0, 0
    train_seconds = time.time() - t0

    probs = predict(model, test_batches)
    result = {
        "test_auc": exact_auc(probs, test["labels"]),
        "test_logloss": logloss(probs, test["labels"]),
        "examples_per_sec": n_train * epochs / train_seconds if train_seconds > 0 else 0.0,
        "train_seconds": train_seconds,
        "steps": steps,
        "load_seconds": load_seconds,
        "train_examples": n_train,
        "test_examples": len(test["labels"]),
        "threads": torch.get_num_threads(),
    }
    oracle_path = os.path.join(os.path.dirname(os.path.normpath(test_path))
                               if os.path.isdir(test_path) else
                               os.path.dirname(os.path.dirname(test_path)), "oracle.json")
    if os.path.isfile(oracle_path):
        with open(oracle_path) as f:
            oracle = json.load(f)
        if oracle.get("test_auc") is not None:
            result["oracle_auc"] = oracle["test_auc"]
            result["auc_gap"] = oracle["test_auc"] - result["test_auc"]
    cold_col = config.eval.cold_user_column
    if cold_col and cold_col in test["eval"]:
        cold = test["eval"][cold_col] > 0.5
        result["test_auc_cold_users"] = exact_auc(probs[cold], test["labels"][cold])
        result["test_auc_warm_users"] = exact_auc(probs[~cold], test["labels"][~cold])
    prob_col = config.eval.true_prob_column
    if prob_col and prob_col in test["eval"]:
        true_prob = test["eval"][prob_col]
        if cold_col and cold_col in test["eval"]:
            result["oracle_auc_cold_users"] = exact_auc(true_prob[cold], test["labels"][cold])
            result["oracle_auc_warm_users"] = exact_auc(true_prob[~cold], test["labels"][~cold])
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print("%s: %s" % (k, v))


if __name__ == "__main__":
    main()
