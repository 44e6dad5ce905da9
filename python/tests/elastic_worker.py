#!/usr/bin/python3
# Copyright 2026 The Ember Authors.
"""A worker of test_elastic.py's elastic runs: a small click model over the test's own
data (a logistic layer on two pooled embeddings and one dense column), trained with
ember.Job's elastic mode. It records the `line_id` of every example it trains, per
attempt, so that the test can count every line of the epoch exactly once across the
world sizes, and writes its result (or ``{"left": true}``) as JSON.

    elastic_worker.py --config=C --coordinator=A --workers=2:3 --member=a \
        --out=DIR [--join_at_step=N] [--leave_at_step=N] [--max_steps=N]
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import ember
import ember.data
import ember.torch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", required=True)
    p.add_argument("--coordinator", required=True)
    p.add_argument("--workers", required=True)
    p.add_argument("--member", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--join_at_step", type=int, default=0)
    p.add_argument("--leave_at_step", type=int, default=0)
    p.add_argument("--max_steps", type=int, default=0,
                   help="steps to train (0: the config's epochs)")
    p.add_argument("--step_sleep_ms", type=int, default=0,
                   help="sleep this long in every step (a run long enough to signal)")
    args = p.parse_args()
    torch.set_num_threads(1)
    config = ember.load_config(args.config)
    job = ember.Job(config, args.coordinator, workers=args.workers, member=args.member,
                    join_at_step=args.join_at_step, leave_at_step=args.leave_at_step,
                    generation=1, collective_timeout_s=60.0)

    def train(attempt):
        torch.manual_seed(3)
        emb = ember.torch.EmbeddingCollection.from_config(attempt.client, config,
                                                          collective=attempt.collective)
        features = emb.feature_names
        model = torch.nn.Linear(sum(emb.dim(f) for f in features) + 1, 1)
        opt = ember.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                               attempt.collective)
        data = ember.data.Dataset(config, "train", attempt.rank, attempt.world_size)
        attempt.track(model, opt, data)
        seen = []
        path = os.path.join(args.out, f"lines-{args.member}-a{attempt.number}.npy")
        try:
            for batch in attempt.steps(data, emb, max_steps=args.max_steps or None):
                seen.append(batch.ids["line_id"].numpy().copy())
                pooled = emb(batch)
                x = torch.cat([pooled[f] for f in features] + [batch.dense], dim=1)
                loss = F.binary_cross_entropy_with_logits(model(x).squeeze(1), batch.labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                attempt.record_loss(loss.item(), batch.size)
                if args.step_sleep_ms:
                    time.sleep(args.step_sleep_ms / 1000)
        finally:
            # What this attempt trained (a resize ends the loop with AttemptResized).
            np.save(path, np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64))
        return attempt.finish()

    result = job.run(train)
    with open(os.path.join(args.out, f"result-{args.member}.json"), "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
