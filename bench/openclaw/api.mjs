// OpenClaw's published implementation as the benchmark drives it: the session-state functions
// of scripts/openclaw/load.mjs, plus the gateway-side pieces a benchmark needs beside them (the
// in-memory system-event queue its notices go to, the agents' session stores, the runtime
// config). Run on Node 24 (`node:sqlite`); set up by scripts/openclaw.sh.
//
// OpenClaw reads OPENCLAW_STATE_DIR while its modules load, so `openOpenClaw` sets it before
// the first import; one process holds one state directory.

import { rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))
const ROOT = resolve(here, '../..')

/**
 * Imports the chunk that `importer` imports and whose export clause holds `names`, so that it is
 * the same module instance OpenClaw's own code uses (the queue and the store resolver are module
 * state).
 */
async function chunkFunctions(findChunk, dist, hint, names, importer) {
  const { file, exports } = findChunk(dist, { hint, names }, importer)
  const mod = await import(pathToFileURL(file).href)
  const fns = {}
  for (const [real, alias] of exports) fns[real] = mod[alias]
  return { fns, file }
}

/**
 * Loads OpenClaw with `stateDir` as its state directory and starts it the way a gateway does:
 * the system-event store resolver is published from the runtime config, so notices carry the
 * watcher's session store and are not dropped by the queue.
 * @param {string} stateDir
 */
export async function openOpenClaw(stateDir) {
  process.env.OPENCLAW_STATE_DIR = stateDir
  const { loadOpenClaw, findChunk, DEFAULT_PACKAGE_DIR } = await import(
    pathToFileURL(join(ROOT, 'scripts/openclaw/load.mjs')).href
  )
  const oc = await loadOpenClaw()
  const dist = join(process.env.OPENCLAW_PACKAGE_DIR ?? DEFAULT_PACKAGE_DIR, 'dist')
  const events = await chunkFunctions(findChunk, dist, 'system-events-', ['drainSystemEventEntries', 'peekSystemEventEntries'], oc.files.sessionState)
  const sessions = await chunkFunctions(
    findChunk,
    dist,
    'session-accessor.sqlite-entry-',
    ['publishSystemEventStoreConfig', 'replaceSessionEntrySync', 'loadSessionEntryReadOnly', 'captureSessionWatcherStorePaths'],
    oc.files.sessionState,
  )
  const config = await chunkFunctions(findChunk, dist, 'io.runtime-', ['getRuntimeConfig'], sessions.file)
  const agents = await chunkFunctions(findChunk, dist, 'openclaw-agent-db-', ['openOpenClawAgentDatabase', 'getOpenClawAgentDatabaseIfOpen'], sessions.file)
  sessions.fns.publishSystemEventStoreConfig(config.fns.getRuntimeConfig())
  return {
    version: oc.version,
    state: oc.sessionState,
    kernel: oc.upstreamLinks,
    db: { ...oc.stateDb, ...oc.stateDbCache },
    events: events.fns,
    sessions: sessions.fns,
    agents: agents.fns,
  }
}

/**
 * Creates `sessionKey`'s entry in its agent's session store (as the gateway does when a session
 * starts) and keeps that agent's database open, as a gateway serving the session has it:
 * OpenClaw's sweep only re-notifies watchers whose session exists there, and reads the store
 * through the open handle (without one, each read opens a read-only connection of its own).
 */
export function ensureSession(oc, sessionKey) {
  if (!oc.sessions.loadSessionEntryReadOnly({ sessionKey, clone: false })) {
    oc.sessions.replaceSessionEntrySync({ sessionKey }, { sessionId: `bench-${sessionKey}`, updatedAt: Date.now() })
  }
  const agentId = agentOf(sessionKey)
  if (!oc.agents.getOpenClawAgentDatabaseIfOpen({ agentId })) oc.agents.openOpenClawAgentDatabase({ agentId })
}

/** The agent id OpenClaw stores for a key `agent:<id>:…`. */
export const agentOf = (sessionKey) => sessionKey.split(':')[1]

/**
 * Exits with `code` and removes `dir` last: OpenClaw's own exit handlers reopen its state
 * database (creating `<stateDir>/state/` again), so a removal before them leaves files behind.
 */
export function exitRemoving(dir, code = 0) {
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  process.exit(code)
}
