#!/usr/bin/python3
# Copyright 2026 The Ember Authors.
"""A DIN (Deep Interest Network) on the quickstart data, in PyTorch on ember.torch.

The candidate item attends over the user's recently clicked items (recent_items, which
shares the item table with item_id: the same ID is the same row). For each history
position h an MLP over [h, target, h - target, h * target] gives a raw weight (no
softmax, as in DIN); the weighted sum of h is the user's interest in the candidate. A
top MLP [64, 32] takes the bottom MLP's output over the dense features, every pooled
single-ID feature (the target among them) and the interest vector. The embedding tables
live on Ember's PS (the config's Adagrad on the server), the dense model in PyTorch
(Adam 0.01). Prints the test AUC (and the oracle's) and writes a run directory like
ember-worker's.

    export PYTHONPATH=$PWD/build/python
    /usr/bin/python3 examples/din.py                       # a local cluster of 2 shards
    /usr/bin/python3 examples/din.py --coordinator=127.0.0.1:6000 --rank=0 --world_size=2
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
HISTORY = "recent_items"
TARGET = "item_id"
MAX_HISTORY = 20  # the newest IDs of a longer history are kept


def mlp(sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return layers


class DIN(torch.nn.Module):
    def __init__(self, num_dense, num_single, dim, attention=(36,), bottom=(64, 16),
                 top=(64, 32)):
        super().__init__()
        self.attention = torch.nn.Sequential(*mlp([4 * dim, *attention]),
                                             torch.nn.Linear(attention[-1], 1))
        self.bottom = torch.nn.Sequential(*mlp([num_dense, *bottom]))
        self.top = torch.nn.Sequential(*mlp([bottom[-1] + (num_single + 1) * dim, *top]),
                                       torch.nn.Linear(top[-1], 1))
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)

    def interest(self, history, mask, target):
        """history [B, L, dim], mask [B, L], target [B, dim] -> [B, dim]."""
        t = target.unsqueeze(1).expand_as(history)
        score = self.attention(torch.cat([history, t, history - t, history * t], dim=-1))
        weight = score.squeeze(-1) * mask.to(score.dtype)     # padding weighs nothing
        return torch.bmm(weight.unsqueeze(1), history).squeeze(1)

    def forward(self, dense, single, history, mask, target):
        x = self.bottom(dense)
        return self.top(torch.cat([x, *single, self.interest(history, mask, target)],
                                  dim=1)).squeeze(1)


def main():
    args = ember.cli.parser(__doc__, os.path.join(REPO, "configs/quickstart.pbtxt"),
                            "run/examples/din").parse_args()
    config = ember.cli.load(args)
    job, cluster = ember.cli.start_job(args, config)

    def train(attempt):
        torch.manual_seed(1)
        emb = ember.torch.EmbeddingCollection.from_config(
            attempt.client, config, collective=attempt.collective, pooling={HISTORY: "none"})
        single = [f for f in emb.feature_names if f != HISTORY]
        model = DIN(len(config.dense_columns), len(single), emb.dim(TARGET))
        opt = ember.torch.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                               attempt.collective)
        data = ember.data.Dataset(config, "train", attempt.rank, attempt.world_size)
        attempt.track(model, opt, data)

        def logits(batch):
            pooled = emb(batch)
            history, mask = ember.torch.pad(pooled[HISTORY], MAX_HISTORY)
            return model(batch.dense, [pooled[f] for f in single], history, mask,
                         pooled[TARGET])

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
