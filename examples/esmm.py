#!/usr/bin/python3
# Copyright 2026 The Ember Authors.
"""ESMM (Entire Space Multi-task Model): click and post-click conversion, in PyTorch on
ember.torch.

Two towers over the same embeddings: a pCTR tower and a pCVR tower, each the
quickstart DLRM (bottom MLP [64, 16] over the dense features, dot interaction with the
8 pooled features, top MLP [64, 32]). Both train on every impression, not just the
clicks: the loss is BCE(pCTR, click) + BCE(pCTR * pCVR, click & convert), so pCVR is
learned over the entire space (no sample-selection bias) and the scarce conversions
share their embeddings with the clicks. The embedding tables live on Ember's PS (the
config's Adagrad on the server), the dense towers in PyTorch (Adam 0.01).

The data is ember-datagen's with --conversions, which plants a conversion truth too
(configs/quickstart_cvr.pbtxt reads its `converted` and `true_cvr_prob` as EVAL
columns, from the training data as well). Prints the test AUC of each task next to the
oracle's (the planted probabilities): CTR over every test example, CVR over the
clicked ones, CTCVR (pCTR * pCVR against click & convert) over every one. Writes a run
directory like ember-worker's.

    build/bin/ember-datagen --out=run/quickstart_cvr/data --conversions
    export PYTHONPATH=$PWD/build/python
    /usr/bin/python3 examples/esmm.py                      # a local cluster of 2 shards
    /usr/bin/python3 examples/esmm.py --coordinator=127.0.0.1:6000 --rank=0 --world_size=2
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import ember
import ember.cli
import ember.data
import ember.torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERTED = "converted"          # EVAL column: 1 = the click converted (0 without a click)
TRUE_CVR = "true_cvr_prob"       # EVAL column: the planted P(conversion | click)
LN2 = math.log(2.0)


def mlp(sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return layers


class Tower(torch.nn.Module):
    """One task's DLRM over the shared pooled embeddings: a logit per example."""

    def __init__(self, num_dense, num_features, dim, bottom=(64, 16), top=(64, 32)):
        super().__init__()
        self.bottom = torch.nn.Sequential(*mlp([num_dense, *bottom]))
        n = num_features + 1
        li, lj = torch.tril_indices(n, n, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        self.top = torch.nn.Sequential(*mlp([bottom[-1] + n * (n - 1) // 2, *top]),
                                       torch.nn.Linear(top[-1], 1))

    def forward(self, dense, pooled):
        x = self.bottom(dense)
        z = torch.stack([x, *pooled], dim=1)            # [B, F + 1, dim]
        dots = (z.index_select(1, self.li) * z.index_select(1, self.lj)).sum(2)
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


class ESMM(torch.nn.Module):
    def __init__(self, num_dense, num_features, dim):
        super().__init__()
        self.ctr = Tower(num_dense, num_features, dim)
        self.cvr = Tower(num_dense, num_features, dim)
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)

    def forward(self, dense, pooled):
        """(CTR logit, CVR logit), each [B]."""
        return self.ctr(dense, pooled), self.cvr(dense, pooled)


def log1mexp(x):
    """log(1 - exp(x)) for x < 0, accurate at both ends (Maechler's split at -ln 2)."""
    x = x.clamp(max=-1e-7)
    return torch.where(x > -LN2, torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def esmm_loss(ctr_logit, cvr_logit, click, convert, weight=None):
    """BCE(pCTR, click) + BCE(pCTR * pCVR, click & convert), computed in log space
    (log pCTCVR = log sigmoid(ctr) + log sigmoid(cvr)), so tiny products stay finite."""
    ctr = F.binary_cross_entropy_with_logits(ctr_logit, click, weight=weight)
    log_p = F.logsigmoid(ctr_logit) + F.logsigmoid(cvr_logit)
    ctcvr = -(convert * log_p + (1 - convert) * log1mexp(log_p))
    ctcvr = (ctcvr * weight).mean() if weight is not None else ctcvr.mean()
    return ctr + ctcvr


def auc(scores, labels):
    """ROC AUC (float32 arrays); NaN when the labels are all equal."""
    if labels.size == 0 or labels.min() == labels.max():
        return float("nan")
    return ember.roc_auc(scores.astype(np.float32), labels.astype(np.float32))


def logloss(scores, labels):
    if labels.size == 0:
        return float("nan")
    return ember.log_loss(scores.astype(np.float32), labels.astype(np.float32))


def evaluate(predict, dataset, true_prob_column):
    """The three tasks' test metrics of ``predict(batch) -> (CTR logit, CVR logit)``
    over ``dataset`` (nothing is pushed), with the oracle's from the planted
    probabilities."""
    cols = {k: [] for k in ("pctr", "pcvr", "click", "convert", "true_ctr", "true_cvr")}
    with torch.no_grad():
        for batch in dataset:
            ctr_logit, cvr_logit = predict(batch)
            cols["pctr"].append(torch.sigmoid(ctr_logit).to(torch.float32).numpy())
            cols["pcvr"].append(torch.sigmoid(cvr_logit).to(torch.float32).numpy())
            cols["click"].append(batch.labels.numpy())
            cols["convert"].append(batch.eval[CONVERTED].numpy())
            cols["true_ctr"].append(batch.eval[true_prob_column].numpy())
            cols["true_cvr"].append(batch.eval[TRUE_CVR].numpy())
    if not cols["pctr"]:
        raise ember.errors.FailedPreconditionError(f"no test examples in {dataset.path}")
    c = {k: np.concatenate(v).astype(np.float32) for k, v in cols.items()}
    clicked = c["click"] > 0.5
    pctcvr = c["pctr"] * c["pcvr"]
    true_ctcvr = c["true_ctr"] * c["true_cvr"]
    return {
        "test_examples": int(c["pctr"].size),
        "test_auc": auc(c["pctr"], c["click"]),
        "test_logloss": logloss(c["pctr"], c["click"]),
        "oracle_auc": auc(c["true_ctr"], c["click"]),
        "oracle_logloss": logloss(c["true_ctr"], c["click"]),
        "cvr_examples": int(clicked.sum()),
        "cvr_auc": auc(c["pcvr"][clicked], c["convert"][clicked]),
        "cvr_logloss": logloss(c["pcvr"][clicked], c["convert"][clicked]),
        "cvr_oracle_auc": auc(c["true_cvr"][clicked], c["convert"][clicked]),
        "ctcvr_auc": auc(pctcvr, c["convert"]),
        "ctcvr_logloss": logloss(pctcvr, c["convert"]),
        "ctcvr_oracle_auc": auc(true_ctcvr, c["convert"]),
    }


def main():
    args = ember.cli.parser(__doc__, os.path.join(REPO, "configs/quickstart_cvr.pbtxt"),
                            "run/examples/esmm").parse_args()
    config = ember.cli.load(args)
    true_prob = config.eval.get("true_prob_column", "")
    missing = [c for c in (true_prob, CONVERTED, TRUE_CVR) if c not in config.eval_columns]
    if not true_prob or missing:
        print(f"esmm: config {args.config} needs EVAL columns {CONVERTED!r}, {TRUE_CVR!r} and "
              f"eval.true_prob_column (configs/quickstart_cvr.pbtxt; data from ember-datagen "
              f"--conversions); missing {missing or ['eval.true_prob_column']}", file=sys.stderr)
        return 2
    job, cluster = ember.cli.start_job(args, config)

    def train(attempt):
        torch.manual_seed(1)
        emb = ember.torch.EmbeddingCollection.from_config(attempt.client, config,
                                                          collective=attempt.collective)
        features = emb.feature_names
        model = ESMM(len(config.dense_columns), len(features), emb.dim(features[0]))
        opt = ember.torch.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                               attempt.collective)
        # The training data's EVAL columns carry the conversions.
        data = ember.data.Dataset(config, "train", attempt.rank, attempt.world_size,
                                  with_eval_columns=True)
        attempt.track(model, opt, data)

        def logits(batch):
            pooled = emb(batch)
            return model(batch.dense, [pooled[f] for f in features])

        for batch in attempt.steps(data, emb, max_steps=args.max_steps):
            ctr_logit, cvr_logit = logits(batch)
            # converted is 0 without a click: it is the click & convert label as is.
            loss = esmm_loss(ctr_logit, cvr_logit, batch.labels, batch.eval[CONVERTED],
                             weight=batch.weights)
            opt.zero_grad()
            loss.backward()   # pushes one gradient per unique ID (both towers') to the PS
            opt.step()        # all-reduces the dense gradients, then Adam
            attempt.record_loss(loss.item(), batch.size)
        evaluation = None
        if attempt.rank == 0 and config.test_path and not args.no_eval:
            evaluation = evaluate(logits, ember.data.Dataset(config, "test"), true_prob)
        return attempt.finish(evaluation)

    try:
        result = job.run(train)
    finally:
        ember.cli.stop(cluster)
    ember.cli.report(args, result)
    if args.rank == 0 and "test_auc" in result:
        print(f"cvr AUC {result['cvr_auc']:.4f}  oracle AUC {result['cvr_oracle_auc']:.4f}  "
              f"({result['cvr_examples']} clicked test examples)")
        print(f"ctcvr AUC {result['ctcvr_auc']:.4f}  oracle AUC {result['ctcvr_oracle_auc']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
