#!/usr/bin/python3
# Copyright 2026 The Ember Authors.
"""The quickstart DLRM written in PyTorch on ember.torch.

The model ember-worker trains from configs/quickstart.pbtxt (bottom MLP [64, 16] over the
dense features, DLRM dot interaction with the 8 pooled features, top MLP [64, 32], Adam
0.01), with the embedding tables on Ember's PS (Adagrad on the server) and the dense
model in PyTorch. Prints the test AUC (and the oracle's: ember-datagen plants the true
click probability) and writes a run directory like ember-worker's.

    export PYTHONPATH=$PWD/build/python
    /usr/bin/python3 examples/dlrm.py                      # a local cluster of 2 shards
    /usr/bin/python3 examples/dlrm.py --coordinator=127.0.0.1:6000 --rank=0 --world_size=2
"""

import os
import sys

import torch
import torch.nn.functional as F

import ember
import ember.cli
import ember.data
import ember.torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mlp(sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return layers


class DLRM(torch.nn.Module):
    def __init__(self, num_dense, num_features, dim, bottom=(64, 16), top=(64, 32)):
        super().__init__()
        self.bottom = torch.nn.Sequential(*mlp([num_dense, *bottom]))
        n = num_features + 1
        li, lj = torch.tril_indices(n, n, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        self.top = torch.nn.Sequential(*mlp([bottom[-1] + n * (n - 1) // 2, *top]),
                                       torch.nn.Linear(top[-1], 1))
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)

    def forward(self, dense, pooled):
        x = self.bottom(dense)
        z = torch.stack([x, *pooled], dim=1)            # [B, F + 1, dim]
        # The strictly lower triangle of z z^T, gathered pair by pair (on the CPU this is
        # several times faster than bmm and then indexing, forward and backward).
        dots = (z.index_select(1, self.li) * z.index_select(1, self.lj)).sum(2)
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


def main():
    args = ember.cli.parser(__doc__, os.path.join(REPO, "configs/quickstart.pbtxt"),
                            "run/examples/dlrm").parse_args()
    config = ember.cli.load(args)
    job, cluster = ember.cli.start_job(args, config)

    def train(attempt):
        torch.manual_seed(1)
        emb = ember.torch.EmbeddingCollection.from_config(attempt.client, config,
                                                          collective=attempt.collective)
        features = emb.feature_names
        model = DLRM(len(config.dense_columns), len(features), emb.dim(features[0]))
        opt = ember.torch.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                               attempt.collective)
        data = ember.data.Dataset(config, "train", attempt.rank, attempt.world_size)
        attempt.track(model, opt, data)

        def logits(batch):
            pooled = emb(batch)
            return model(batch.dense, [pooled[f] for f in features])

        for batch in attempt.steps(data, emb, max_steps=args.max_steps):
            loss = F.binary_cross_entropy_with_logits(logits(batch), batch.labels,
                                                      weight=batch.weights)
            opt.zero_grad()
            loss.backward()   # pushes one gradient per unique ID to the PS
            opt.step()        # all-reduces the dense gradients, then Adam
            attempt.record_loss(loss.item(), batch.size)
        evaluation = None
        if attempt.rank == 0 and config.test_path and not args.no_eval:
            evaluation = ember.torch.evaluate(logits, ember.data.Dataset(config, "test"))
        return attempt.finish(evaluation)

    try:
        result = job.run(train)
    finally:
        ember.cli.stop(cluster)
    ember.cli.report(args, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
