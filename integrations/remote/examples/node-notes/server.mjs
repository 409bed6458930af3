// A notes Source speaking the mnemon remote plugin protocol v0, with Node's standard library only.
//
// The manifest is written in the JSON subset of YAML, so JSON.parse reads it. Notes live in
// this process's memory, one text per (tenant, user, agent); grants carry the snapshot a View
// pinned, so the server keeps no session between calls.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

const manifestPath = process.env.MNEMON_PLUGIN_MANIFEST ?? "mnemon-source.yaml";
const manifestBytes = readFileSync(manifestPath);
const manifest = JSON.parse(manifestBytes.toString("utf8"));
const PLUGIN_API = "0.1.0";
const MAX_NOTES = 200000;
const source = manifest.source;
const routes = new Set(source.routes.map((r) => r.id));
const actions = new Set(source.actions.map((a) => a.id));

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

const REQUEST_KEYS = {
  facts: ["instance_key", "scope", "scenario"],
  project: ["instance_key", "scope", "scenario", "expected_revision", "mode", "max_characters"],
  query: ["view", "route", "grant", "input"],
  mutate: ["view", "offer", "grant", "input", "idempotency_key"],
};
const INVOCATION_KEYS = ["invocation_id", "instance_key", "provenance", "configuration", "request"];

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

function facts(request) {
  const base = { instance_key: request.instance_key, type_id: source.type_id, role: source.role };
  if (!request.scope.user_id) return { ...base, availability: "unavailable", reason: "missing-scope" };
  const text = notes.get(partition(request.scope)) ?? "";
  return {
    ...base,
    availability: "ready",
    revision: sha256(text),
    capabilities: source.capabilities,
    route_ids: [...routes],
    action_ids: [...actions],
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
  if (!routes.has(request.route.route_id)) throw new Refusal(404, "unknown_route", "no such route");
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
  if (!actions.has(request.offer.action_id)) throw new Refusal(404, "unknown_action", "no such action");
  const where = partition(request.view.scope);
  const replayKey = request.idempotency_key ? JSON.stringify([where, request.idempotency_key]) : null;
  if (replayKey && receipts.has(replayKey)) return receipts.get(replayKey);
  const line = request.input.text;
  if (typeof line !== "string" || line.length === 0) throw new Refusal(422, "invalid_payload", "text is required");
  let text = notes.get(where) ?? "";
  if (text && !text.endsWith("\n")) text += "\n";
  text += `- ${line}\n`;
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
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
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

function handle(request, response, body) {
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
  if (Object.keys(invocation.configuration).length) {
    throw new Refusal(400, "invalid_configuration", "this plugin takes no configuration");
  }
  return answer(response, 200, call(invocation.request));
}

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    try {
      handle(request, response, Buffer.concat(chunks).toString("utf8"));
    } catch (error) {
      if (error instanceof Refusal) return refuse(response, error);
      // a request whose shape broke our handling: refused, never echoed
      return refuse(response, new Refusal(400, "invalid_request", "the request could not be read"));
    }
  });
});

server.listen(Number(process.env.MNEMON_PLUGIN_PORT ?? 8400), process.env.MNEMON_PLUGIN_HOST ?? "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
