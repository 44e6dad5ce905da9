// deploy/local/cluster.sh: its usage and the checks of `train --workers=MIN:MAX` and
// `scale` that need no binaries. (Running elastic workers needs a build: the job
// tests start them through tests/support, not through this script.)

import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { repoPath, run } from "./lib.mjs";

const SCRIPT = repoPath("deploy/local/cluster.sh");
function cluster(...args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ember-cluster-sh-"));
  try {
    const r = run("bash", [SCRIPT, ...args, `--run_dir=${dir}/run`, `--build_dir=${dir}/build`], { cwd: dir });
    return { status: r.status, out: r.stdout, err: r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
}

test("cluster.sh --help documents scale and elastic train", () => {
  const r = run("bash", [SCRIPT, "--help"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^ {2}scale {4}--workers=N/m);
  assert.match(r.stdout, /--workers=MIN:MAX: an elastic run/);
  assert.match(r.stdout, /--shards=N/);
});

test("cluster.sh rejects bad --workers and scale without a count (exit 2)", () => {
  for (const args of [
    ["scale"],
    ["scale", "--workers=2:4"],
    ["train", "--workers=3:2"],
    ["train", "--workers=0:2"],
    ["train", "--workers=2:"],
    ["up", "--workers=1:2"],
  ]) {
    const r = cluster(...args);
    assert.equal(r.status, 2, `${args.join(" ")}: status ${r.status}, ${r.err}`);
    assert.match(r.err, /^cluster\.sh: .*(--workers|scale needs)/m, args.join(" "));
  }
});

test("cluster.sh scale needs a running cluster and an elastic run", () => {
  const r = cluster("scale", "--workers=3");
  assert.equal(r.status, 1);
  assert.match(r.err, /no cluster runs in/);
});
