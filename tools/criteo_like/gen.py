#!/usr/bin/env python3
# A Criteo-shaped click log that ember-datagen did not make, for trying a config as a new
# user would: label, I1..I13 (integers, 10% empty), C1..C26 (8-digit hex, 5% empty),
# tab-separated, no header (data.format CRITEO_TSV). Clicks come from a hidden logistic
# model over I1, I5 and four categorical columns (C1, C4, C8, C13); value popularity is
# skewed. Prints the oracle AUC (the true click probabilities') of the test file.
#
#   tools/criteo_like/gen.py TRAIN_ROWS TEST_ROWS OUT_DIR     # e.g. 300000 30000 data/criteo
#
# Standard library only; deterministic (seed 7).
import random, math, sys
random.seed(7)
n_train, n_test = int(sys.argv[1]), int(sys.argv[2])
out = sys.argv[3]
card = [random.choice([5, 50, 500, 5000, 50000]) for _ in range(26)]
bias = [dict() for _ in range(26)]
def cat_effect(j, v):
    if j not in (0, 3, 7, 12): return 0.0
    d = bias[j]
    if v not in d: d[v] = random.gauss(0, 0.8)
    return d[v]
def row():
    ints = [int(random.expovariate(0.05)) if random.random() > 0.1 else None for _ in range(13)]
    cats = []
    for j in range(26):
        if random.random() < 0.05: cats.append(None); continue
        # Zipf-ish popularity
        v = int(card[j] * (random.random() ** 2.5))
        cats.append(v)
    z = -1.5 + 0.02 * (ints[0] or 0) - 0.015 * (ints[4] or 0)
    z += sum(cat_effect(j, v) for j, v in enumerate(cats) if v is not None)
    p = 1 / (1 + math.exp(-z))
    label = 1 if random.random() < p else 0
    f = [str(label)] + ["" if x is None else str(x) for x in ints]
    f += ["" if v is None else format((v * 2654435761 + j * 97) & 0xffffffff, "08x") for j, v in enumerate(cats)]
    return "\t".join(f), p
import os
os.makedirs(out, exist_ok=True)
ps = []
for name, n in (("train.txt", n_train), ("test.txt", n_test)):
    with open(os.path.join(out, name), "w") as fh:
        for _ in range(n):
            line, p = row(); fh.write(line + "\n")
            if name == "test.txt": ps.append((p, int(line.split("\t")[0])))
ps.sort()
pos = sum(l for _, l in ps); neg = len(ps) - pos
rank_sum = sum(i + 1 for i, (_, l) in enumerate(ps) if l)
print("oracle AUC %.4f" % ((rank_sum - pos * (pos + 1) / 2) / (pos * neg)))
