// `node24 --expose-gc bench/openclaw/rss.mjs`: the resident memory of a fresh process running
// OpenClaw's published implementation with 100,000 cursors and 100,000 pending notices, as
// bench/rss.js measures the addon. Prints one JSON line: `baseline` (MiB: OpenClaw loaded,
// started as a gateway starts it, its database open and empty) and `rss` (MiB, after).
//
// The cursors come from OpenClaw's public record, 1,000 targets each recorded once naming the
// same 100 watchers (whose sessions exist in their agents' stores), so its notice queue holds
// what it holds in a gateway: at most 20 notices per watcher.

import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureSession, exitRemoving, openOpenClaw } from './api.mjs'
import { INPUT_NOTIFY } from './workloads.mjs'

function rssMiB() {
  global.gc()
  global.gc()
  return process.memoryUsage().rss / (1024 * 1024)
}

let code = 1
const dir = mkdtempSync(join(tmpdir(), 'session-awareness-rss-openclaw-'))
try {
  const stateDir = join(dir, 'state-dir')
  mkdirSync(stateDir, { mode: 0o700 })
  const oc = await openOpenClaw(stateDir)
  const watchers = Array.from({ length: 100 }, (_, i) => `agent:w${i}:main`)
  for (const w of watchers) ensureSession(oc, w)
  const { db } = oc.db.openOpenClawStateDatabase()
  const baseline = rssMiB()
  for (let t = 0; t < 1000; t++) {
    const e = oc.state.recordSessionStateEvent({
      ...INPUT_NOTIFY,
      sessionKey: `agent:main:subagent:t${t}`,
      agentId: 'main',
      watcherSessionKeys: watchers,
    })
    if (e === undefined) throw new Error(`record ${t} failed`)
  }
  const rss = rssMiB()
  const pending = db.prepare('SELECT count(*) AS n FROM session_watch_cursors WHERE material_sequence > last_seen_sequence').get().n
  const queued = watchers.reduce((n, w) => n + oc.events.peekSystemEventEntries(w).length, 0)
  if (pending !== 100_000 || queued !== 2000) throw new Error(`${pending} pending cursors, ${queued} queued notices`)
  oc.db.closeOpenClawStateDatabase()
  console.log(JSON.stringify({ baseline, rss }))
  code = 0
} catch (err) {
  console.error(err)
} finally {
  exitRemoving(dir, code)
}
