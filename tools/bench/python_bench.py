#!/usr/bin/python3
# Copyright 2026 The Ember Authors.
"""The `python` suite of ember-bench: the quickstart DLRM three ways on the same data,
measured in one run (docs/PERFORMANCE.md "Python and PyTorch"):

  1. examples/dlrm.py: the model in PyTorch on ember.torch, 1 worker + 1 PS (BSP);
  2. tools/bench/torch_reference.py: the same model with local nn tables, one process;
  3. ember-worker: Ember's native worker, 1 worker + 1 PS (BSP).

Prints one JSON object (the last line): each run's test AUC and examples/s, the ratios
python_vs_torch and python_vs_native, and where ember.torch's step time goes
(python_stage_*: pull, compute, exchange, push, all-reduce, as fractions).

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/python_bench.py --bin=build/bin
"""

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "..", "build", "python"))


def say(line):
    print(f"python: {line}", file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="the build's bin directory")
    p.add_argument("--scratch", default="/tmp/ember-bench-python")
    p.add_argument("--train_examples", type=int, default=1000000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    from ember.local import LocalCluster  # after the path is set

    os.makedirs(args.scratch, exist_ok=True)
    data = os.path.join(args.scratch, f"data-{args.train_examples}-s{args.seed}")
    if not os.path.exists(os.path.join(data, "oracle.json")):
        say(f"generating {data}")
        subprocess.run([os.path.join(args.bin, "ember-datagen"), f"--out={data}",
                        f"--train_examples={args.train_examples}", f"--seed={args.seed}"],
                       check=True, stdout=sys.stderr)
    with open(os.path.join(REPO, "configs", "quickstart.pbtxt")) as f:
        text = f.read().replace("../run/quickstart/data", data)
    config = os.path.join(args.scratch, "quickstart.pbtxt")
    with open(config, "w") as f:
        f.write(text)
    figures = {"train_examples": args.train_examples,
               "oracle_auc": json.load(open(os.path.join(data, "oracle.json")))["test_auc"]}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.join(os.path.dirname(os.path.abspath(args.bin)), "python"),
        os.environ.get("PYTHONPATH", "")])))

    # torch_reference.py imports the protos it compiles as `ember.v1`: without the
    # package on its path.
    reference_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    say("ember.torch, 1 worker + 1 PS")
    with LocalCluster(shards=1, bin_dir=args.bin) as cluster:
        out = os.path.join(args.scratch, "python-result.json")
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "dlrm.py"),
                        f"--config={config}", f"--coordinator={cluster.coordinator}",
                        f"--run_dir={args.scratch}/python-run", f"--result_json={out}",
                        "--threads=1"],  # as torch_reference.py (--threads default 1)
                       check=True, env=env, stdout=sys.stderr)
    py = json.load(open(out))
    figures["python_auc"] = py["test_auc"]
    figures["python_examples_per_sec"] = py["examples_per_sec"]
    stages = py.get("stage_seconds", {})
    total = sum(stages.values()) or 1.0
    for k, v in stages.items():
        figures[f"python_stage_{k}"] = v / total

    say("PyTorch reference (local tables)")
    ref = subprocess.run([sys.executable, os.path.join(REPO, "tools", "bench", "torch_reference.py"),
                          f"--config={config}", "--json"], check=True, capture_output=True,
                         text=True, env=reference_env)
    torch_ref = json.loads(ref.stdout.strip().splitlines()[-1])
    figures["torch_auc"] = torch_ref["test_auc"]
    figures["torch_examples_per_sec"] = torch_ref["examples_per_sec"]

    say("ember-worker, 1 worker + 1 PS")
    with LocalCluster(shards=1, bin_dir=args.bin) as cluster:
        run = os.path.join(args.scratch, "native-run")
        subprocess.run([os.path.join(args.bin, "ember-worker"), f"--config={config}",
                        f"--coordinator={cluster.coordinator}", f"--run_dir={run}",
                        "--eval_every_steps=0"], check=True, stdout=sys.stderr)
    native = json.load(open(os.path.join(run, "result.json")))
    figures["native_auc"] = native["test_auc"]
    figures["native_examples_per_sec"] = native["examples_per_sec"]

    figures["python_auc_minus_native"] = figures["python_auc"] - figures["native_auc"]
    figures["python_auc_met"] = abs(figures["python_auc_minus_native"]) <= 0.003
    figures["python_vs_torch"] = figures["python_examples_per_sec"] / figures["torch_examples_per_sec"]
    figures["python_vs_torch_met"] = figures["python_vs_torch"] >= 1.0
    figures["python_vs_native"] = figures["python_examples_per_sec"] / figures["native_examples_per_sec"]
    figures["python_vs_native_met"] = figures["python_vs_native"] >= 0.6
    figures["hardware_threads"] = os.cpu_count()
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
