// OpenClaw's callers of the session-state chunk, loaded from its published dist/ with the chunk
// served by scripts/openclaw/swap.mjs, in a fresh process: the pieces scripts/openclaw-swap.mjs
// drives, and what a gateway does at start (publish its store resolver, have its sessions).

import { DatabaseSync } from 'node:sqlite'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { isDeepStrictEqual } from 'node:util'

/** The watcher: the main session of agent `main`. */
export const MAIN = 'agent:main:main'
/** The watched session. */
export const PEER = 'agent:main:ops'
const hex = (s) => Buffer.from(s, 'utf8').toString('hex')
/** OpenClaw's notice text, as its module writes it. */
export const noticeText = (target, since) =>
  `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${since}.`
/** One queued notice for MAIN about PEER, as the tests observe it. */
export const notice = (since) => ({ text: noticeText(PEER, since), contextKey: `session-state:${hex(PEER)}` })

/** Exact-value checks, collected for the report. */
export function checker() {
  const checks = []
  const check = (name, ok, detail) => checks.push({ name, ok: Boolean(ok), ...(ok ? {} : { detail }) })
  const equal = (name, actual, expected) =>
    check(name, isDeepStrictEqual(actual, expected), `got ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`)
  return { checks, check, equal }
}

/**
 * Installs the swap, loads OpenClaw's callers and checks which module they got.
 * @param {{ impl: string, stateDir: string, root: string, adapterUrl?: string }} o
 * @param {ReturnType<typeof checker>} t
 */
export async function openGateway(o, t) {
  const { equal } = t
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
    // null, not undefined, for no block: observations travel as JSON.
    return block?.replace(/^System: \[[^\]]*\] /gm, 'System: [T] ') ?? null
  }
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
  return { state, accessor, statePath, loadMs, calls, queued, drain, send, sessionStatus, humanWrites, settle }
}

/** Rows of OpenClaw's session-state tables in its shared file: events, heads, cursors. */
export function sharedRows(stateDir) {
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
