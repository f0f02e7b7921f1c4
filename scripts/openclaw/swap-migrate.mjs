// The migration of docs/openclaw.md ("Migrating an OpenClaw gateway"), as scripts/openclaw-swap.mjs
// runs it, one phase per process on one state directory:
//
// - `write` (OpenClaw's original module): the main session watches the peer, a human writes into
//   the peer, and the process ends before the reply path drains the notice: the in-memory queue
//   is lost, the cursor stays pending in openclaw.sqlite.
// - `sweep` (original, or the adapter after `session-awareness import`): a gateway starts and
//   sweeps; the notice is queued again, drained and acknowledged; `session_status` answers
//   `changesSince 0`. The two sweeps' observations must be equal.

import { MAIN, PEER, checker, notice, noticeText, openGateway, sharedRows } from './swap-gateway.mjs'
import { DatabaseSync } from 'node:sqlite'
import { join } from 'node:path'

/** Cursor rows of openclaw.sqlite, as stored, without their update time. */
function sharedCursors(stateDir) {
  const db = new DatabaseSync(join(stateDir, 'state/openclaw.sqlite'), { readOnly: true })
  try {
    return db
      .prepare('SELECT * FROM session_watch_cursors ORDER BY watcher_session_key, target_session_key')
      .all()
      .map(({ updated_at: _u, created_at: _c, watcher_store_path: storePath, ...row }) => ({ ...row, storePath: typeof storePath }))
  } finally {
    db.close()
  }
}

/**
 * @param {{ impl: string, stateDir: string, root: string, adapterUrl?: string }} o
 */
export async function writeHistory(o) {
  const t = checker()
  const g = await openGateway(o, t)
  const sent = (await g.send.execute('send-1', { sessionKey: PEER, message: 'check the build', watch: true, timeoutSeconds: 0 })).details
  await g.settle()
  t.equal('before the migration: sessions_send watched', sent.watched, true)
  const write = g.humanWrites('hdm-1')
  t.equal('before the migration: event 1', write?.sequence, 1)
  t.equal('before the migration: one notice queued, never drained', g.queued(), [notice(0)])
  const observed = { sharedRows: sharedRows(o.stateDir), cursors: sharedCursors(o.stateDir) }
  t.equal("before the migration: openclaw.sqlite holds 1 event, 1 head, 1 cursor", observed.sharedRows, [1, 1, 1])
  return { impl: o.impl, loadMs: g.loadMs, checks: t.checks, observed }
}

/**
 * @param {{ impl: string, stateDir: string, root: string, adapterUrl?: string }} o
 */
export async function firstSweep(o) {
  const t = checker()
  const before = sharedCursors(o.stateDir)
  const g = await openGateway(o, t)
  const observed = {}
  observed.queueAtStart = g.queued()
  t.equal('a new process starts with an empty queue', observed.queueAtStart, [])
  g.state.sweepSessionStateWatchNotices()
  observed.queueAfterSweep = g.queued()
  t.equal('the first sweep queues the pending notice again', observed.queueAfterSweep, [notice(0)])
  observed.drain = await g.drain()
  t.equal('the reply path drains it', observed.drain, `System: [T] ${noticeText(PEER, 0)}`)
  g.state.sweepSessionStateWatchNotices()
  observed.queueAfterSecondSweep = g.queued()
  t.equal('once acknowledged, a second sweep queues nothing', observed.queueAfterSecondSweep, [])
  observed.status = await g.sessionStatus(0)
  t.equal('session_status changesSince 0 after the migration', [observed.status.stateVersion, observed.status.stateChanges?.events?.map((e) => e.sequence)], [1, [1]])
  const after = sharedCursors(o.stateDir)
  if (o.impl === 'adapter') {
    t.equal("the adapter leaves openclaw.sqlite's cursor as imported", after, before)
  } else {
    t.equal("OpenClaw acknowledges in openclaw.sqlite (L = N = M = 1)", after.map((c) => [c.watcher_session_key, c.last_seen_sequence, c.notified_sequence, c.material_sequence]), [[MAIN, 1, 1, 1]])
  }
  return { impl: o.impl, loadMs: g.loadMs, checks: t.checks, observed }
}
