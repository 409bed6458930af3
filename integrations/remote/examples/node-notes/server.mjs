// A notes Source speaking the mnemon remote plugin protocol v0, with Node's standard library only.
//
// The manifest is written in the JSON subset of YAML, so JSON.parse reads it. Notes live in
// this process's memory, one text per (tenant, user, agent); grants carry the snapshot a View
// pinned, so the server keeps no session between calls.
//
// What it trusts (docs/protocol.md, "What a plugin trusts"): only a caller that sends the secret
// its launcher gave it in MNEMON_PLUGIN_TOKEN, only loopback names in Host, only JSON bodies,
// only the configuration it was started with, and no input its manifest's schemas refuse.
import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

const manifestPath = process.env.MNEMON_PLUGIN_MANIFEST ?? "mnemon-source.yaml";
const manifestBytes = readFileSync(manifestPath);
const manifest = JSON.parse(manifestBytes.toString("utf8"));
const PLUGIN_API = "0.2.0";
const MAX_NOTES = 200000;
const MAX_BODY_BYTES = 16 * 1024 * 1024;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1"]);
const source = manifest.source;
const routes = new Map(source.routes.map((r) => [r.id, r]));
const actions = new Map(source.actions.map((a) => [a.id, a]));

const token = process.env.MNEMON_PLUGIN_TOKEN ?? "";
if (token.length < 16) {
  console.error("node-notes: MNEMON_PLUGIN_TOKEN holds no caller secret; refusing to serve");
  process.exit(2);
}
const sha256Bytes = (text) => createHash("sha256").update(text, "utf8").digest();
const expected = sha256Bytes(`Bearer ${token}`);

const notes = new Map(); // partition -> text
const receipts = new Map(); // idempotency key + partition -> receipt

const sha256 = (text) => "sha256:" + createHash("sha256").update(text, "utf8").digest("hex");
const partition = (scope) => JSON.stringify([scope.tenant_id ?? null, scope.user_id ?? null, scope.agent_id ?? null]);
const codePoints = (text) => Array.from(text);

class Refusal extends Error {
  constructor(status, code, message, retryable = false, errorClass = "source") {
    super(message);
    Object.assign(this, { status, code, retryable, errorClass });
  }
}

// The subset of JSON Schema this plugin's own schemas use: type, properties, required,
// additionalProperties: false, minLength and maxLength (in code points). It returns where the
// value breaks a rule, never the value.
function schemaProblem(schema, value, where = "(root)") {
  const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
  const types = { object: isObject, string: typeof value === "string", boolean: typeof value === "boolean" };
  if (schema.type && !types[schema.type]) return `${where} (type)`;
  if (typeof value === "string") {
    const length = codePoints(value).length;
    if (schema.minLength !== undefined && length < schema.minLength) return `${where} (minLength)`;
    if (schema.maxLength !== undefined && length > schema.maxLength) return `${where} (maxLength)`;
  }
  if (isObject) {
    const properties = schema.properties ?? {};
    for (const key of schema.required ?? []) if (!(key in value)) return `${where} (required)`;
    for (const [key, item] of Object.entries(value)) {
      if (key in properties) {
        const problem = schemaProblem(properties[key], item, key);
        if (problem) return problem;
      } else if (schema.additionalProperties === false) {
        return `${key} (additionalProperties)`;
      }
    }
  }
  return null;
}

let configuration;
try {
  configuration = JSON.parse(process.env.MNEMON_PLUGIN_CONFIGURATION || "{}");
} catch {
  configuration = undefined;
}
if (configuration === undefined || schemaProblem(manifest.configuration.schema, configuration)) {
  console.error("node-notes: MNEMON_PLUGIN_CONFIGURATION does not match the configuration schema");
  process.exit(2);
}

const REQUEST_KEYS = {
  facts: ["instance_key", "scope", "scenario"],
  project: ["instance_key", "scope", "scenario", "expected_revision", "mode", "max_characters"],
  query: ["view", "route", "grant", "input"],
  mutate: ["view", "offer", "grant", "input", "idempotency_key"],
};
const INVOCATION_KEYS = ["invocation_id", "instance_key", "provenance", "request"];

function checkKeys(value, allowed, required, where) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Refusal(400, "invalid_request", `${where} must be an object`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw new Refusal(400, "invalid_request", `${where}: unknown field ${key}`);
  }
  for (const key of required) {
    if (!(key in value)) throw new Refusal(400, "invalid_request", `${where}: missing field ${key}`);
  }
}

function checkInput(declared, input, kind) {
  // the manifest's schema, never the one the request carries
  const problem = schemaProblem(declared.input_schema, input);
  if (problem) throw new Refusal(400, "invalid_input", `the input breaks the ${kind}'s schema at ${problem}`);
}

function facts(request) {
  const base = { instance_key: request.instance_key, type_id: source.type_id, role: source.role };
  if (!request.scope.user_id) return { ...base, availability: "unavailable", reason: "missing-scope" };
  const text = notes.get(partition(request.scope)) ?? "";
  return {
    ...base,
    availability: "ready",
    revision: sha256(text),
    capabilities: source.capabilities,
    route_ids: [...routes.keys()],
    action_ids: [...actions.keys()],
  };
}

function project(request) {
  if (!request.scope.user_id) throw new Refusal(422, "invalid_payload", "the scope has no user");
  const text = notes.get(partition(request.scope)) ?? "";
  const revision = sha256(text);
  const shown = codePoints(text).slice(0, request.max_characters).join("");
  const fragments = shown ? [{ source_key: request.instance_key, mode: request.mode, text: shown }] : [];
  return { fragments, grant: { source_key: request.instance_key, value: { revision, text } }, revision };
}

function query(request) {
  const route = routes.get(request.route.route_id);
  if (!route) throw new Refusal(404, "unknown_route", "no such route");
  checkInput(route, request.input, "route");
  const { text, revision } = request.grant.value;
  const fits = codePoints(text).length <= request.route.max_characters;
  const items = text && fits ? [{ id: "notes", text, provenance: { revision } }] : [];
  return {
    view_id: request.view.id,
    route_id: request.route.id,
    source_key: request.route.source_key,
    items,
    truncated: Boolean(text) && !fits,
  };
}

function mutate(request) {
  const action = actions.get(request.offer.action_id);
  if (!action) throw new Refusal(404, "unknown_action", "no such action");
  checkInput(action, request.input, "action");
  const where = partition(request.view.scope);
  const replayKey = request.idempotency_key ? JSON.stringify([where, request.idempotency_key]) : null;
  if (replayKey && receipts.has(replayKey)) return receipts.get(replayKey);
  let text = notes.get(where) ?? "";
  if (text && !text.endsWith("\n")) text += "\n";
  text += `- ${request.input.text}\n`;
  if (codePoints(text).length > MAX_NOTES) throw new Refusal(422, "invalid_payload", "the notes are full");
  notes.set(where, text);
  const receipt = {
    view_id: request.view.id,
    offer_id: request.offer.id,
    source_key: request.offer.source_key,
    completion: "committed",
    status: "succeeded",
    committed_at: new Date().toISOString(),
    revision: sha256(text),
    idempotency_key: request.idempotency_key ?? null,
  };
  if (replayKey) receipts.set(replayKey, receipt);
  return receipt;
}

const CALLS = { facts, project, query, mutate };

function answer(response, status, value) {
  const body = JSON.stringify(value);
  const headers = { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
  if (status === 401) headers["www-authenticate"] = "Bearer";
  response.writeHead(status, headers);
  response.end(body);
}

function refuse(response, refusal) {
  answer(response, refusal.status, {
    code: refusal.code,
    message: refusal.message.slice(0, 1024) || refusal.code,
    retryable: refusal.retryable,
    error_class: refusal.errorClass,
  });
}

function hostName(header) {
  const text = (header ?? "").trim().toLowerCase();
  if (text.startsWith("[")) return text.slice(1, text.indexOf("]"));
  const colon = text.lastIndexOf(":");
  return colon > 0 && /^\d+$/.test(text.slice(colon + 1)) ? text.slice(0, colon) : text;
}

// Refused before any call runs: a foreign Host (a web page through DNS rebinding), a caller
// without the secret (compared in constant time), a body that is not JSON.
function guard(request) {
  if (!LOOPBACK.has(hostName(request.headers.host))) {
    throw new Refusal(403, "forbidden_host", "the Host header names no loopback address");
  }
  if (!timingSafeEqual(sha256Bytes(request.headers.authorization ?? ""), expected)) {
    throw new Refusal(401, "unauthorized", "the caller secret is missing or wrong", false, "access");
  }
  const media = (request.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  if (request.method === "POST" && media !== "application/json") {
    throw new Refusal(415, "unsupported_media_type", "the body must be application/json");
  }
}

function handle(request, response, body) {
  guard(request);
  if (request.method === "GET" && request.url === "/v0/health") return answer(response, 200, { status: "ok" });
  if (request.method === "GET" && request.url === "/v0/discovery") {
    return answer(response, 200, {
      plugin_api: PLUGIN_API,
      plugin: { id: manifest.id, version: manifest.version },
      manifest_digest: "sha256:" + createHash("sha256").update(manifestBytes).digest("hex"),
      contributions: ["source"],
    });
  }
  const match = /^\/v0\/contributions\/source\/([a-z]+)$/.exec(request.url ?? "");
  if (request.method !== "POST" || !match) throw new Refusal(404, "not_found", "no such route");
  const call = CALLS[match[1]];
  if (!call) throw new Refusal(404, "unsupported_call", "this Source does not implement that call");
  if (body === null) throw new Refusal(413, "request_too_large", "the body is too large");
  let invocation;
  try {
    invocation = JSON.parse(body);
  } catch {
    throw new Refusal(400, "invalid_request", "the body is not JSON");
  }
  checkKeys(invocation, INVOCATION_KEYS, INVOCATION_KEYS, "body");
  const keys = REQUEST_KEYS[match[1]];
  const required = keys.filter((k) => !["expected_revision", "idempotency_key", "grant"].includes(k));
  checkKeys(invocation.request, keys, required, "request");
  return answer(response, 200, call(invocation.request));
}

const server = createServer((request, response) => {
  const chunks = [];
  let size = 0;
  request.on("data", (chunk) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  });
  request.on("end", () => {
    try {
      handle(request, response, size <= MAX_BODY_BYTES ? Buffer.concat(chunks).toString("utf8") : null);
    } catch (error) {
      if (error instanceof Refusal) return refuse(response, error);
      // a request whose shape broke our handling: refused, never echoed
      return refuse(response, new Refusal(400, "invalid_request", "the request could not be read"));
    }
  });
});

server.listen(Number(process.env.MNEMON_PLUGIN_PORT ?? 8400), process.env.MNEMON_PLUGIN_HOST ?? "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
