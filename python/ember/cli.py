"""The command line the examples share (examples/*.py): where the job runs, its rank, TLS,
the run directory, and a local cluster when no coordinator is given.

    p = ember.cli.parser(__doc__, config=DEFAULT_CONFIG, run_dir="run/examples/x")
    args = p.parse_args()
    config = ember.cli.load(args)
    job, cluster = ember.cli.start_job(args, config)
    try:
        result = job.run(train)
    finally:
        ember.cli.stop(cluster)
    ember.cli.report(args, result)
"""

import argparse
import json
import os

from .errors import InvalidArgumentError
from .jobs import Job, _worker_range
from .local import LocalCluster


def parser(description, config, run_dir):
    """The shared flags; ``config`` and ``run_dir`` are their defaults."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=config)
    p.add_argument("--coordinator", default="", help="default: start a local cluster")
    p.add_argument("--shards", type=int, default=2, help="shards of the local cluster")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world_size", type=int, default=1)
    p.add_argument("--workers", default="",
                   help="MIN:MAX: an elastic run (the coordinator gives ranks; workers join "
                        "and leave at checkpoints); instead of --rank and --world_size")
    p.add_argument("--member", default=None, help="elastic: this worker's id (HOSTNAME-PID)")
    p.add_argument("--join_at_step", type=int, default=0,
                   help="elastic: join a running run at a checkpoint at or after this step")
    p.add_argument("--leave_at_step", type=int, default=0,
                   help="elastic: leave at a checkpoint at or after this step (as on SIGTERM)")
    p.add_argument("--generation", type=int, default=0)
    p.add_argument("--run_id", default=None,
                   help="name the run instead of --generation (the same on every worker): "
                        "the coordinator allocates its generation")
    p.add_argument("--rows", choices=("continue", "fresh"), default=None,
                   help="a new run on a cluster an earlier run trained on: train on from the "
                        "PS rows (continue) or empty every table first (fresh)")
    p.add_argument("--own_tables", action="store_true",
                   help="the job's tables are its own (a store of the job's on every PS shard), "
                        "so that it trains beside other jobs on the cluster")
    p.add_argument("--tls_ca", default="", help="mutual TLS: the CA (with --tls_cert, --tls_key)")
    p.add_argument("--tls_cert", default="", help="this worker's certificate (e.g. client.pem)")
    p.add_argument("--tls_key", default="", help="its private key")
    p.add_argument("--run_dir", default=run_dir)
    p.add_argument("--max_steps", type=int, default=None)
    p.add_argument("--no_eval", action="store_true", help="skip the test-set evaluation")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads (default: cores / workers - 1: a core stays for the PS "
                        "shards and the reader; on 2 cores 1 thread trained 1.4x faster than 2)")
    p.add_argument("--result_json", default="", help="also write the result here (JSON)")
    return p


def load(args):
    """Sets torch's threads and loads the config."""
    import torch
    from . import load_config
    # Elastic: as many threads as at its largest (a bad range is refused here already).
    workers = _worker_range(args.workers)[1] if args.workers else args.world_size
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 2) // max(1, workers) - 1))
    return load_config(args.config)


def start_job(args, config):
    """(the Job, the local cluster started for it or None)."""
    cluster = None
    if not args.coordinator:
        cluster = LocalCluster(shards=args.shards).start()
        args.coordinator = cluster.coordinator
    if args.workers:
        if args.rank != 0 or args.world_size != 1:
            raise InvalidArgumentError(
                "--workers=MIN:MAX makes the run elastic: the coordinator gives the rank and "
                "the world size; leave out --rank and --world_size")
        where = dict(workers=args.workers, member=args.member, join_at_step=args.join_at_step,
                     leave_at_step=args.leave_at_step)
    else:
        where = dict(rank=args.rank, world_size=args.world_size)
    job = Job(config, args.coordinator, generation=args.generation, run_id=args.run_id,
              rows=args.rows, own_tables=args.own_tables,
              run_dir=args.run_dir,
              tls=(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca else None, **where)
    return job, cluster


def stop(cluster):
    if cluster is not None:
        cluster.stop()


def report(args, result):
    """Writes --result_json and prints rank 0's `test AUC X  oracle AUC Y` line."""
    if args.result_json:
        with open(args.result_json, "w") as f:
            json.dump(result, f)
    if result.get("rank", args.rank) == 0 and "test_auc" in result:
        oracle = f"  oracle AUC {result['oracle_auc']:.4f}" if "oracle_auc" in result else ""
        print(f"test AUC {result['test_auc']:.4f}{oracle}  "
              f"({result['examples_per_sec']:.0f} ex/s)")
