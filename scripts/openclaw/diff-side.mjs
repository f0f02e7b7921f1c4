// One side of the differential test, in its own process (its own module graph, its own
// OPENCLAW_STATE_DIR, its own system-event queue; OpenClaw's state worker, which records goal
// changes, refuses to start from a worker thread): OpenClaw's published module, or the
// adapter over the store. It runs whole sequences of calls and answers, after every step, what
// the step returned, every watcher's queued notices and every cursor row.
//
// Both sides run OpenClaw's own system-event queue and session store: the adapter side hands
// its notices to OpenClaw's enqueueSystemEvent, as a gateway does, so the queues compare
// entry by entry.

import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { createRequire } from 'node:module'

const side = process.env.OC_DIFF_SIDE
const stateDir = process.env.OPENCLAW_STATE_DIR
const packageDir = process.env.OPENCLAW_PACKAGE_DIR
const { loadOpenClaw, findChunk } = await import('./load.mjs')
const { ENTRIES, KEYS } = await import('./diff-gen.mjs')

// One clock for the whole side: OpenClaw reads Date.now where it takes no `options.now`.
let clock = Date.now()
const realNow = Date.now
Date.now = () => clock

const oc = await loadOpenClaw({ packageDir })
const dist = join(packageDir ?? new URL('../../.tmp/openclaw/package', import.meta.url).pathname, 'dist')
const pick = async (hint, names) => {
  const { file, exports } = findChunk(dist, { hint, names })
  const mod = await import(file)
  return Object.fromEntries(names.map((n) => [n, mod[exports.get(n)]]))
}
const events = await pick('system-events-', [
  'enqueueSystemEvent',
  'peekSystemEventEntries',
  'drainSystemEventEntries',
  'resetSystemEventsForTest',
])
const sessions = await pick('session-accessor.sqlite-entry-', [
  'replaceSessionEntrySync',
  'loadSessionEntryReadOnly',
  'publishSystemEventStoreConfig',
])
const ownership = await pick('system-event-ownership-', ['isSystemEventStoreCurrent'])

// Session entries, through OpenClaw's own session store, once: a watcher without an entry is
// `agent:main:subagent:ghost`, which the sweep must skip.
for (const [sessionKey, entry] of Object.entries(ENTRIES)) {
  sessions.replaceSessionEntrySync({ sessionKey }, { updatedAt: clock, ...entry })
}
sessions.publishSystemEventStoreConfig({})

const stateDb = oc.stateDb.openOpenClawStateDatabase().db

/** The API under test, by OpenClaw's names. */
let api
let wakes = []
let adapterMod
let storeFile
let storeCount = 0
if (side === 'openclaw') {
  api = oc.sessionState
} else {
  const require = createRequire(import.meta.url)
  adapterMod = require('../../dist/openclaw/index.js')
  api = adapterMod
}

function openAdapter(fresh) {
  if (fresh) {
    if (storeFile) rmSync(storeFile, { force: true })
    for (const s of ['-wal', '-shm']) if (storeFile) rmSync(storeFile + s, { force: true })
    storeFile = join(stateDir, 'state', `session-state-${storeCount++}.sqlite`)
  }
  adapterMod.configureSessionState({
    path: storeFile,
    storeOptions: { syncIntervalMs: 0 },
    onError: () => {},
    host: {
      enqueueSystemEvent: events.enqueueSystemEvent,
      requestSessionEventWake: (w) => wakes.push(w),
      isSystemEventStoreCurrent: ownership.isSystemEventStoreCurrent,
      loadSessionEntryReadOnly: sessions.loadSessionEntryReadOnly,
    },
  })
}

const norm = (v) => (typeof v === 'string' ? v.split(stateDir).join('<state>') : v)

// Between sequences each side forgets everything through its own API or tables, keeping its
// database open (a fresh store or state database per sequence costs more than the sequence).
// Sequences go on numbering where the previous one stopped, on both sides alike.
function reset() {
  events.resetSystemEventsForTest()
  wakes = []
  if (side === 'openclaw') {
    stateDb.exec(`DELETE FROM session_state_events; DELETE FROM session_state_heads;
      DELETE FROM session_watch_cursors; DELETE FROM session_upstream_links;`)
  } else {
    const store = adapterMod.getSessionStateStore()
    for (const key of KEYS) store.deleteSession(key)
  }
}

function cursors() {
  if (side === 'openclaw') {
    return stateDb
      .prepare('SELECT * FROM session_watch_cursors ORDER BY watcher_session_key, target_session_key')
      .all()
      .map((r) => [
        r.watcher_session_key,
        r.target_session_key,
        r.last_seen_sequence,
        r.notified_sequence,
        r.material_sequence,
        r.provenance,
        norm(r.watcher_store_path),
        r.updated_at,
      ])
  }
  return adapterMod
    .getSessionStateStore()
    .cursorRows()
    .map((r) => [r.watcherKey, r.targetKey, r.lastSeen, r.notified, r.material, r.provenance, norm(r.scope ?? null), r.updatedAt])
}

function queues() {
  const out = {}
  for (const key of KEYS) {
    const q = events.peekSystemEventEntries(key)
    if (q.length) out[key] = q.map((e) => [e.text, e.contextKey, norm(e.sessionStorePath ?? null)])
  }
  return out
}

/** A result as plain JSON: undefined, Sets and Maps made explicit. */
function plain(v) {
  if (v === undefined) return '<undefined>'
  if (v instanceof Set) return { set: [...v].sort() }
  if (v instanceof Map) return { map: [...v.entries()].map(([k, x]) => [k, plain(x)]) }
  if (Array.isArray(v)) return v.map(plain)
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, plain(v[k])]))
  return v
}

async function step(op) {
  clock = op.now
  const o = { now: op.now }
  switch (op.fn) {
    case 'restart':
      events.resetSystemEventsForTest()
      if (side === 'adapter') openAdapter(false)
      return undefined
    case 'drainAndAcknowledge': {
      // OpenClaw's reply path: take the watcher's queued events, acknowledge their targets.
      const taken = events.drainSystemEventEntries(op.args[0])
      const targets = taken.map((e) => api.decodeSessionStateNoticeContextKey(e.contextKey ?? '')).filter(Boolean)
      api.acknowledgeSessionStateNotices(op.args[0], targets, o)
      return taken.map((e) => [e.text, e.contextKey, norm(e.sessionStorePath ?? null)])
    }
    case 'listSessionStateEventsSince': {
      const [key, agentId, after, limit] = op.args
      return api.listSessionStateEventsSince(key, agentId, after, limit, o)
    }
    case 'dropQueue':
      // A turn that took the watcher's queued events and ended before acknowledging them.
      return events.drainSystemEventEntries(op.args[0]).length
    case 'upsertSessionUpstreamLink':
    case 'updateSessionUpstreamLinkMarker':
      return api[op.fn](...op.args, { ...op.opts, now: op.now })
    case 'readSessionUpstreamLink':
      return api.readSessionUpstreamLink(...op.args)
    case 'deleteSessionUpstreamLink': {
      // With `expected`: the link as this side reads it now, or one changed since.
      let expected
      if (op.expected) {
        const link = api.readSessionUpstreamLink(...op.args)
        expected = link && op.expected === 'stale' ? { ...link, updatedAt: link.updatedAt - 1 } : link
      }
      return api.deleteSessionUpstreamLink(...op.args, expected ? { expected } : {})
    }
    case 'listWatchedSessionUpstreamLinks':
      return await api.listWatchedSessionUpstreamLinks()
    case 'recordSessionGoalChanged':
      return await api.recordSessionGoalChanged(...op.args)
    case 'recordSubagentSpawned':
    case 'recordSubagentTerminalState':
    case 'recordSessionCompacted':
    case 'classifySessionStateActor':
    case 'decodeSessionStateNoticeContextKey':
      return api[op.fn](...op.args)
    default:
      return api[op.fn](...op.args, o)
  }
}

function snapshot() {
  return JSON.stringify({ cursors: cursors(), queues: queues() })
}

function finalState() {
  const out = {}
  for (const key of KEYS) {
    const agentId = key.split(':')[1]
    const r = api.listSessionStateEventsSince(key, agentId, 0, 200, { now: clock })
    if (r.events.length || r.earliestAvailableSequence) out[key] = plain(r)
  }
  return JSON.stringify(out)
}

process.on('message', async (msg) => {
  if (msg.type === 'run') {
    const t0 = performance.now()
    reset()
    const tReset = performance.now()
    const times = {}
    const steps = []
    for (const op of msg.ops) {
      let result
      const ts = performance.now()
      try {
        result = plain(await step(op))
      } catch (e) {
        result = { threw: String(e?.message ?? e) }
      }
      const tm = performance.now()
      steps.push({ result: JSON.stringify(result), state: snapshot() })
      const t = (times[op.fn] ??= [0, 0, 0])
      t[0]++
      t[1] += tm - ts
      t[2] += performance.now() - tm
    }
    const final = finalState()
    process.send({ steps, final, ms: { reset: tReset - t0, total: performance.now() - t0, times } })
  } else if (msg.type === 'close') {
    if (adapterMod) adapterMod.closeSessionState()
    Date.now = realNow
    process.send({ closed: true })
  }
})
if (side === 'adapter') openAdapter(true)
mkdirSync(join(stateDir, 'state'), { recursive: true })
process.send({ ready: true })
