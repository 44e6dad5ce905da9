#!/usr/bin/env python3
# The defaults sweep of docs/PERFORMANCE.md ("Defaults that learn"): test AUC after one
# epoch of ember-worker (1 BSP worker, 2 PS shards, a fresh local cluster per run) for
# optimizer settings on four datasets of different structure:
#
#   Q  ember-datagen, the quickstart's generator (seed 5, 400k rows), configs/quickstart.pbtxt
#   Z  ember-datagen --zipf=1.3 --seed=23 (more skew, 20k users), the same config
#   C  tools/criteo_like/gen.py (first-order truth, hex columns), tools/criteo_like/criteo_like.pbtxt
#   R  tools/ratings_like/gen.py (low-rank user x item truth, drift), tools/ratings_like/ratings_like.pbtxt
#
# Every variant starts from the dataset's config with every table optimizer and
# initializer and the dense optimizer removed ("left out": Ember's defaults), then sets
# what the variant names. Variants (--variants, comma-separated):
#   default                      nothing set
#   adagrad:LR:ACC               tables: optimizer { kind: ADAGRAD learning_rate: LR initial_accumulator: ACC }
#   adagrad:LR / sgd:LR / adam:LR / ftrl:LR   tables: that optimizer at LR, the rest default
#   init:SCALE                   tables: initializer { kind: UNIFORM scale: SCALE }
#   dense:KIND:LR[:ACC]          dense_optimizer { kind: KIND learning_rate: LR [initial_accumulator: ACC] }
#   A+B                          both (e.g. adagrad:0.1:0+dense:ADAM:0.003)
# Results are appended to --out as "dataset variant auc logloss oracle_auc" lines; a
# (dataset, variant) already there is not run again, so an interrupted sweep resumes.
#
#   tools/sweeps/optimizer_sweep.py --datasets=Q,C --variants=default,adagrad:0.1:0
#
# Needs a build (build/bin) and Debian's python3. Every figure is deterministic (BSP).
import argparse, json, os, re, subprocess, sys, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BASE = {"Q": "configs/quickstart.pbtxt", "Z": "configs/quickstart.pbtxt",
        "C": "tools/criteo_like/criteo_like.pbtxt", "R": "tools/ratings_like/ratings_like.pbtxt"}


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, check=True, **kw)


def prepare(dataset, data_root, build_dir):
    """Generates the dataset once; returns (train_path, test_path)."""
    d = os.path.join(data_root, dataset)
    if dataset in "QZ":
        if not os.path.exists(os.path.join(d, "oracle.json")):
            extra = (["--seed=5"] if dataset == "Q" else
                     ["--zipf=1.3", "--seed=23", "--users=20000", "--items=10000"])
            run([os.path.join(build_dir, "bin", "ember-datagen"), "--out=" + d,
                 "--train_examples=400000", "--test_examples=40000", "--train_files=4"] + extra,
                stdout=subprocess.DEVNULL)
        return os.path.join(d, "train"), os.path.join(d, "test")
    if dataset == "C":
        if not os.path.exists(os.path.join(d, "train")):
            run(["tools/criteo_like/gen.py", "300000", "30000", d], stdout=subprocess.DEVNULL)
            os.makedirs(os.path.join(d, "train"))
            run(["split", "-n", "l/4", "-d", os.path.join(d, "train.txt"),
                 os.path.join(d, "train", "part-")])
            os.remove(os.path.join(d, "train.txt"))
        return os.path.join(d, "train"), os.path.join(d, "test.txt")
    if not os.path.exists(os.path.join(d, "oracle.json")):
        run([sys.executable, "tools/ratings_like/gen.py", d], stdout=subprocess.DEVNULL)
    return os.path.join(d, "train"), os.path.join(d, "test")


def variant_config(dataset, variant, train, test):
    s = open(os.path.join(ROOT, BASE[dataset])).read()
    s = re.sub(r"(?<!dense_)optimizer \{[^}]*\}", "", s)
    s = re.sub(r"initializer \{[^}]*\}", "", s)
    s = re.sub(r"dense_optimizer \{[^}]*\}", "", s)
    s = re.sub(r'train_path: "[^"]*"', 'train_path: "%s"' % train, s)
    s = re.sub(r'test_path: "[^"]*"', 'test_path: "%s"' % test, s)
    table, dense = [], ""
    for part in variant.split("+"):
        f = part.split(":")
        if f[0] == "default":
            continue
        elif f[0] == "adagrad" and len(f) == 3:
            table.append("optimizer { kind: ADAGRAD learning_rate: %s initial_accumulator: %s }"
                         % (f[1], f[2]))
        elif f[0] == "adagrad":
            table.append("optimizer { kind: ADAGRAD learning_rate: %s }" % f[1])
        elif f[0] in ("sgd", "adam", "ftrl"):
            table.append("optimizer { kind: %s learning_rate: %s }" % (f[0].upper(), f[1]))
        elif f[0] == "init":
            table.append("initializer { kind: UNIFORM scale: %s }" % f[1])
        elif f[0] == "dense" and len(f) == 4:
            dense = ("dense_optimizer { kind: %s learning_rate: %s initial_accumulator: %s }\n"
                     % (f[1], f[2], f[3]))
        elif f[0] == "dense":
            dense = "dense_optimizer { kind: %s learning_rate: %s }\n" % (f[1], f[2])
        else:
            sys.exit("optimizer_sweep: unknown variant part '%s'" % part)
    if table:
        s = s.replace("tables {", "tables { " + " ".join(table))
    return s + dense


def main():
    ap = argparse.ArgumentParser(description="Ember's optimizer-defaults sweep (see the header).")
    ap.add_argument("--datasets", default="Q,Z,C,R")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--out", default="run/sweeps/results.tsv")
    ap.add_argument("--build_dir", default="build")
    ap.add_argument("--data_dir", default="run/sweeps/data")
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    build_dir = os.path.join(ROOT, a.build_dir)
    out = os.path.join(ROOT, a.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    done = set()
    if os.path.exists(out):
        done = {tuple(l.split()[:2]) for l in open(out) if l.strip()}
    work = os.path.join(ROOT, "run", "sweeps")
    for dataset in a.datasets.split(","):
        if dataset not in BASE:
            sys.exit("optimizer_sweep: unknown dataset '%s' (Q, Z, C, R)" % dataset)
        train, test = prepare(dataset, os.path.join(ROOT, a.data_dir), build_dir)
        for variant in a.variants.split(","):
            if (dataset, variant) in done:
                continue
            cfg = os.path.join(work, "sweep-%s.pbtxt" % dataset)
            with open(cfg, "w") as fh:
                fh.write(variant_config(dataset, variant, train, test))
            cluster = os.path.join(work, "cluster-%d" % os.getpid())
            subprocess.run(["rm", "-rf", cluster])
            t0 = time.time()
            cl = ["deploy/local/cluster.sh"]
            for attempt in range(3):  # a loaded machine can miss `up`'s start timeout
                up = subprocess.run(cl + ["up", "--run_dir=" + cluster, "--build_dir=" + build_dir],
                                    cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                                    text=True)
                if up.returncode == 0:
                    break
                sys.stderr.write("optimizer_sweep: cluster.sh up failed:\n" + up.stderr[-1000:])
                subprocess.run(cl + ["down", "--run_dir=" + cluster], cwd=ROOT,
                               capture_output=True, stdin=subprocess.DEVNULL)
                subprocess.run(["rm", "-rf", cluster])
            else:
                sys.exit("optimizer_sweep: no cluster after 3 tries")
            try:
                r = subprocess.run(cl + ["train", "--run_dir=" + cluster, "--build_dir=" + build_dir,
                                         "--workers=%d" % a.workers, "--config=" + cfg,
                                         "--worker_args=--epochs=1 --eval_every_steps=0"],
                                   cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                                   text=True)
            finally:
                subprocess.run(cl + ["down", "--run_dir=" + cluster], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            try:
                res = json.load(open(os.path.join(cluster, "job", "result.json")))
                line = "%s %s %.4f %.4f %s" % (dataset, variant, res["test_auc"], res["test_logloss"],
                                               "%.4f" % res["oracle_auc"] if res.get("oracle_auc") else "-")
            except (OSError, ValueError, KeyError):
                line = "%s %s failed - -" % (dataset, variant)
                sys.stderr.write(r.stdout[-2000:] + r.stderr[-2000:])
            subprocess.run(["rm", "-rf", cluster])
            with open(out, "a") as fh:
                fh.write(line + "\n")
            print(line + "  (%.0f s)" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
