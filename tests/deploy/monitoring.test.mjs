// deploy/prometheus and deploy/grafana: the scrape config and ServiceMonitor parse and
// validate, the alert rules pass promtool (check + unit tests, one per alert), and
// every PromQL expression names only metric families the C++ code exports (drift).

import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import YAML from "yaml";
import {
  HAVE_KUBECTL, NO_KUBECTL, find, have, kustomize, readYaml, repoPath, run, validateObject,
} from "./lib.mjs";

const HAVE_PROMTOOL = have("promtool", ["--version"]);
const NO_PROMTOOL = "promtool is not installed (Debian package prometheus; tools/install-deps.sh installs it)";

// ---- Metric families the C++ code exports --------------------------------------------

// Every "ember_..." string literal in common/, server/ and worker/, plus the families
// RpcMetrics composes from its prefix (StrCat(prefix, "_latency_seconds"), ...).
function exportedFamilies() {
  const names = new Set();
  const prefixes = new Set();
  const suffixes = new Set();
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(cc|h)$/.test(e.name)) {
        const src = fs.readFileSync(p, "utf8");
        for (const m of src.matchAll(/"(ember_[a-z0-9_]+)"/g)) names.add(m[1]);
        for (const m of src.matchAll(/prefix\s*=\s*"(ember_[a-z0-9_]+)"/g)) prefixes.add(m[1]);
        for (const m of src.matchAll(/StrCat\(\s*prefix\s*,\s*"(_[a-z0-9_]+)"\s*\)/g)) suffixes.add(m[1]);
      }
    }
  };
  for (const d of ["common", "server", "worker"]) walk(repoPath(d));
  for (const p of prefixes) for (const s of suffixes) names.add(p + s);
  return names;
}
const EXPORTED = exportedFamilies();
const PENDING = JSON.parse(fs.readFileSync(repoPath("tests/deploy/pending_metrics.json"), "utf8")).metrics;
const PENDING_NAMES = new Set(PENDING.map((m) => m.name));
// Series Prometheus makes itself for every target.
const PROMETHEUS_OWN = new Set(["up", "scrape_duration_seconds", "scrape_samples_scraped"]);

const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"]);

// The metric names a PromQL expression selects.
export function metricNames(expr) {
  let s = expr
    .replace(/\$__rate_interval|\$__interval|\$__range/g, "5m")
    .replace(/\$\{?[a-zA-Z_]+\}?/g, "x")
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/(?<![a-zA-Z0-9_:])[0-9][0-9.]*(?:e[+-]?[0-9]+)?[a-z]*/gi, " ");  // numbers
  const out = new Set();
  for (const m of s.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?/g)) {
    if (m[2] || KEYWORDS.has(m[1].toLowerCase())) continue;  // a function or keyword
    if (m[1] === "x") continue;  // a Grafana variable
    out.add(m[1]);
  }
  return [...out];
}

function checkNames(exprs, where) {
  const unknown = [];
  const pendingUsed = new Set();
  for (const e of exprs) {
    for (const n of metricNames(e)) {
      const base = n.replace(/_(bucket|sum|count)$/, "");
      if (EXPORTED.has(n) || EXPORTED.has(base) || PROMETHEUS_OWN.has(n)) continue;
      if (PENDING_NAMES.has(n)) { pendingUsed.add(n); continue; }
      unknown.push(`${n} (in ${where}: ${e.replace(/\s+/g, " ").slice(0, 120)})`);
    }
  }
  assert.deepEqual(unknown, [], "metric names the C++ code does not export (add them there, or to pending_metrics.json)");
  return pendingUsed;
}

// ---- Expressions of the alerts and the dashboard -------------------------------------

const ALERTS = readYaml("deploy/prometheus/alerts.yml")[0];
const alertRules = ALERTS.groups.flatMap((g) => g.rules);
const DASHBOARD_TEXT = fs.readFileSync(repoPath("deploy/grafana/ember-dashboard.json"), "utf8");
const DASHBOARD = JSON.parse(DASHBOARD_TEXT);
function dashboardExprs() {
  const out = [];
  const walk = (panels) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ panel: p.title, expr: t.expr });
      walk(p.panels);
    }
  };
  walk(DASHBOARD.panels);
  for (const v of DASHBOARD.templating.list) {
    if (v.type === "query") out.push({ panel: `variable ${v.name}`, expr: (v.definition ?? v.query.query).replace(/^label_values\((.*),\s*\w+\)$/, "$1") });
  }
  return out;
}

test("drift: the C++ sources export families (sanity of the scan)", () => {
  for (const n of ["ember_rpc_total", "ember_rpc_latency_seconds", "ember_memory_bytes", "ember_serving_lag_seconds", "ember_worker_steps_total"]) {
    assert.ok(EXPORTED.has(n), `the scan misses ${n}`);
  }
  assert.deepEqual(metricNames('sum by (pod) (rate(ember_rpc_total{method="Pull"}[5m])) / on(pod) up > 1e3'), ["ember_rpc_total", "up"]);
});

test("drift: alerts name only exported metric families", () => {
  checkNames(alertRules.map((r) => r.expr), "alerts.yml");
});

test("drift: the dashboard names only exported metric families", () => {
  const exprs = dashboardExprs();
  assert.ok(exprs.length >= 30, `only ${exprs.length} expressions`);
  checkNames(exprs.map((e) => e.expr), "ember-dashboard.json");
});

// The prometheus-adapter rules, custom (per pod) and external, each with its section.
const ADAPTER_RULES = Object.entries(readYaml("deploy/prometheus/adapter-rules.yaml")[0].rules)
  .flatMap(([section, rules]) => rules.map((r) => ({ section, ...r })));

test("drift: the prometheus-adapter rules name exported families", () => {
  assert.deepEqual([...new Set(ADAPTER_RULES.map((r) => r.section))].sort(), ["custom", "external"]);
  checkNames(ADAPTER_RULES.map((r) => r.seriesQuery), "adapter-rules.yaml");
  checkNames(ADAPTER_RULES.map(adapterQuery), "adapter-rules.yaml");
  for (const name of ["ember_serving_lookups_per_second", "ember_ps_pulls_per_second", "ember_job_eta_seconds"]) {
    assert.ok(ADAPTER_RULES.some((r) => r.name.as === name), `no rule serves ${name}`);
  }
  // The serving HPA scales on the metric a custom rule serves (the elastic overlay's
  // HPAs: elastic.test.mjs).
  const hpa = readYaml("deploy/k8s/base/serving.yaml").find((o) => o.kind === "HorizontalPodAutoscaler");
  assert.ok(ADAPTER_RULES.some((r) => r.section === "custom" && r.name.as === hpa.spec.metrics[0].pods.metric.name));
});

// A rule's metricsQuery as the adapter expands it for one namespace's pods.
function adapterQuery(rule) {
  return rule.metricsQuery
    .replace(/<<\.Series>>/g, rule.seriesQuery.replace(/\{.*$/s, ""))
    .replace(/<<\.LabelMatchers>>/g, 'namespace="ember"')
    .replace(/<<\.GroupBy>>/g, "pod");
}

test("the prometheus-adapter rules' queries parse (promtool)", { skip: HAVE_PROMTOOL ? false : NO_PROMTOOL }, () => {
  const rules = ADAPTER_RULES.flatMap((r, i) => [
    { record: `ember:adapter_series_${i}`, expr: r.seriesQuery },
    { record: `ember:adapter_query_${i}`, expr: adapterQuery(r) },
  ]);
  checkRecordingRules("adapter", rules);
});

test("docs/KUBERNETES.md: the deadline recording rule parses and names exported families", { skip: HAVE_PROMTOOL ? false : NO_PROMTOOL }, () => {
  const doc = fs.readFileSync(repoPath("docs/KUBERNETES.md"), "utf8");
  const block = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes("ember:job_eta_over_deadline"));
  assert.ok(block, "no yaml block with the rule ember:job_eta_over_deadline");
  const rules = YAML.parse(block);
  checkNames(rules.map((r) => r.expr), "docs/KUBERNETES.md");
  checkRecordingRules("deadline", rules);
});

test("pending metrics: each is used, none is exported yet", (t) => {
  const used = new Set([
    ...checkNames(alertRules.map((r) => r.expr), "alerts.yml"),
    ...checkNames(dashboardExprs().map((e) => e.expr), "ember-dashboard.json"),
  ]);
  for (const m of PENDING) {
    assert.ok(used.has(m.name), `${m.name} is in pending_metrics.json but nothing uses it`);
    assert.ok(!EXPORTED.has(m.name), `${m.name} is exported now: delete it from pending_metrics.json`);
    assert.ok(m.type && m.labels && m.meaning, `${m.name}: type, labels, meaning`);
    t.diagnostic(`not exported yet: ${m.name} (${m.type}, labels ${m.labels.join(",") || "none"})`);
  }
});

// ---- promtool ------------------------------------------------------------------------

// `promtool check rules` on recording rules made of expressions found elsewhere (the
// dashboard's, the adapter's): each parses as PromQL.
function checkRecordingRules(name, rules) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ember-${name}-`));
  const file = path.join(dir, `${name}_rules.yml`);
  fs.writeFileSync(file, YAML.stringify({ groups: [{ name, rules }] }));
  const r = run("promtool", ["check", "rules", file]);
  fs.rmSync(dir, { recursive: true });
  assert.equal(r.status, 0, r.stdout + r.stderr);
}

test("promtool check rules alerts.yml", { skip: HAVE_PROMTOOL ? false : NO_PROMTOOL }, () => {
  const r = run("promtool", ["check", "rules", repoPath("deploy/prometheus/alerts.yml")]);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, new RegExp(`SUCCESS: ${alertRules.length} rules found`));
});

test("promtool test rules alerts_test.yml", { skip: HAVE_PROMTOOL ? false : NO_PROMTOOL }, () => {
  const r = run("promtool", ["test", "rules", "alerts_test.yml"], { cwd: repoPath("deploy/prometheus") });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test("every alert has a unit test that fires and one that stays quiet", () => {
  const tests = readYaml("deploy/prometheus/alerts_test.yml")[0].tests;
  const cases = tests.flatMap((t) => t.alert_rule_test ?? []);
  const required = ["EmberPsShardDown", "EmberShardHeartbeatMissing", "EmberServingLagHigh", "EmberLoadSkewHigh", "EmberMemoryBudgetNearFull", "EmberRocksDbPendingCompactionHigh", "EmberJobStalled", "EmberShardPolicyFailing"];
  assert.deepEqual(alertRules.map((r) => r.alert).sort(), [...required].sort());
  for (const r of alertRules) {
    const mine = cases.filter((c) => c.alertname === r.alert);
    assert.ok(mine.some((c) => (c.exp_alerts ?? []).length > 0), `${r.alert}: no test where it fires`);
    assert.ok(mine.some((c) => (c.exp_alerts ?? []).length === 0), `${r.alert}: no test where it stays quiet`);
    assert.ok(r.labels?.severity && r.annotations?.summary, `${r.alert}: severity and summary`);
  }
});

test("the dashboard's PromQL parses (promtool)", { skip: HAVE_PROMTOOL ? false : NO_PROMTOOL }, () => {
  const rules = dashboardExprs().map((e, i) => ({
    record: `ember:dashboard_expr_${i}`,
    expr: e.expr.replace(/\$__rate_interval/g, "5m").replace(/\$namespace/g, ".*"),
  }));
  checkRecordingRules("dashboard", rules);
});

test("prometheus.yml: pod discovery keeps Ember's metrics ports; promtool check config", (t) => {
  const cfg = readYaml("deploy/prometheus/prometheus.yml")[0];
  assert.deepEqual(cfg.rule_files, ["alerts.yml"]);
  const job = cfg.scrape_configs.find((j) => j.job_name === "ember");
  assert.equal(job.kubernetes_sd_configs[0].role, "pod");
  const keep = (label, regex) => job.relabel_configs.some((r) => r.action === "keep" && r.source_labels.includes(label) && r.regex === regex);
  assert.ok(keep("__meta_kubernetes_pod_label_app_kubernetes_io_part_of", "ember"));
  assert.ok(keep("__meta_kubernetes_pod_container_port_name", "metrics"));
  for (const label of ["component", "namespace", "pod"]) {
    assert.ok(job.relabel_configs.some((r) => r.target_label === label), `no ${label} label`);
  }
  assert.ok(cfg.scrape_configs.some((j) => j.static_configs), "a static example");
  if (!HAVE_PROMTOOL) { t.diagnostic(NO_PROMTOOL); return; }
  let r = run("promtool", ["check", "config", repoPath("deploy/prometheus/prometheus.yml")]);
  if (r.status !== 0 && /kubernetes_sd_configs not found/.test(r.stdout + r.stderr)) {
    // Debian's Prometheus is built without Kubernetes discovery; check the rest.
    t.diagnostic("this promtool has no kubernetes_sd_configs (Debian build): checking the config without it");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ember-prom-"));
    const copy = { ...cfg, scrape_configs: cfg.scrape_configs.filter((j) => !j.kubernetes_sd_configs) };
    fs.writeFileSync(path.join(dir, "prometheus.yml"), YAML.stringify(copy));
    fs.copyFileSync(repoPath("deploy/prometheus/alerts.yml"), path.join(dir, "alerts.yml"));
    r = run("promtool", ["check", "config", path.join(dir, "prometheus.yml")]);
    fs.rmSync(dir, { recursive: true });
  }
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test("servicemonitor.yaml validates and selects the ember-metrics Service", { skip: HAVE_KUBECTL ? false : NO_KUBECTL }, async () => {
  const docs = readYaml("deploy/prometheus/servicemonitor.yaml");
  assert.ok(docs.length >= 1);
  for (const d of docs) await validateObject(d, "servicemonitor.yaml");
  const sm = docs.find((d) => d.kind === "ServiceMonitor");
  const svc = find(kustomize("deploy/k8s/overlays/small"), "Service", "ember-metrics");
  for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) assert.equal(svc.metadata.labels[k], v, k);
  for (const ep of sm.spec.endpoints) assert.ok(svc.spec.ports.some((p) => p.name === ep.port), ep.port);
  for (const label of ["component", "namespace", "pod"]) {
    assert.ok(sm.spec.endpoints[0].relabelings.some((r) => r.targetLabel === label), `no ${label} label`);
  }
});

test("grafana dashboard: JSON with a Prometheus datasource variable used by every panel", () => {
  const ds = DASHBOARD.templating.list.find((v) => v.type === "datasource");
  assert.equal(ds?.query, "prometheus");
  const panels = [];
  const walk = (ps) => { for (const p of ps ?? []) { if (p.type !== "row") panels.push(p); walk(p.panels); } };
  walk(DASHBOARD.panels);
  assert.ok(panels.length >= 30);
  for (const p of panels) {
    assert.equal(p.datasource?.uid, `\${${ds.name}}`, `${p.title}: datasource`);
    assert.ok(p.targets.length > 0, p.title);
  }
  const ids = panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, "panel ids are unique");
  // The sections the dashboard promises.
  const titles = DASHBOARD.panels.filter((p) => p.type === "row").map((p) => p.title);
  for (const s of ["Cluster", "PS data plane", "Memory tier", "RocksDB", "Hot keys and replicas", "Training", "Serving"]) {
    assert.ok(titles.includes(s), `no row ${s}`);
  }
});
