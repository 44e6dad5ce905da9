// deploy/docker: the Dockerfiles lint clean (dockerfilelint) and keep their promises:
// multi-stage, Debian 12, the project's install-deps.sh in the build stage, a runtime
// stage without build tools that runs as uid 10001.

import assert from "node:assert/strict";
import fs from "node:fs";
import { createRequire } from "node:module";
import { test } from "node:test";
import { repoPath } from "./lib.mjs";

const require = createRequire(import.meta.url);
const dockerfilelint = require("dockerfilelint");

const FILES = ["deploy/docker/Dockerfile.cpu", "deploy/docker/Dockerfile.worker-cuda"];

// Instructions of a Dockerfile (continuations joined, comments dropped), split by stage.
function stages(text) {
  const out = [];
  let line = "";
  for (const raw of text.split("\n")) {
    const l = raw.trim();
    if (l === "" || l.startsWith("#")) continue;
    line += l.endsWith("\\") ? l.slice(0, -1) + " " : l;
    if (l.endsWith("\\")) continue;
    const [op, ...rest] = line.split(/\s+/);
    if (op.toUpperCase() === "FROM") out.push({ from: rest.join(" "), ins: [] });
    else if (out.length > 0) out.at(-1).ins.push({ op: op.toUpperCase(), args: rest.join(" ") });
    line = "";
  }
  return out;
}

test("the linter finds problems (sanity)", () => {
  const found = dockerfilelint.run("/nonexistent", "FROM debian\nrun apt-get install foo\n");
  assert.ok(found.length >= 2, JSON.stringify(found));
});

for (const file of FILES) {
  const text = fs.readFileSync(repoPath(file), "utf8");

  test(`${file} lints clean`, () => {
    const found = dockerfilelint.run("/nonexistent", text);
    assert.deepEqual(found.map((f) => `line ${f.line}: ${f.title}: ${f.description}`), []);
  });

  test(`${file}: multi-stage build on Debian 12, non-root runtime without build tools`, () => {
    const s = stages(text);
    assert.ok(s.length >= 2, "multi-stage");
    const [build, runtime] = [s[0], s.at(-1)];
    assert.match(build.from, /^debian:12 AS build$/);
    assert.equal(runtime.from, "debian:12-slim");
    const buildRuns = build.ins.filter((i) => i.op === "RUN").map((i) => i.args).join("\n");
    assert.match(buildRuns, /tools\/install-deps\.sh/);
    assert.match(buildRuns, /cmake -S \. -B build -G Ninja -DCMAKE_BUILD_TYPE=Release/);
    const runtimeText = runtime.ins.map((i) => `${i.op} ${i.args}`).join("\n");
    for (const tool of ["build-essential", "cmake", "ninja-build", "-dev\\b", "gcc", "g\\+\\+", "nvcc", "curl"]) {
      assert.doesNotMatch(runtimeText, new RegExp(tool), `the runtime stage installs ${tool}`);
    }
    const user = runtime.ins.filter((i) => i.op === "USER").at(-1);
    assert.equal(user?.args, "10001:10001", "runs as uid 10001");
    assert.match(runtimeText, /useradd --uid 10001/);
    const copies = runtime.ins.filter((i) => i.op === "COPY" && i.args.startsWith("--from=build /src/build/bin/"));
    assert.ok(copies.length > 0 && copies.every((c) => c.args.endsWith(" /usr/local/bin/")), "binaries into /usr/local/bin");
  });
}

test("the runtime libraries are the ones the binaries link", () => {
  // The runtime packages of the -dev packages tools/install-deps.sh installs.
  const cpu = fs.readFileSync(repoPath("deploy/docker/Dockerfile.cpu"), "utf8");
  for (const p of ["libgrpc++1.51", "libprotobuf32", "librocksdb7.8", "libabsl20220623", "libprometheus-cpp-pull1.0", "libgloo0", "libopenblas0-pthread"]) {
    assert.ok(cpu.includes(` ${p} `) || cpu.includes(` ${p}\n`) || cpu.includes(`${p} \\`), `Dockerfile.cpu lacks ${p}`);
  }
  const bins = /COPY --from=build ((?:\/src\/build\/bin\/\S+\s+)+)\/usr\/local\/bin\//.exec(cpu.replace(/\\\n\s*/g, " "));
  const names = bins[1].trim().split(/\s+/).map((b) => b.split("/").at(-1)).sort();
  assert.deepEqual(names, ["ember-bench", "ember-coordinator", "ember-datagen", "ember-ps", "ember-serving", "ember-worker", "emberctl"]);
});

test(".dockerignore keeps build outputs, run directories and git out of the context", () => {
  const lines = fs.readFileSync(repoPath(".dockerignore"), "utf8").split("\n").map((l) => l.trim());
  for (const p of [".git", "build*/", "run/", "tests/deploy/node_modules/"]) assert.ok(lines.includes(p), p);
});
