// Behaviour check of OpenClaw's published implementation against the addon, for the operations
// bench/openclaw/ times: both run the same script in one Node 24 process, each on a fresh file,
// and must give the same, exact values (sequences, versions, notice texts and context keys byte
// for byte, the watermark a notice names after a drain, what a sweep re-queues after a
// restart). Values only one side has (the addon's event objects, OpenClaw's queue entries'
// ids) are not compared. `node24 bench/openclaw/check.mjs` prints the number of checks passed
// and exits non-zero on a difference; bench/run.js runs it before timing OpenClaw.

import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureSession, exitRemoving, openOpenClaw } from './api.mjs'
import { INPUT_LOG, INPUT_NOTIFY } from './workloads.mjs'

const MAIN = 'agent:main:main'
const A = 'agent:main:subagent:check-a'
const C = 'agent:main:subagent:check-c'
const D = 'agent:main:subagent:check-d'
const NONE = 'agent:main:subagent:check-none'
const text = (key, since) =>
  `Session "${key}" changed (other actor). Reconcile before acting: session_status sessionKey "${key}" changesSince ${since}.`
const contextKey = (key) => 'session-state:' + Buffer.from(key, 'utf8').toString('hex')

/** The addon, through its public API. */
function addonSide(dir) {
  const { SessionState } = createRequire(import.meta.url)('../..')
  const file = join(dir, 'addon.sqlite')
  const errors = []
  const open = () => new SessionState(file, { wake: () => {}, onError: (e) => errors.push(e) })
  let s = open()
  const notices = (list) => list.map((n) => ({ text: n.text, contextKey: n.contextKey }))
  const out = {}
  out.logSequences = [1, 2, 3].map(() => s.record({ ...INPUT_LOG, sessionKey: A }).sequence)
  const since = s.changesSince(A, 1).stateChanges
  out.changesSince = { sequences: since.events.map((e) => e.sequence), earliest: since.earliestAvailableSequence, truncated: since.truncated, historyGap: since.historyGap }
  const versions = new Map(s.stateVersions([{ sessionKey: A }, { sessionKey: NONE }]).map((v) => [v.sessionKey, v.stateVersion]))
  out.versions = [versions.get(A) ?? 0, versions.get(NONE) ?? 0]
  s.watch(MAIN, C)
  out.notifySequence = s.record({ ...INPUT_NOTIFY, sessionKey: C }).sequence
  out.firstDrain = notices(s.drain(MAIN))
  out.secondSequence = s.record({ ...INPUT_NOTIFY, sessionKey: C }).sequence
  out.secondDrain = notices(s.drain(MAIN))
  s.watch(MAIN, D)
  out.pendingSequence = s.record({ ...INPUT_NOTIFY, sessionKey: D }).sequence
  s.close() // a restart: the queue is gone, the cursors stay
  s = open()
  out.swept = s.sweep().notices
  out.afterSweep = notices(s.drain(MAIN))
  s.close()
  if (errors.length > 0) throw errors[0]
  return out
}

/** OpenClaw, through its public functions and its gateway's queue. */
async function openClawSide(dir) {
  const stateDir = join(dir, 'state-dir')
  mkdirSync(stateDir, { mode: 0o700 })
  const oc = await openOpenClaw(stateDir)
  ensureSession(oc, MAIN)
  const o = { path: join(dir, 'openclaw.sqlite') }
  const record = (input) => oc.state.recordSessionStateEvent({ agentId: 'main', ...input }, o).sequence
  // The reply path's drain: take the queued events, acknowledge the targets they name.
  const drain = () => {
    const taken = oc.events.drainSystemEventEntries(MAIN)
    const targets = taken.map((e) => oc.state.decodeSessionStateNoticeContextKey(e.contextKey)).filter(Boolean)
    if (targets.length > 0) oc.state.acknowledgeSessionStateNotices(MAIN, targets, o)
    return taken.map((e) => ({ text: e.text, contextKey: e.contextKey }))
  }
  const out = {}
  out.logSequences = [1, 2, 3].map(() => record({ ...INPUT_LOG, sessionKey: A }))
  const since = oc.state.listSessionStateEventsSince(A, 'main', 1, 200, o)
  out.changesSince = { sequences: since.events.map((e) => e.sequence), earliest: since.earliestAvailableSequence, truncated: since.truncated, historyGap: since.historyGap }
  const versions = oc.state.getSessionStateVersions([{ sessionKey: A }, { sessionKey: NONE }], o).main ?? {}
  out.versions = [versions[A] ?? 0, versions[NONE] ?? 0]
  oc.state.registerSessionStateWatch({ watcherSessionKey: MAIN, targetSessionKey: C }, o)
  out.notifySequence = record({ ...INPUT_NOTIFY, sessionKey: C })
  out.firstDrain = drain()
  out.secondSequence = record({ ...INPUT_NOTIFY, sessionKey: C })
  out.secondDrain = drain()
  oc.state.registerSessionStateWatch({ watcherSessionKey: MAIN, targetSessionKey: D }, o)
  out.pendingSequence = record({ ...INPUT_NOTIFY, sessionKey: D })
  oc.events.drainSystemEventEntries(MAIN) // a restart: the in-memory queue is gone
  oc.db.closeOpenClawStateDatabase()
  oc.state.sweepSessionStateWatchNotices(o)
  out.afterSweep = oc.events.peekSystemEventEntries(MAIN).map((e) => ({ text: e.text, contextKey: e.contextKey }))
  out.swept = out.afterSweep.length
  out.afterSweep = drain()
  oc.db.closeOpenClawStateDatabase()
  return { out, version: oc.version }
}

/** The values both must give. */
const EXPECTED = {
  logSequences: [1, 2, 3],
  changesSince: { sequences: [2, 3], earliest: 1, truncated: false, historyGap: false },
  versions: [3, 0],
  notifySequence: 4,
  firstDrain: [{ text: text(C, 0), contextKey: contextKey(C) }],
  secondSequence: 5,
  secondDrain: [{ text: text(C, 4), contextKey: contextKey(C) }],
  pendingSequence: 6,
  swept: 1,
  afterSweep: [{ text: text(D, 0), contextKey: contextKey(D) }],
}

const dir = mkdtempSync(join(tmpdir(), 'session-awareness-check-openclaw-'))
let code = 1
try {
  const addon = addonSide(dir)
  const { out: openclaw, version } = await openClawSide(dir)
  for (const [name, want] of Object.entries(EXPECTED)) {
    assert.deepStrictEqual(addon[name], want, `addon: ${name}`)
    assert.deepStrictEqual(openclaw[name], want, `OpenClaw ${version}: ${name}`)
  }
  console.log(`behaviour check, OpenClaw ${version} against the addon (Node ${process.versions.node}): ${Object.keys(EXPECTED).length} checks passed`)
  code = 0
} catch (err) {
  console.error(err)
} finally {
  exitRemoving(dir, code)
}
