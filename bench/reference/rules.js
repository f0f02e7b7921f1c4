'use strict';
// Rules of semantics.md#keys–semantics.md#cursors that need no database: keys, record input normalisation, notice text,
// context keys, and row <-> StateEvent mapping. Used by session-state.js.

const Database = require('better-sqlite3');

const DAY_MS = 24 * 60 * 60 * 1000;
const SUMMARY_MAX_SCALARS = 240;
const PAYLOAD_MAX_BYTES = 4096;
const CONTEXT_KEY_PREFIX = 'session-state:';

const NOTIFY_KINDS = new Set(['human_direct_message', 'goal_changed', 'upstream_missing']);
const SPAWN_KIND = 'child_spawned';
const LOG_ONLY_KINDS = new Set(['run_completed', 'run_failed', 'compacted', 'adopted', 'created']);
const ACTOR_TYPES = new Set(['human', 'agent', 'system']);
const PROVENANCES = new Set(['explicit', 'ambient-group']);
const AGENT_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const LINE_BREAK_RE = /\r\n|[\r\n\u2028\u2029]/g;
const LOWER_HEX_RE = /^[0-9a-f]+$/;

/** Error with a stable machine `code` (ERR_INVALID_ARG, ERR_CLOSED, ERR_DB, ERR_WAKE_CALLBACK). */
class SessionStateError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'SessionStateError';
    this.code = code;
  }
}

const invalidArg = (message) => new SessionStateError('ERR_INVALID_ARG', message);

function toSessionError(err, fallbackCode) {
  if (err instanceof SessionStateError) return err;
  if (err instanceof Database.SqliteError) {
    return new SessionStateError('ERR_DB', `${err.code}: ${err.message}`, { cause: err });
  }
  if (fallbackCode) {
    return new SessionStateError(fallbackCode, String(err && err.message ? err.message : err), {
      cause: err,
    });
  }
  return err;
}

// ---------------------------------------------------------------------------------------------
// Keys (semantics.md#keys)

/** `agent:<agentId>:<rest>` → `{ agentId, rest }`; anything else (a bare key) → null. */
function parseKey(key) {
  if (!key.startsWith('agent:')) return null;
  const colon = key.indexOf(':', 6);
  if (colon < 0 || colon === key.length - 1) return null;
  const agentId = key.slice(6, colon);
  if (!AGENT_ID_RE.test(agentId)) return null;
  return { agentId, rest: key.slice(colon + 1) };
}

const isNested = (parsed) => parsed.rest.startsWith('subagent:');

function requireKey(key, name) {
  if (typeof key !== 'string' || key === '') throw invalidArg(`${name} must be a non-empty string`);
  return key;
}

function requireString(value, name) {
  if (typeof value !== 'string') throw invalidArg(`${name} must be a string`);
  return value;
}

/** The agent an event or head belongs to: explicit (validated) or the key's own, else `main`. */
function resolveAgent(sessionKey, agentId, parsed = parseKey(sessionKey)) {
  if (agentId === undefined || agentId === null) return parsed ? parsed.agentId : 'main';
  if (typeof agentId !== 'string' || !AGENT_ID_RE.test(agentId)) {
    throw invalidArg(`agentId ${JSON.stringify(String(agentId))} is not a valid agent id`);
  }
  if (parsed && parsed.agentId !== agentId) {
    throw invalidArg(`agentId "${agentId}" does not match the agent of "${sessionKey}"`);
  }
  return agentId;
}

// ---------------------------------------------------------------------------------------------
// Notices (semantics.md#cursors)

function encodeNoticeContextKey(target) {
  requireString(target, 'target');
  return CONTEXT_KEY_PREFIX + Buffer.from(target, 'utf8').toString('hex');
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decodeNoticeContextKey(contextKey) {
  if (typeof contextKey !== 'string' || !contextKey.startsWith(CONTEXT_KEY_PREFIX)) return null;
  const hex = contextKey.slice(CONTEXT_KEY_PREFIX.length);
  if (hex.length === 0 || hex.length % 2 !== 0 || !LOWER_HEX_RE.test(hex)) return null;
  try {
    return strictUtf8.decode(Buffer.from(hex, 'hex'));
  } catch {
    return null;
  }
}

function noticeText(target, since) {
  const literal = JSON.stringify(target);
  return (
    `Session ${literal} changed (other actor). ` +
    `Reconcile before acting: session_status sessionKey ${literal} changesSince ${since}.`
  );
}

function makeNotice(watcherKey, targetKey, since) {
  return {
    watcherKey,
    targetKey,
    changesSince: since,
    text: noticeText(targetKey, since),
    contextKey: encodeNoticeContextKey(targetKey),
  };
}

// ---------------------------------------------------------------------------------------------
// Record input (semantics.md#api, semantics.md#recording-validation)

function optionalString(value, name) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalidArg(`${name} must be a string`);
  return value;
}

function normaliseSummary(summary) {
  if (typeof summary !== 'string') throw invalidArg('summary must be a string');
  // Lone surrogates are not scalar values; store what UTF-8 can carry (U+FFFD), as SQLite would.
  const line = summary.toWellFormed().replace(LINE_BREAK_RE, ' ');
  if (line.length <= SUMMARY_MAX_SCALARS) return line;
  let end = 0;
  for (let count = 0; count < SUMMARY_MAX_SCALARS && end < line.length; count++) {
    end += line.codePointAt(end) > 0xffff ? 2 : 1;
  }
  return line.slice(0, end);
}

function normalisePayload(payload) {
  if (payload === undefined || payload === null) return null;
  if (typeof payload !== 'object' || Array.isArray(payload)) {
    throw invalidArg('payload must be a JSON object');
  }
  let json;
  try {
    json = JSON.stringify(payload);
  } catch (err) {
    throw invalidArg(`payload is not serialisable as JSON: ${err.message}`);
  }
  if (typeof json !== 'string' || json[0] !== '{') throw invalidArg('payload must be a JSON object');
  if (Buffer.byteLength(json, 'utf8') > PAYLOAD_MAX_BYTES) {
    throw invalidArg(`payload exceeds ${PAYLOAD_MAX_BYTES} bytes of compact JSON`);
  }
  return json;
}

function clampOccurredAt(value, now) {
  if (value === undefined || value === null) return now;
  if (typeof value !== 'number') throw invalidArg('occurredAt must be a number');
  if (!Number.isFinite(value)) return now;
  return Math.min(now, Math.max(now - DAY_MS, Math.floor(value)));
}

function normaliseRecordInput(input, now) {
  if (input === null || typeof input !== 'object') throw invalidArg('record input must be an object');
  const sessionKey = requireKey(input.sessionKey, 'sessionKey');
  const target = parseKey(sessionKey);
  const agentId = resolveAgent(sessionKey, input.agentId, target);
  const { kind, actorType } = input;
  if (!NOTIFY_KINDS.has(kind) && !LOG_ONLY_KINDS.has(kind) && kind !== SPAWN_KIND) {
    throw invalidArg(`unknown kind ${JSON.stringify(String(kind))}`);
  }
  if (!ACTOR_TYPES.has(actorType)) {
    throw invalidArg(`unknown actorType ${JSON.stringify(String(actorType))}`);
  }
  let watchers = [];
  if (input.watchers !== undefined && input.watchers !== null) {
    if (!Array.isArray(input.watchers)) throw invalidArg('watchers must be an array of strings');
    watchers = input.watchers;
    for (const w of watchers) requireString(w, 'watchers[]');
  }
  const onlyIfWatched = input.onlyIfWatched ?? false;
  if (typeof onlyIfWatched !== 'boolean') throw invalidArg('onlyIfWatched must be a boolean');
  const dedupeKey = optionalString(input.dedupeKey, 'dedupeKey');
  return {
    sessionKey,
    target,
    agentId,
    sessionId: optionalString(input.sessionId, 'sessionId'),
    kind,
    actorType,
    actorId: optionalString(input.actorId, 'actorId'),
    runId: optionalString(input.runId, 'runId'),
    occurredAt: clampOccurredAt(input.occurredAt, now),
    summary: normaliseSummary(input.summary),
    payloadJson: normalisePayload(input.payload),
    dedupeKey: dedupeKey === '' ? undefined : dedupeKey,
    watchers,
    onlyIfWatched,
  };
}

/** Usable producer-named watchers: qualified, not the target, each once. */
function usableWatchers(rec) {
  if (!rec.target || rec.watchers.length === 0) return [];
  const out = [];
  const seen = new Set();
  for (const w of rec.watchers) {
    if (w === '' || w === rec.sessionKey || seen.has(w) || !parseKey(w)) continue;
    seen.add(w);
    out.push(w);
  }
  return out;
}

function rowToEvent(r) {
  const e = {
    sequence: r.sequence,
    sessionKey: r.session_key,
    agentId: r.agent_id,
    kind: r.kind,
    actorType: r.actor_type,
  };
  if (r.actor_id !== null) e.actorId = r.actor_id;
  if (r.run_id !== null) e.runId = r.run_id;
  if (r.session_id !== null) e.sessionId = r.session_id;
  e.occurredAt = r.occurred_at;
  e.summary = r.summary;
  if (r.payload_json !== null) e.payload = JSON.parse(r.payload_json);
  return e;
}

function recordToEvent(rec, sequence) {
  const e = {
    sequence,
    sessionKey: rec.sessionKey,
    agentId: rec.agentId,
    kind: rec.kind,
    actorType: rec.actorType,
  };
  if (rec.actorId !== undefined) e.actorId = rec.actorId;
  if (rec.runId !== undefined) e.runId = rec.runId;
  if (rec.sessionId !== undefined) e.sessionId = rec.sessionId;
  e.occurredAt = rec.occurredAt;
  e.summary = rec.summary;
  if (rec.payloadJson !== null) e.payload = JSON.parse(rec.payloadJson);
  return e;
}

function readOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw invalidArg('options must be an object');
  return options;
}

function numberOption(value, fallback, name, min) {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || Math.floor(value) < min) {
    throw invalidArg(`${name} must be a finite number >= ${min}`);
  }
  return Math.floor(value);
}

module.exports = {
  DAY_MS,
  NOTIFY_KINDS,
  SPAWN_KIND,
  PROVENANCES,
  SessionStateError,
  invalidArg,
  toSessionError,
  parseKey,
  isNested,
  requireKey,
  requireString,
  resolveAgent,
  encodeNoticeContextKey,
  decodeNoticeContextKey,
  noticeText,
  makeNotice,
  normaliseRecordInput,
  usableWatchers,
  rowToEvent,
  recordToEvent,
  readOptions,
  numberOption,
};
