// Helpers shared by the tests of deploy/ (node --test). Offline: kubectl kustomize,
// promtool and the npm packages of package.json; no cluster, no network.

import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const repoPath = (...parts) => path.join(REPO, ...parts);

// True when `cmd` runs (`cmd ...args` exits 0).
export function have(cmd, args = ["--version"]) {
  const r = spawnSync(cmd, args, { stdio: "ignore" });
  return r.error === undefined && r.status === 0;
}

export const HAVE_KUBECTL = have("kubectl", ["version", "--client"]);
export const NO_KUBECTL =
  "kubectl is not installed: the Kubernetes manifests are not rendered or checked " +
  "(install kubectl >= 1.27 with its built-in kustomize to run these tests)";

// Every YAML document of `text` (empty documents dropped). Throws on a parse error.
export function parseYamlDocs(text, where) {
  const docs = YAML.parseAllDocuments(text, { prettyErrors: true });
  const out = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${where}: ${doc.errors.map(String).join("; ")}`);
    const value = doc.toJS();
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

export const readYaml = (rel) => parseYamlDocs(fs.readFileSync(repoPath(rel), "utf8"), rel);

// `kubectl kustomize DIR`: the rendered objects. Fails on any output to stderr
// (kustomize's deprecation warnings included).
export function kustomize(relDir) {
  const r = spawnSync("kubectl", ["kustomize", repoPath(relDir)], { encoding: "utf8" });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`kubectl kustomize ${relDir} failed:\n${r.stderr}`);
  if (r.stderr.trim() !== "") throw new Error(`kubectl kustomize ${relDir} warned:\n${r.stderr}`);
  return parseYamlDocs(r.stdout, relDir);
}

// The kubernetes-models class of an object's apiVersion and kind; throws for a kind
// there is no model for, so an unknown kind fails instead of passing unchecked.
const MODEL_PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};
export async function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const pkg = MODEL_PACKAGES[group] ?? "kubernetes-models";
  const spec = group === "" ? `${pkg}/${version}` : `${pkg}/${group}/${version}`;
  let mod;
  try {
    mod = await import(spec);
  } catch (e) {
    throw new Error(`no model package for apiVersion ${apiVersion} (${spec}): ${e.message}`);
  }
  const cls = mod[kind];
  if (typeof cls !== "function") throw new Error(`no model for ${apiVersion} ${kind}`);
  return cls;
}

// Validates `obj` against its model's JSON schema; throws with the errors.
export async function validateObject(obj, where) {
  if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
    throw new Error(`${where}: an object without apiVersion/kind`);
  }
  const Cls = await modelClass(obj.apiVersion, obj.kind);
  const name = `${where}: ${obj.kind}/${obj.metadata?.name}`;
  try {
    new Cls(obj).validate();
  } catch (e) {
    throw new Error(`${name} does not validate: ${e.message}`);
  }
}

export const find = (objs, kind, name) => {
  const o = objs.find((x) => x.kind === kind && x.metadata?.name === name);
  if (!o) throw new Error(`no ${kind}/${name} in the rendered objects`);
  return o;
};

// Every pod template of the rendered objects: [{owner, spec}] (workloads only).
export function podSpecs(objs) {
  const out = [];
  for (const o of objs) {
    const spec = o.spec?.template?.spec;
    if (spec) out.push({ owner: `${o.kind}/${o.metadata.name}`, obj: o, spec });
  }
  return out;
}

// The container's environment as a map of literal values ($(VAR) references in them
// expanded, as the kubelet does). Variables from valueFrom are left as "$(NAME)".
export function envMap(container) {
  const env = {};
  for (const e of container.env ?? []) {
    env[e.name] = e.value !== undefined ? expand(e.value, env) : `$(${e.name})`;
  }
  return env;
}

// Expands $(VAR) from `env` like the kubelet (unknown references stay as written).
export function expand(s, env) {
  return s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v) => (v in env ? env[v] : m));
}

// The --name=value flags of a container's args, $(VAR) expanded from its env.
export function flags(container) {
  const env = envMap(container);
  const out = {};
  for (const a of container.args ?? []) {
    const m = /^--([a-z_0-9]+)(?:=(.*))?$/.exec(a);
    if (m) out[m[1]] = m[2] === undefined ? "true" : expand(m[2], env);
  }
  return out;
}

// Kubernetes quantity to bytes (memory) or plain number.
export function quantityBytes(q) {
  const m = /^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q));
  if (!m) throw new Error(`not a quantity: ${q}`);
  const mult = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
}

export function run(cmd, args, opts = {}) {
  return spawnSync(cmd, args, { encoding: "utf8", ...opts });
}

export { execFileSync };
