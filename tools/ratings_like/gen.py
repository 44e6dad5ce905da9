#!/usr/bin/env python3
# A movie-ratings-shaped click log that ember-datagen did not make, with another structure
# than both it and tools/criteo_like/gen.py: clicks ("rating >= 4") come from low-rank
# user x item affinities (rank 6), where an item's factors are the sum of its genres'
# factors plus its own, on top of user and item biases and an age x release-year effect.
# Second-order structure, so a model without feature interactions cannot reach the oracle.
# Users carry demographics (gender, occupation, zip prefix, age); items a multi-hot genre
# list and a release year. Examples are ordered in time and split 80/20 by time: later
# examples favour newer items, so the test set holds items the training set saw rarely.
#
#   tools/ratings_like/gen.py [--seed=S] [--train=N] [--test=N] OUT_DIR
#
# Writes OUT_DIR/train/part-0000{0..3}.tsv, OUT_DIR/test/part-00000.tsv (a header line,
# tab-separated: label user_id item_id gender occupation zip genres age year true_prob)
# and OUT_DIR/oracle.json; prints the oracle AUC (the true click probabilities' on the
# test set). Standard library only; deterministic for a seed.
import argparse, json, math, os, random

ap = argparse.ArgumentParser(description="A movie-ratings-shaped click log (see the header).")
ap.add_argument("out")
ap.add_argument("--seed", type=int, default=11)
ap.add_argument("--train", type=int, default=400000)
ap.add_argument("--test", type=int, default=50000)
ap.add_argument("--users", type=int, default=6000)
ap.add_argument("--items", type=int, default=3700)
a = ap.parse_args()
if a.train < 4 or a.test < 1 or a.users < 1 or a.items < 1:
    ap.error("--train >= 4, --test, --users and --items >= 1")
rnd = random.Random(a.seed)
RANK, GENRES = 6, 18


def vec(scale):
    return [rnd.gauss(0, scale) for _ in range(RANK)]


genre_vec = [vec(0.45) for _ in range(GENRES)]
occupation_bias = [rnd.gauss(0, 0.15) for _ in range(21)]
users = []
for u in range(a.users):
    users.append({
        "gender": rnd.choice("MF"),
        "occupation": rnd.randrange(21),
        "zip": "%03d" % int(1000 * rnd.random() ** 1.7),
        "age": rnd.choice([18, 25, 35, 45, 50, 56]) if rnd.random() > 0.05 else rnd.randint(1, 17),
        "vec": vec(0.5),
        "bias": rnd.gauss(0, 0.5),
        # how much this user's taste follows the population's
        "activity": rnd.paretovariate(1.2),
    })
items = []
for i in range(a.items):
    genres = sorted(rnd.sample(range(GENRES), rnd.choice([1, 1, 2, 2, 3])))
    v = vec(0.3)
    for g in genres:
        v = [x + y for x, y in zip(v, genre_vec[g])]
    items.append({
        "genres": genres,
        "year": int(1930 + 70 * rnd.random() ** 0.4),
        "vec": v,
        "bias": rnd.gauss(0, 0.6),
        "pop": rnd.paretovariate(1.1),
    })
for x in items:
    x["pop"] *= 1 + 3 * (x["year"] - 1930) / 70  # newer films are watched more
user_weights = [u["activity"] for u in users]
n = a.train + a.test


def item_weights(t):
    # Popularity drifts towards newer films as time passes (t in [0, 1)).
    return [x["pop"] * math.exp(2.5 * t * (x["year"] - 1985) / 15) for x in items]


def logit(u, x):
    z = -0.4 + u["bias"] + x["bias"] + sum(p * q for p, q in zip(u["vec"], x["vec"]))
    z += occupation_bias[u["occupation"]]
    z -= 0.25 * ((u["age"] - 30) / 15) * ((x["year"] - 1975) / 20)  # older users, older films
    return z


rows = []
chunk = 20000
for start in range(0, n, chunk):
    iw = item_weights(start / n)
    us = rnd.choices(range(a.users), weights=user_weights, k=min(chunk, n - start))
    its = rnd.choices(range(a.items), weights=iw, k=len(us))
    for ui, ii in zip(us, its):
        u, x = users[ui], items[ii]
        p = 1 / (1 + math.exp(-logit(u, x)))
        label = 1 if rnd.random() < p else 0
        rows.append("\t".join([
            str(label), str(ui + 1), str(ii + 1), u["gender"], str(u["occupation"]), u["zip"],
            "|".join(str(g) for g in x["genres"]), str(u["age"]), str(x["year"]), "%.6f" % p,
        ]))
header = "label\tuser_id\titem_id\tgender\toccupation\tzip\tgenres\tage\tyear\ttrue_prob\n"
os.makedirs(os.path.join(a.out, "train"), exist_ok=True)
os.makedirs(os.path.join(a.out, "test"), exist_ok=True)
per = (a.train + 3) // 4
for f in range(4):
    with open(os.path.join(a.out, "train", "part-%05d.tsv" % f), "w") as fh:
        fh.write(header)
        fh.writelines(r + "\n" for r in rows[f * per:min((f + 1) * per, a.train)])
with open(os.path.join(a.out, "test", "part-00000.tsv"), "w") as fh:
    fh.write(header)
    fh.writelines(r + "\n" for r in rows[a.train:])
test = sorted((float(r.rsplit("\t", 1)[1]), int(r[0])) for r in rows[a.train:])
pos = sum(l for _, l in test)
neg = len(test) - pos
rank_sum = sum(i + 1 for i, (_, l) in enumerate(test) if l)
auc = (rank_sum - pos * (pos + 1) / 2) / (pos * neg) if pos and neg else float("nan")
ll = -sum(math.log(p) if l else math.log(1 - p) for p, l in test) / len(test)
with open(os.path.join(a.out, "oracle.json"), "w") as fh:
    json.dump({"oracle_auc": auc, "oracle_logloss": ll, "test_click_rate": pos / len(test),
               "seed": a.seed}, fh)
print("oracle AUC %.4f logloss %.4f test click rate %.3f" % (auc, ll, pos / len(test)))
