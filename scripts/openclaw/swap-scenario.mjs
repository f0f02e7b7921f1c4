// The scenario of scripts/openclaw-swap.mjs, run in one process against one implementation of
// OpenClaw's session-state chunk (`original`, `passthrough` or `adapter`; see swap.mjs).
//
// A parent main session sends to a peer session with `watch`; a human writes into the peer; the
// parent's reply path drains the notice and acknowledges it; `session_status` with
// `changesSince` returns the typed delta; a second change gives one fresh notice; after the
// parent's reset a change gives none; after the peer's deletion its history is gone. Every step
// is checked against exact values, and what it observed is returned for the comparison between
// implementations (timestamps and temporary paths normalised).

import { DatabaseSync } from 'node:sqlite'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { isDeepStrictEqual } from 'node:util'

const MAIN = 'agent:main:main'
const PEER = 'agent:main:ops'
const hex = (s) => Buffer.from(s, 'utf8').toString('hex')
const noticeText = (target, since) =>
  `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${since}.`

/**
 * @param {{ impl: string, stateDir: string, root: string, adapterUrl?: string }} o
 */
export async function runScenario(o) {
  process.env.OPENCLAW_STATE_DIR = o.stateDir
  const packageDir = join(o.root, '.tmp/openclaw/package')
  const dist = join(packageDir, 'dist')
  const statePath = join(o.stateDir, 'state/session-state.sqlite')
  if (o.impl === 'adapter' && !o.adapterUrl) throw new Error('session-awareness/openclaw is not built')
  const { installSwap } = await import('./swap.mjs')
  const { findChunk, CHUNKS } = await import('./load.mjs')
  const { record, chunkUrl } = installSwap({ packageDir, mode: o.impl, adapterUrl: o.adapterUrl, statePath })

  const load = async (hint, names) => {
    const { file, exports } = findChunk(dist, { hint, names })
    const mod = await import(pathToFileURL(file).href)
    const fns = {}
    for (const [real, letter] of exports) fns[real] = mod[letter]
    return fns
  }
  const started = Date.now()
  const tools = await load('openclaw-tools-', ['createOpenClawTools', 'resolveOpenClawPluginToolsForOptions'])
  const spawnTools = await load('sessions-spawn-tool-', ['createSessionsSendTool', 'createSessionsSpawnTool'])
  const accessor = await load('session-accessor.sqlite-entry-', ['replaceSessionEntrySync', 'loadSessionEntryReadOnly', 'publishSystemEventStoreConfig'])
  const events = await load('system-events-', ['peekSystemEventEntries', 'consumeSelectedSystemEventEntries'])
  const ownership = await load('system-event-ownership-', ['resolveSystemEventQueueKey', 'isSystemEventStoreCurrent'])
  const reply = await import(pathToFileURL(findChunk(dist, { hint: 'get-reply-', names: ['getReplyFromConfig', 'prewarmReplyRunRuntimes'] }).file).href)
  // The module every importer got: the served one, or the original when nothing is swapped.
  const state = await load('session-state-events-', CHUNKS.sessionState.names)
  const served = await import(chunkUrl)
  const loadMs = Date.now() - started

  const checks = []
  const observed = {}
  const check = (name, ok, detail) => checks.push({ name, ok: Boolean(ok), ...(ok ? {} : { detail }) })
  const equal = (name, actual, expected) =>
    check(name, isDeepStrictEqual(actual, expected), `got ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`)

  if (o.impl === 'original') {
    equal('the original chunk is loaded, once, by its own URL', record.originalLoads, [chunkUrl])
  } else {
    equal('every importer got the served module', record.served, 1)
    if (o.impl === 'adapter') equal("the adapter has every name of the chunk's export clause", served.missing, [])
    equal(
      o.impl === 'adapter' ? 'the original chunk is never loaded' : 'the original chunk is loaded only under the pass-through URL',
      record.originalLoads,
      o.impl === 'adapter' ? [] : [`${chunkUrl}?session-awareness-original`],
    )
  }

  // A gateway would publish its store resolver at start; sessions exist in the agent's store.
  const cfg = { plugins: { enabled: false } }
  accessor.publishSystemEventStoreConfig(cfg)
  accessor.replaceSessionEntrySync({ sessionKey: MAIN, agentId: 'main' }, { sessionId: 'main-1', updatedAt: 1 })
  accessor.replaceSessionEntrySync({ sessionKey: PEER, agentId: 'main' }, { sessionId: 'peer-1', updatedAt: 1 })

  const calls = []
  const callGateway = async (req) => {
    calls.push(req.method)
    if (req.method === 'sessions.resolve') {
      const key = req.params?.key
      return key && accessor.loadSessionEntryReadOnly({ sessionKey: key, agentId: req.params.agentId }) ? { key, agentId: req.params.agentId } : null
    }
    if (req.method === 'agent') return { runId: 'run-1', status: 'accepted' }
    if (req.method === 'agent.wait') return { runId: req.params.runId, status: 'ok' }
    throw new Error(`no ${req.method} here`)
  }
  const queueKey = ownership.resolveSystemEventQueueKey(MAIN, 'main')
  const queued = () => events.peekSystemEventEntries(queueKey).map((e) => ({ text: e.text, contextKey: e.contextKey ?? null }))
  const drain = async () => {
    const block = await reply.__drainFormattedSystemEvents({ cfg, agentId: 'main', sessionKey: MAIN, isMainSession: true, isNewSession: false })
    // The block stamps each line with the event's time: the one value normalised.
    return block?.replace(/^System: \[[^\]]*\] /gm, 'System: [T] ')
  }
  const notice = (since) => ({ text: noticeText(PEER, since), contextKey: `session-state:${hex(PEER)}` })
  const toolset = tools.createOpenClawTools({ config: cfg, agentSessionKey: MAIN, callGateway })
  const status = toolset.find((t) => t.name === 'session_status')
  const send = spawnTools.createSessionsSendTool({ config: cfg, agentSessionKey: MAIN, callGateway })
  const sessionStatus = async (changesSince) => {
    const r = await status.execute('status', { sessionKey: PEER, changesSince })
    const d = r.details ?? {}
    return { ok: d.ok, stateVersion: d.stateVersion, stateChanges: normaliseChanges(d.stateChanges) }
  }
  const humanWrites = (dedupeKey) => {
    const entry = accessor.loadSessionEntryReadOnly({ sessionKey: PEER, agentId: 'main' })
    const event = state.recordSessionHumanDirectMessage({
      sessionKey: PEER,
      agentId: 'main',
      entry,
      actor: state.classifySessionStateActor({ humanActorId: 'telegram:42' }),
      channel: 'telegram',
      dedupeKey,
    })
    return event && { ...event, occurredAt: typeof event.occurredAt }
  }
  const settle = () => new Promise((r) => setTimeout(r, 50))

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

/** Rows of OpenClaw's session-state tables in its shared file: events, heads, cursors. */
function sharedRows(stateDir) {
  const db = new DatabaseSync(join(stateDir, 'state/openclaw.sqlite'), { readOnly: true })
  try {
    return ['session_state_events', 'session_state_heads', 'session_watch_cursors'].map(
      (t) => db.prepare(`SELECT count(*) AS n FROM ${t}`).get().n,
    )
  } finally {
    db.close()
  }
}

/** `stateChanges` with each event's time replaced by its type. */
function normaliseChanges(changes) {
  if (!changes) return changes
  return { ...changes, events: changes.events?.map((e) => ({ ...e, occurredAt: typeof e.occurredAt })) }
}
