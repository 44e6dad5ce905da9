// deploy/k8s: every overlay renders with kubectl kustomize, every object validates
// against its Kubernetes schema, and the invariants the binaries depend on hold.

import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import {
  HAVE_KUBECTL, NO_KUBECTL, envMap, find, flags, kustomize, podSpecs, quantityBytes, readYaml,
  repoPath, validateObject,
} from "./lib.mjs";

const OVERLAYS = {
  "deploy/k8s/overlays/small": { shards: 2, workers: 1, gpu: true },
  "deploy/k8s/overlays/large": { shards: 16, workers: 8, gpu: true },
  "deploy/k8s/overlays/cpu": { shards: 2, workers: 2, gpu: false },
  // Elastic: workers a Deployment, shards and workers sized by HPAs (their minimums
  // here); the rest of its checks are in elastic.test.mjs.
  "deploy/k8s/overlays/elastic-cpu": { shards: 2, workers: 2, gpu: false, elastic: true },
  "deploy/k8s/overlays/elastic-gpu": { shards: 2, workers: 2, gpu: true, elastic: true },
};
const ONE_OFF = ["deploy/k8s/jobs/quickstart-data"];

// The flags each binary accepts: the flags its main.cc declares (common/flags.h:
// flags.Number("name", ...), flags.String(...), ...), plus the ones every server or
// binary declares through a shared function (security, TLS, RunMain's own).
const MAINS = {
  "ember-coordinator": "server/coordinator/coordinator_main.cc",
  "ember-ps": "server/ps/ps_main.cc",
  "ember-serving": "server/serving/serving_main.cc",
  "ember-worker": "worker/worker_main.cc",
  "ember-datagen": "tools/datagen/datagen_main.cc",
};
const EVERY_BINARY = ["help", "version", "log_format"];
const TLS = ["tls_ca", "tls_cert", "tls_key"];
// server/shared/serve.h: DeclareListenFlags, DeclareMetricsAndShutdownFlags.
const SERVE = ["host", "port", "max_connections", "max_connections_per_peer", "shutdown_grace_ms",
  "metrics_port", "metrics_host"];
const SERVER = [...TLS, ...SERVE, "health_port", "admin_token", "admin_token_file", "admin_identities"];
// server/ps/shard_drain.h: DeclareDrainFlags.
const DRAIN = ["drain_on_sigterm", "drain_timeout_ms"];
const SHARED_FLAGS = {
  "ember-coordinator": SERVER,
  "ember-ps": [...SERVER, ...DRAIN],
  "ember-serving": SERVER,
  "ember-worker": TLS,
  "ember-datagen": [],
};
// Flags deploy/ passes that a binary's main.cc does not declare yet, because the change
// that adds them lands separately (none now). Accepted until declared; a test fails
// once one is, so that its entry is deleted here.
const PENDING_FLAGS = {};
function declaredFlags(binary) {
  const file = repoPath(MAINS[binary]);
  const src = fs.readFileSync(file, "utf8");
  const declared = /\.(?:Number|String|Bool|Choice(?:<[^>]*>)?|Custom|Millis|Seconds)\(\s*"([a-z_0-9]+)"/g;
  const names = new Set([...src.matchAll(declared)].map((m) => m[1]));
  assert.ok(names.size > 0, `no flag declarations in ${file}`);
  return names;
}
function knownFlags(binary) {
  const names = declaredFlags(binary);
  for (const f of [...SHARED_FLAGS[binary], ...EVERY_BINARY, ...(PENDING_FLAGS[binary] ?? [])]) names.add(f);
  return names;
}

test("pending flags: none is declared yet", (t) => {
  for (const [binary, pending] of Object.entries(PENDING_FLAGS)) {
    const declared = declaredFlags(binary);
    for (const f of pending) {
      assert.ok(!declared.has(f), `${binary} declares --${f} now: delete it from PENDING_FLAGS (manifests.test.mjs)`);
      t.diagnostic(`not declared yet: ${binary} --${f}`);
    }
  }
});

// Readiness service per component (grpc.health.v1 service names).
const READINESS = {
  coordinator: "ember.v1.CoordinatorService",
  ps: "ember.v1.PsService",
  serving: "ember.v1.ServingService",
};
const component = (o) => o.metadata.labels?.["app.kubernetes.io/component"];
const containerOf = (o, name) => {
  const c = o.spec.template.spec.containers.find((x) => x.name === name);
  assert.ok(c, `${o.kind}/${o.metadata.name} has no container ${name}`);
  return c;
};

// Secrets: what each holds (deploy/k8s/base/secrets.example.yaml).
const SECRETS = Object.fromEntries(
  readYaml("deploy/k8s/base/secrets.example.yaml").map((s) => [s.metadata.name, Object.keys(s.stringData ?? s.data ?? {})]),
);

// The volume mounted at the directory holding `file` in container `c` of pod `spec`.
function volumeFor(spec, c, file) {
  const mount = (c.volumeMounts ?? [])
    .filter((m) => file === m.mountPath || file.startsWith(m.mountPath.replace(/\/?$/, "/")))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (!mount) return undefined;
  const vol = (spec.volumes ?? []).find((v) => v.name === mount.name);
  return { mount, vol, rel: file.slice(mount.mountPath.replace(/\/?$/, "/").length) };
}

describe("kustomize", { skip: HAVE_KUBECTL ? false : NO_KUBECTL }, () => {
  for (const dir of [...Object.keys(OVERLAYS), ...ONE_OFF]) {
    test(`${dir} renders without warnings and validates`, async () => {
      const objs = kustomize(dir);
      assert.ok(objs.length > 0, "renders nothing");
      for (const o of objs) await validateObject(o, dir);
    });
  }
});

test("secrets.example.yaml validates and holds no key material", async () => {
  const secrets = readYaml("deploy/k8s/base/secrets.example.yaml");
  assert.deepEqual(Object.keys(SECRETS).sort(), ["ember-admin-token", "ember-tls-client", "ember-tls-server"]);
  for (const s of secrets) {
    await validateObject(s, "secrets.example.yaml");
    for (const [k, v] of Object.entries(s.stringData ?? {})) assert.equal(v, "", `${s.metadata.name}.${k} is not empty`);
    assert.equal(s.data, undefined);
  }
  const base = readYaml("deploy/k8s/base/kustomization.yaml")[0];
  assert.ok(!base.resources.includes("secrets.example.yaml"), "apply -k must not own the Secrets");
});

test("the ConfigMap's model.pbtxt is configs/quickstart.pbtxt", () => {
  assert.equal(
    fs.readFileSync(repoPath("deploy/k8s/base/model.pbtxt"), "utf8"),
    fs.readFileSync(repoPath("configs/quickstart.pbtxt"), "utf8"),
    "deploy/k8s/base/model.pbtxt drifted from configs/quickstart.pbtxt: copy it again",
  );
});

for (const [dir, size] of Object.entries(OVERLAYS)) {
  describe(`invariants of ${dir}`, { skip: HAVE_KUBECTL ? false : NO_KUBECTL }, () => {
    const objs = HAVE_KUBECTL ? kustomize(dir) : [];
    const coord = () => find(objs, "StatefulSet", "ember-coordinator");
    const ps = () => find(objs, "StatefulSet", "ember-ps");
    const job = () => find(objs, "Job", "ember-worker");
    const hpa = (name) => find(objs, "HorizontalPodAutoscaler", name);
    // The shards the first slot assignment waits for: the replicas, or (elastic) the
    // PS HPA's minimum.
    const firstShards = () => (size.elastic ? hpa("ember-ps").spec.minReplicas : ps().spec.replicas);

    test("sizes: PS replicas and workers", () => {
      assert.equal(firstShards(), size.shards);
      if (size.elastic) {
        assert.equal(hpa("ember-worker").spec.minReplicas, size.workers);
      } else {
        assert.equal(ps().spec.replicas, size.shards);
        assert.equal(job().spec.parallelism, size.workers);
      }
      assert.equal(coord().spec.replicas, 1);
    });

    test("coordinator --expected_shards equals the PS replicas (elastic: the PS HPA's minimum)", () => {
      const f = flags(containerOf(coord(), "coordinator"));
      assert.equal(Number(f.expected_shards), firstShards());
    });

    test(`workers: Indexed Job, parallelism == completions == EMBER_WORLD_SIZE, ${size.gpu ? "GPUs" : "CPU only"}`, { skip: size.elastic ? "elastic workers: elastic.test.mjs" : false }, () => {
      const j = job();
      assert.equal(j.spec.completionMode, "Indexed");
      assert.equal(j.spec.completions, j.spec.parallelism);
      const c = containerOf(j, "worker");
      const env = envMap(c);
      assert.equal(Number(env.EMBER_WORLD_SIZE), j.spec.parallelism);
      assert.equal(flags(c).world_size, undefined, "--world_size would override EMBER_WORLD_SIZE");
      assert.equal(flags(c).rank, undefined, "the rank comes from JOB_COMPLETION_INDEX");
      // The Job's UID names the run: a restarted pod rejoins it, a new Job starts a new one.
      assert.equal(flags(c).run_id, "$(EMBER_RUN_ID)");
      assert.equal(flags(c).generation, undefined, "--generation and --run_id exclude each other");
      const runId = c.env.find((e) => e.name === "EMBER_RUN_ID");
      assert.equal(runId?.valueFrom?.fieldRef?.fieldPath, "metadata.labels['batch.kubernetes.io/controller-uid']");
      assert.match(env.EMBER_COORDINATOR, /^ember-coordinator\.\$\(POD_NAMESPACE\)\.svc:7000$/);
      if (size.gpu) {
        assert.ok(Number(c.resources.requests["nvidia.com/gpu"]) >= 1, "workers request a GPU");
        assert.equal(c.resources.limits["nvidia.com/gpu"], c.resources.requests["nvidia.com/gpu"]);
        assert.match(c.image, /ember-worker-cuda/);
        assert.equal(flags(c).device, "cuda");
      } else {
        // No GPU anywhere in the worker's pod: no request, no toleration, the CPU image.
        assert.equal(c.resources.requests["nvidia.com/gpu"], undefined, "a CPU worker requests no GPU");
        assert.equal(c.resources.limits?.["nvidia.com/gpu"], undefined);
        assert.ok(!(j.spec.template.spec.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu"));
        assert.doesNotMatch(c.image, /cuda/);
        assert.equal(flags(c).device, "cpu");
        assert.ok(Number(c.resources.requests.cpu) >= 1);
      }
    });

    test("PS identity: shard id from the pod index, advertised through the headless Service", () => {
      const s = ps();
      const c = containerOf(s, "ps");
      const f = flags(c);
      assert.equal(f.shard_id, "$(POD_INDEX)");
      const podIndex = c.env.find((e) => e.name === "POD_INDEX");
      assert.equal(podIndex?.valueFrom?.fieldRef?.fieldPath, "metadata.labels['apps.kubernetes.io/pod-index']");
      for (const v of ["POD_NAME", "POD_NAMESPACE"]) assert.ok(c.env.find((e) => e.name === v)?.valueFrom?.fieldRef, v);
      const svc = find(objs, "Service", s.spec.serviceName);
      assert.equal(svc.spec.clusterIP, "None", "the PS governing Service is headless");
      assert.equal(svc.spec.publishNotReadyAddresses, true);
      for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(s.spec.template.metadata.labels[k], v);
      const grpcPort = c.ports.find((p) => p.name === "grpc").containerPort;
      assert.equal(Number(f.port), grpcPort);
      assert.equal(f.advertise_address, `$(POD_NAME).${s.spec.serviceName}.$(POD_NAMESPACE).svc:${grpcPort}`);
      assert.equal(f.coordinator, "ember-coordinator.$(POD_NAMESPACE).svc:7000");
      assert.equal(s.spec.podManagementPolicy, "Parallel", "OrderedReady deadlocks slot assignment");
    });

    test("scaling: a PS pod drains at SIGTERM within its grace period; joins get slots", () => {
      const s = ps();
      const f = flags(containerOf(s, "ps"));
      assert.equal(f.drain_on_sigterm, "true");
      // The drain, then the shutdown grace and the flush (a minute at least).
      const drainS = Number(f.drain_timeout_ms) / 1000;
      const graceS = s.spec.template.spec.terminationGracePeriodSeconds;
      assert.ok(graceS >= drainS + 60, `terminationGracePeriodSeconds ${graceS} < drain ${drainS} s + 60`);
      assert.equal(flags(containerOf(coord(), "coordinator")).auto_rebalance, "true");
    });

    test("PS data on a volumeClaimTemplate; a PDB for the shards", () => {
      const s = ps();
      const c = containerOf(s, "ps");
      const v = volumeFor(s.spec.template.spec, c, flags(c).data_dir);
      assert.ok(v, "--data_dir is not on a volume");
      assert.ok(s.spec.volumeClaimTemplates.some((t) => t.metadata.name === v.mount.name), "--data_dir is not on the PVC template");
      const pdbs = objs.filter((o) => o.kind === "PodDisruptionBudget" &&
        Object.entries(o.spec.selector.matchLabels).every(([k, val]) => s.spec.template.metadata.labels[k] === val));
      assert.equal(pdbs.length, 1);
      assert.ok([0, 1].includes(pdbs[0].spec.maxUnavailable));
    });

    test("coordinator: data dir and audit log on its PVC, checkpoints on the shared RWX volume everywhere", () => {
      const co = coord();
      const c = containerOf(co, "coordinator");
      const f = flags(c);
      for (const flag of ["data_dir", "audit_log"]) {
        const v = volumeFor(co.spec.template.spec, c, f[flag]);
        assert.ok(v && co.spec.volumeClaimTemplates.some((t) => t.metadata.name === v.mount.name), `--${flag} not on the coordinator's PVC`);
      }
      assert.ok(f.admin_token_file);
      const ckpt = f.checkpoint_dir;
      const shared = volumeFor(co.spec.template.spec, c, ckpt);
      const claim = shared?.vol?.persistentVolumeClaim?.claimName;
      assert.ok(claim, "--checkpoint_dir is not on a PVC");
      const pvc = find(objs, "PersistentVolumeClaim", claim);
      assert.deepEqual(pvc.spec.accessModes, ["ReadWriteMany"]);
      // Every PS shard and follower sees the same files at the same path.
      for (const [o, name] of [[ps(), "ps"], [find(objs, "Deployment", "ember-serving"), "serving"]]) {
        const oc = containerOf(o, name);
        const v = volumeFor(o.spec.template.spec, oc, ckpt);
        assert.equal(v?.vol?.persistentVolumeClaim?.claimName, claim, `${name} does not mount ${claim} at ${ckpt}`);
        assert.equal(v.mount.mountPath, shared.mount.mountPath);
        assert.equal(v.mount.subPath, shared.mount.subPath);
      }
      assert.equal(flags(containerOf(find(objs, "Deployment", "ember-serving"), "serving")).checkpoint_dir, ckpt);
    });

    test("probes use the plaintext --health_port: liveness '', readiness the service", () => {
      let servers = 0;
      for (const { owner, obj, spec } of podSpecs(objs)) {
        for (const c of spec.containers) {
          const f = flags(c);
          const comp = component(obj);
          if (!(comp in READINESS)) {
            assert.equal(c.readinessProbe, undefined, `${owner}: a probe without --health_port`);
            continue;
          }
          servers++;
          const port = Number(f.health_port);
          assert.ok(port > 0, `${owner}: no --health_port`);
          assert.equal(c.ports.find((p) => p.name === "health")?.containerPort, port);
          for (const p of ["startupProbe", "livenessProbe", "readinessProbe"]) {
            assert.ok(c[p]?.grpc, `${owner}: ${p} is not a grpc probe`);
            assert.equal(c[p].grpc.port, port, `${owner}: ${p} is not on --health_port`);
          }
          assert.equal(c.livenessProbe.grpc.service ?? "", "");
          assert.equal(c.startupProbe.grpc.service ?? "", "");
          assert.equal(c.readinessProbe.grpc.service, READINESS[comp], `${owner}: readiness service`);
          for (const other of ["port", "metrics_port"]) assert.notEqual(Number(f[other]), port);
        }
      }
      assert.equal(servers, 3);
    });

    test("PS memory limit covers 1.1 x --memory_budget_mb + the stated headroom", () => {
      const s = ps();
      const c = containerOf(s, "ps");
      const budget = Number(flags(c).memory_budget_mb);
      assert.ok(budget > 0, "--memory_budget_mb must be set (0 = unlimited cannot be sized)");
      const headroom = Number(s.metadata.annotations["ember.io/memory-headroom-mb"]);
      assert.ok(headroom > 0, "annotation ember.io/memory-headroom-mb");
      const limitMb = quantityBytes(c.resources.limits.memory) / 2 ** 20;
      const need = Math.ceil(1.1 * budget) + headroom;
      assert.ok(limitMb >= need, `limit ${limitMb} MiB < 1.1 x ${budget} + ${headroom} = ${need} MiB`);
      assert.equal(c.resources.requests.memory, c.resources.limits.memory, "memory request = limit (no eviction under pressure)");
    });

    test("every pod runs as non-root with a read-only root and no capabilities", () => {
      for (const { owner, spec } of podSpecs(objs)) {
        assert.equal(spec.automountServiceAccountToken, false, owner);
        for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
          const nonRoot = c.securityContext?.runAsNonRoot ?? spec.securityContext?.runAsNonRoot;
          const uid = c.securityContext?.runAsUser ?? spec.securityContext?.runAsUser;
          assert.equal(nonRoot, true, `${owner}/${c.name}: runAsNonRoot`);
          assert.ok(uid > 0, `${owner}/${c.name}: runAsUser`);
          assert.equal(c.securityContext?.readOnlyRootFilesystem, true, `${owner}/${c.name}: readOnlyRootFilesystem`);
          assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${owner}/${c.name}`);
          assert.deepEqual(c.securityContext?.capabilities?.drop, ["ALL"], `${owner}/${c.name}: drop ALL`);
        }
      }
    });

    test("every Ember container gets --tls_* flags whose files come from a TLS Secret", () => {
      let n = 0;
      for (const { owner, spec } of podSpecs(objs)) {
        for (const c of spec.containers) {
          n++;
          const f = flags(c);
          for (const flag of ["tls_ca", "tls_cert", "tls_key"]) {
            assert.ok(f[flag], `${owner}/${c.name}: no --${flag}`);
            const v = volumeFor(spec, c, f[flag]);
            const secret = v?.vol?.secret?.secretName;
            assert.ok(secret, `${owner}/${c.name}: --${flag}=${f[flag]} is not on a Secret volume`);
            assert.ok(SECRETS[secret]?.includes(v.rel), `${owner}/${c.name}: Secret ${secret} has no key ${v.rel}`);
            assert.equal(v.mount.readOnly, true);
          }
          if (f.admin_token_file) {
            const v = volumeFor(spec, c, f.admin_token_file);
            assert.ok(SECRETS[v?.vol?.secret?.secretName]?.includes(v.rel), `${owner}: admin token`);
          }
        }
      }
      assert.equal(n, 4, "coordinator, ps, serving, worker");
    });

    test("every flag given is one the binary takes; metrics are scrapeable", () => {
      for (const { owner, spec } of podSpecs(objs)) {
        for (const c of spec.containers) {
          const binary = c.command?.[0];
          assert.ok(binary in MAINS, `${owner}: unknown command ${binary}`);
          const known = knownFlags(binary);
          for (const a of c.args) {
            const m = /^--([a-z_0-9]+)/.exec(a);
            assert.ok(m, `${owner}: argument ${a} is not a --flag`);
            assert.ok(known.has(m[1]), `${owner}: ${binary} takes no --${m[1]}`);
          }
          const f = flags(c);
          assert.equal(f.metrics_host, "0.0.0.0", `${owner}: --metrics_host`);
          assert.equal(c.ports.find((p) => p.name === "metrics")?.containerPort, Number(f.metrics_port), `${owner}: metrics port`);
          if ("host" in f) assert.equal(f.host, "0.0.0.0", owner);
          // Every $(VAR) in args is defined in the container's env.
          const names = new Set((c.env ?? []).map((e) => e.name));
          for (const a of c.args) {
            for (const m of a.matchAll(/\$\(([A-Za-z_0-9]+)\)/g)) assert.ok(names.has(m[1]), `${owner}: $(${m[1]}) undefined`);
          }
        }
      }
    });

    test("serving: Deployment scaled by an autoscaling/v2 HPA on an Ember Pods metric; nothing scales a Job", () => {
      const hpas = objs.filter((o) => o.kind === "HorizontalPodAutoscaler");
      assert.equal(hpas.length, size.elastic ? 3 : 1, "serving's HPA (elastic: and the workers' and the shards')");
      for (const o of hpas) assert.notEqual(o.spec.scaleTargetRef.kind, "Job", `${o.metadata.name} scales a Job`);
      const h = hpa("ember-serving");
      assert.equal(h.apiVersion, "autoscaling/v2");
      assert.deepEqual(h.spec.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: "ember-serving" });
      const d = find(objs, "Deployment", "ember-serving");
      assert.equal(d.spec.replicas, undefined, "the HPA owns the replica count");
      assert.ok(h.spec.minReplicas >= 1 && h.spec.maxReplicas > h.spec.minReplicas);
      assert.equal(h.spec.metrics[0].type, "Pods");
      assert.match(h.spec.metrics[0].pods.metric.name, /^ember_/);
      const svc = find(objs, "Service", "ember-serving");
      for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(d.spec.template.metadata.labels[k], v);
    });

    test("the Services select pods that exist and name ports those pods have", () => {
      for (const svc of objs.filter((o) => o.kind === "Service")) {
        const pods = podSpecs(objs).filter(({ obj }) =>
          Object.entries(svc.spec.selector).every(([k, v]) => obj.spec.template.metadata.labels?.[k] === v));
        assert.ok(pods.length > 0, `Service ${svc.metadata.name} selects no pod`);
        for (const p of svc.spec.ports) {
          for (const { owner, spec } of pods) {
            assert.ok(spec.containers.some((c) => c.ports?.some((cp) => cp.name === p.targetPort)), `${svc.metadata.name}: ${owner} has no port ${p.targetPort}`);
          }
        }
      }
    });
  });
}
