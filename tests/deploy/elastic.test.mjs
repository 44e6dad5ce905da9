// deploy/k8s/overlays/elastic-cpu and elastic-gpu: training workers as a Deployment
// running elastic ember-worker (--workers=MIN:MAX), an HPA on the job's ETA for them, an
// HPA on the pull rate for the PS shards, and the prometheus-adapter rules that serve
// both; elastic-gpu puts each worker on a GPU.
// (The checks every overlay shares, this one included, are in manifests.test.mjs.)

import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import { HAVE_KUBECTL, NO_KUBECTL, envMap, find, flags, kustomize, readYaml, repoPath } from "./lib.mjs";

const OVERLAYS = { "deploy/k8s/overlays/elastic-cpu": { gpu: false }, "deploy/k8s/overlays/elastic-gpu": { gpu: true } };
const ADAPTER = readYaml("deploy/prometheus/adapter-rules.yaml")[0].rules;
// The job the workers train: the model config's name (the coordinator's training_job label).
const JOB_NAME = /^name:\s*"([^"]+)"/m.exec(fs.readFileSync(repoPath("deploy/k8s/base/model.pbtxt"), "utf8"))[1];

const worker = (d) => d.spec.template.spec.containers.find((c) => c.name === "worker");
const selects = (selector, labels) => Object.entries(selector).every(([k, v]) => labels?.[k] === v);

for (const [DIR, { gpu }] of Object.entries(OVERLAYS)) {
describe(`elastic workers and autoscalers of ${DIR}`, { skip: HAVE_KUBECTL ? false : NO_KUBECTL }, () => {
  const objs = HAVE_KUBECTL ? kustomize(DIR) : [];
  const deployment = () => find(objs, "Deployment", "ember-worker");
  const hpa = (name) => find(objs, "HorizontalPodAutoscaler", name);

  test("no Job: the workers are a Deployment the HPA owns the size of", () => {
    assert.deepEqual(objs.filter((o) => o.kind === "Job").map((o) => o.metadata.name), [], "the base's worker Job is deleted");
    const d = deployment();
    assert.equal(d.spec.replicas, undefined, "the HPA owns the replica count (apply would reset it)");
    assert.ok([undefined, "Always"].includes(d.spec.template.spec.restartPolicy));
    assert.ok(selects(d.spec.selector.matchLabels, d.spec.template.metadata.labels));
    assert.equal(d.spec.template.metadata.labels["app.kubernetes.io/component"], "worker");
  });

  test("elastic flags: --workers=MIN:MAX, --member from the pod name, a fixed --run_id; no fixed world", () => {
    const c = worker(deployment());
    const f = flags(c);
    const env = envMap(c);
    assert.match(f.workers, /^[1-9][0-9]*:[1-9][0-9]*$/, `--workers=${f.workers}`);
    assert.equal(f.member, "$(POD_NAME)");
    assert.equal(c.env.find((e) => e.name === "POD_NAME")?.valueFrom?.fieldRef?.fieldPath, "metadata.name");
    // A literal: every pod of the run, restarted or added later, names the same run.
    assert.match(f.run_id, /^[A-Za-z0-9._-]{1,128}$/);
    // --workers and --rank/--world_size exclude each other, their env variables too.
    for (const flag of ["rank", "world_size", "generation"]) assert.equal(f[flag], undefined, `--${flag}`);
    for (const v of ["EMBER_RANK", "EMBER_WORLD_SIZE", "JOB_COMPLETION_INDEX", "EMBER_WORKERS", "EMBER_MEMBER", "EMBER_RUN_ID"]) {
      assert.ok(!(v in env), `${v} is set: it would conflict with or shadow the args`);
    }
    for (const a of c.args) assert.doesNotMatch(a, /JOB_COMPLETION_INDEX|EMBER_WORLD_SIZE|controller-uid/);
    // Gloo binds and advertises the pod's IP, as in the base.
    assert.equal(env.EMBER_COLLECTIVE_HOST, "$(POD_IP)");
    assert.equal(c.env.find((e) => e.name === "POD_IP")?.valueFrom?.fieldRef?.fieldPath, "status.podIP");
    assert.match(env.EMBER_COORDINATOR, /^ember-coordinator\.\$\(POD_NAMESPACE\)\.svc:7000$/);
  });

  test(gpu ? "one GPU each: the CUDA image, --device=cuda, a GPU request and the GPU toleration"
           : "CPU only: the CPU image, --device=cpu, no GPU request or toleration", () => {
    const d = deployment();
    const c = worker(d);
    const tolerates = (d.spec.template.spec.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu");
    if (gpu) {
      assert.equal(flags(c).device, "cuda");
      assert.match(c.image, /ember-worker-cuda/);
      assert.equal(c.resources.requests["nvidia.com/gpu"], "1");
      assert.equal(c.resources.limits["nvidia.com/gpu"], "1");
      assert.ok(tolerates, "GPU nodes are tainted: the worker tolerates nvidia.com/gpu");
    } else {
      assert.equal(flags(c).device, "cpu");
      assert.doesNotMatch(c.image, /cuda/);
      assert.equal(c.resources.requests["nvidia.com/gpu"], undefined);
      assert.equal(c.resources.limits?.["nvidia.com/gpu"], undefined);
      assert.ok(!tolerates);
    }
    assert.ok(Number(c.resources.requests.cpu) >= 1);
  });

  test("SIGTERM leaves at a checkpoint: the grace period covers a step and a checkpoint", () => {
    const grace = deployment().spec.template.spec.terminationGracePeriodSeconds;
    assert.ok(grace >= 120, `terminationGracePeriodSeconds ${grace}: a leave needs a step and a checkpoint`);
  });

  test("the workers' HPA: the job's ETA as an External metric, min/max = --workers=MIN:MAX", () => {
    const h = hpa("ember-worker");
    assert.equal(h.apiVersion, "autoscaling/v2");
    assert.deepEqual(h.spec.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: "ember-worker" });
    assert.equal(h.spec.metrics.length, 1);
    const m = h.spec.metrics[0];
    assert.equal(m.type, "External");
    assert.equal(m.external.metric.name, "ember_job_eta_seconds");
    assert.deepEqual(m.external.metric.selector.matchLabels, { training_job: JOB_NAME });
    // Value (not AverageValue): desired = ceil(current x ETA / target), the proportional rule.
    assert.equal(m.external.target.type, "Value");
    assert.ok(Number(m.external.target.value) > 0, "the time budget in seconds");
    // The HPA's range is the run's: it never adds a worker the run has no place for,
    // nor removes one below MIN (whose leave would wait).
    const [min, max] = flags(worker(deployment())).workers.split(":").map(Number);
    assert.equal(h.spec.minReplicas, min, "minReplicas drifted from --workers MIN");
    assert.equal(h.spec.maxReplicas, max, "maxReplicas drifted from --workers MAX");
    assert.ok(min >= 1 && max > min, `--workers=${min}:${max}`);
  });

  test("MAX workers have a data file each (the model partitions its data by file)", () => {
    // A resize to more workers than files fails the run (INVALID_ARGUMENT at the new
    // attempt). The quickstart data comes from jobs/quickstart-data: its --train_files,
    // else ember-datagen's default.
    const model = fs.readFileSync(repoPath("deploy/k8s/base/model.pbtxt"), "utf8");
    if (!/partition_by:\s*"file"/.test(model)) return;
    const datagen = kustomize("deploy/k8s/jobs/quickstart-data").find((o) => o.kind === "Job");
    const given = flags(datagen.spec.template.spec.containers[0]).train_files;
    const fallback = /uint32_t train_files = ([0-9]+);/.exec(fs.readFileSync(repoPath("tools/datagen/generator.h"), "utf8"));
    const files = Number(given ?? fallback?.[1]);
    assert.ok(files > 0, "the quickstart data's file count");
    assert.ok(hpa("ember-worker").spec.maxReplicas <= files, `maxReplicas ${hpa("ember-worker").spec.maxReplicas} > ${files} training files`);
  });

  test("the workers' HPA does not flap: each resize costs a checkpoint and a restore", () => {
    const b = hpa("ember-worker").spec.behavior;
    assert.ok(b.scaleDown.stabilizationWindowSeconds >= 600, "scale-down stabilization");
    assert.ok(b.scaleDown.policies.length > 0 && b.scaleDown.policies.every((p) => p.periodSeconds >= 300));
    assert.ok(b.scaleUp.stabilizationWindowSeconds >= 60, "scale-up stabilization");
    assert.ok(b.scaleUp.policies.length > 0 && b.scaleUp.policies.every((p) => p.periodSeconds >= 60));
  });

  test("a PDB evicts one worker at a time", () => {
    const d = deployment();
    const pdbs = objs.filter((o) => o.kind === "PodDisruptionBudget" && selects(o.spec.selector.matchLabels, d.spec.template.metadata.labels));
    assert.equal(pdbs.length, 1);
    assert.equal(pdbs[0].spec.maxUnavailable, 1);
  });

  test("the shards' HPA: the StatefulSet on a per-pod pull rate, slowly; it owns the shard count", () => {
    const h = hpa("ember-ps");
    assert.equal(h.apiVersion, "autoscaling/v2");
    assert.deepEqual(h.spec.scaleTargetRef, { apiVersion: "apps/v1", kind: "StatefulSet", name: "ember-ps" });
    assert.equal(h.spec.metrics[0].type, "Pods");
    assert.equal(h.spec.metrics[0].pods.metric.name, "ember_ps_pulls_per_second");
    assert.ok(h.spec.minReplicas >= 1 && h.spec.maxReplicas > h.spec.minReplicas);
    assert.equal(find(objs, "StatefulSet", "ember-ps").spec.replicas, undefined, "the HPA owns the shard count");
    // Every shard added or removed moves slots (--auto_rebalance, --drain_on_sigterm).
    assert.ok(h.spec.behavior.scaleDown.stabilizationWindowSeconds >= 1200, "a long scale-down window");
    assert.ok(h.spec.behavior.scaleUp.policies.every((p) => p.type === "Pods" && p.value === 1));
  });

  test("every HPA's metric is served by a prometheus-adapter rule of its kind", () => {
    for (const h of objs.filter((o) => o.kind === "HorizontalPodAutoscaler")) {
      for (const m of h.spec.metrics) {
        const [section, name, resource] = m.type === "External"
          ? ["external", m.external.metric.name, undefined]
          : m.type === "Pods" ? ["custom", m.pods.metric.name, "pod"] : [undefined, undefined, undefined];
        assert.ok(section, `${h.metadata.name}: metric type ${m.type} has no adapter rule kind`);
        const rule = (ADAPTER[section] ?? []).find((r) => r.name.as === name);
        assert.ok(rule, `${h.metadata.name}: no rules.${section} entry serves ${name}`);
        assert.equal(rule.resources.overrides.namespace?.resource, "namespace", `${name}: namespaced`);
        if (resource) assert.equal(rule.resources.overrides.pod?.resource, "pod", `${name}: per pod`);
      }
    }
  });
});
}

test("the ETA adapter rule: one series per training_job from ember_job_eta_seconds", () => {
  const rule = (ADAPTER.external ?? []).find((r) => r.name.as === "ember_job_eta_seconds");
  assert.ok(rule, "rules.external serves ember_job_eta_seconds");
  assert.match(rule.seriesQuery, /^ember_job_eta_seconds\{/);
  assert.match(rule.seriesQuery, /training_job!=""/);
  // An HPA sums every series an External metric returns: aggregate to one per job.
  assert.match(rule.metricsQuery, /^(max|min|avg)\(<<\.Series>>\{<<\.LabelMatchers>>\}\) by \(training_job\)$/);
});
