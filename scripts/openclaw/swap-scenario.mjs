// The scenario of scripts/openclaw-swap.mjs, run in one process against one implementation of
// OpenClaw's session-state chunk (`original`, `passthrough` or `adapter`; see swap.mjs).
//
// A parent main session sends to a peer session with `watch`; a human writes into the peer; the
// parent's reply path drains the notice and acknowledges it; `session_status` with
// `changesSince` returns the typed delta; a second change gives one fresh notice; after the
// parent's reset a change gives none; after the peer's deletion its history is gone. Every step
// is checked against exact values, and what it observed is returned for the comparison between
// implementations (timestamps and temporary paths normalised).

import { existsSync } from 'node:fs'
import { MAIN, PEER, checker, notice, noticeText, openGateway, sharedRows } from './swap-gateway.mjs'

/**
 * @param {{ impl: string, stateDir: string, root: string, adapterUrl?: string }} o
 */
export async function runScenario(o) {
  const t = checker()
  const { check, equal, checks } = t
  const observed = {}
  const { state, statePath, loadMs, calls, queued, drain, send, sessionStatus, humanWrites, settle } = await openGateway(o, t)

  // 1. The parent sends to the peer with watch.
  const sent = (await send.execute('send-1', { sessionKey: PEER, message: 'check the build', watch: true, timeoutSeconds: 0 })).details
  await settle()
  observed.send = { status: sent.status, watched: sent.watched, sessionKey: sent.sessionKey, calls: calls.slice(0, 2) }
  equal('sessions_send with watch: accepted and watched', observed.send, {
    status: 'accepted', watched: true, sessionKey: PEER, calls: ['sessions.resolve', 'agent'],
  })
  observed.queueAfterSend = queued()
  equal('no notice before a change', observed.queueAfterSend, [])

  // 2. A human writes directly into the peer: one notice for the parent.
  const first = humanWrites('hdm-1')
  const human = { sessionKey: PEER, sessionId: 'peer-1', agentId: 'main', kind: 'human_direct_message', actorType: 'human', actorId: 'telegram:42', occurredAt: 'number', summary: 'human message via telegram' }
  observed.firstWrite = first
  equal('the human write is event 1', first, { sequence: 1, ...human })
  observed.queueAfterFirst = queued()
  equal('one notice, exact text and context key', observed.queueAfterFirst, [notice(0)])

  // 3. The parent's reply path drains the notice and acknowledges it.
  observed.firstDrain = await drain()
  equal('the drain formats the notice', observed.firstDrain, `System: [T] ${noticeText(PEER, 0)}`)
  observed.queueAfterDrain = queued()
  equal('the queue is empty after the drain', observed.queueAfterDrain, [])

  // 4. session_status with changesSince returns the typed delta.
  observed.status0 = await sessionStatus(0)
  equal('session_status changesSince 0', observed.status0, {
    ok: true,
    stateVersion: 1,
    // The tool's compact form of an event: no session, agent or run.
    stateChanges: {
      events: [{ sequence: 1, kind: 'human_direct_message', actorType: 'human', actorId: 'telegram:42', occurredAt: 'number', summary: 'human message via telegram' }],
      truncated: false,
      earliestAvailableSequence: 1,
      historyGap: false,
    },
  })

  // 5. A second change: one fresh notice from the acknowledged watermark.
  const second = humanWrites('hdm-2')
  observed.secondWrite = second
  equal('the second write is event 2', second, { sequence: 2, ...human })
  observed.queueAfterSecond = queued()
  equal('one fresh notice, changesSince 1', observed.queueAfterSecond, [notice(1)])
  observed.repeatWrite = humanWrites('hdm-2')
  observed.queueAfterRepeat = queued()
  equal('a repeated dedupe key adds no notice', observed.queueAfterRepeat, [notice(1)])
  observed.secondDrain = await drain()
  equal('the second drain', observed.secondDrain, `System: [T] ${noticeText(PEER, 1)}`)
  observed.status1 = await sessionStatus(1)
  equal('session_status changesSince 1: event 2 only', observed.status1?.stateChanges?.events?.map((e) => e.sequence), [2])

  // Where the rows are: OpenClaw's shared file, or the store's own.
  observed.sharedRows = sharedRows(o.stateDir)
  if (o.impl === 'adapter') {
    equal('openclaw.sqlite holds no session-state rows (events, heads, cursors)', observed.sharedRows, [0, 0, 0])
    check('the store file is <stateDir>/state/session-state.sqlite', existsSync(statePath))
  } else {
    equal('openclaw.sqlite holds 2 events, 1 head, 1 cursor', observed.sharedRows, [2, 1, 1])
  }
  delete observed.sharedRows

  // 6. The parent is reset: its cursor goes. The peer then has no watcher, and OpenClaw records
  // a human message only for a watched session: nothing is written, nothing is queued.
  state.handleSessionStateSessionReset(MAIN)
  const third = humanWrites('hdm-3') ?? null
  observed.afterReset = { write: third, queue: queued(), status: await sessionStatus(2) }
  equal('after the reset: the write is not recorded, no notice', [third, observed.afterReset.queue], [null, []])
  equal('after the reset: the history stays (version 2)', observed.afterReset.status.stateVersion, 2)

  // 7. The peer is deleted: its history and version go.
  state.handleSessionStateSessionDeleted(PEER, 'main')
  observed.afterDelete = await sessionStatus(0)
  equal('after the deletion: version 0, no events', observed.afterDelete, {
    ok: true, stateVersion: 0, stateChanges: { events: [], truncated: false, earliestAvailableSequence: 0, historyGap: false },
  })

  return { impl: o.impl, loadMs, checks, observed }
}

