// Writes crates/core/tests/fixtures/openclaw-2026.9.6.sqlite with OpenClaw's own published
// code, and beside it openclaw-2026.9.6.json: what OpenClaw itself reports for that file.
//
// Run with `npm run openclaw:fixture` (fetches OpenClaw once, then runs this under Node 24).
// The state directory is a fixed path under the temp directory, emptied first, so the store
// paths OpenClaw writes into the file are the same on every run on one machine.

import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const stateDir = join(tmpdir(), 'openclaw-fixture-state')
rmSync(stateDir, { recursive: true, force: true })
mkdirSync(stateDir, { recursive: true, mode: 0o700 })
process.env.OPENCLAW_STATE_DIR = stateDir

const { loadOpenClaw } = await import('./openclaw/load.mjs')
const { openClawReport } = await import('./openclaw/report.mjs')
const oc = await loadOpenClaw()
const s = oc.sessionState
const fixtures = join(root, 'crates/core/tests/fixtures')
const base = join(fixtures, `openclaw-${oc.version}`)

const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:fixture-child'
const CHILD2 = 'agent:main:subagent:fixture-child-2'
const GROUP = 'agent:main:telegram:group:-100200300'
const ADOPTED = 'agent:main:claude:fixture-local'
const REMOTE = 'agent:main:claude:fixture-remote'
const OPS = 'agent:ops:main'
const LOCAL_THREAD = '6f1c2a9e-0b7d-4e55-9a51-3c2d1e0f4a10'
const REMOTE_THREAD = '8a3b4c5d-6e7f-4081-92a3-b4c5d6e7f809'
const TRANSCRIPT = `/home/fixture/.claude/projects/-srv-demo/${LOCAL_THREAD}.jsonl`

// A parent spawns two children: child_spawned seeds the parent's cursors.
s.recordSubagentSpawned({ childSessionKey: CHILD, agentId: 'main', requesterSessionKey: MAIN, childRunId: 'fixture-run-1' })
s.recordSubagentSpawned({ childSessionKey: CHILD2, agentId: 'main', requesterSessionKey: MAIN, childRunId: 'fixture-run-2' })
// A human types into the first child: notifies the parent.
const child = { sessionId: 'fixture-child-session', spawnedBy: MAIN }
s.recordSessionHumanDirectMessage({
  sessionKey: CHILD,
  agentId: 'main',
  entry: child,
  actor: s.classifySessionStateActor({ humanActorId: 'telegram:4242' }),
  channel: 'telegram',
  runId: 'fixture-run-1',
  dedupeKey: 'fixture-hdm-1',
  payload: { messageId: 'm-1' },
})
// The goal of the first child changes (OpenClaw records this one through its state worker).
await s.recordSessionGoalChanged({
  sessionKey: CHILD,
  agentId: 'main',
  entry: child,
  actor: { type: 'human', id: 'telegram:4242' },
  summary: 'goal changed: ship the fixture',
})
// The parent reads its notice: acknowledge advances last_seen to the frozen watermark.
s.acknowledgeSessionStateNotices(MAIN, [CHILD])
// A second human message after the acknowledgement leaves a pending notice.
s.recordSessionHumanDirectMessage({
  sessionKey: CHILD,
  agentId: 'main',
  entry: child,
  actor: { actorType: 'human' },
  channel: 'telegram',
  dedupeKey: 'fixture-hdm-2',
})
// Log-only kinds.
s.recordSessionCompacted({ sessionKey: CHILD, sessionId: 'fixture-child-session', agentId: 'main', runId: 'fixture-run-1', operationId: 'op-1' })
s.recordSubagentTerminalState({ childSessionKey: CHILD2, requesterSessionKey: MAIN, runId: 'fixture-run-2', outcomeStatus: 'timeout' })
s.recordSubagentTerminalState({ childSessionKey: CHILD, requesterSessionKey: MAIN, runId: 'fixture-run-1', outcomeStatus: 'ok' })
s.recordSessionStateEvent({ sessionKey: OPS, agentId: 'ops', kind: 'created', actorType: 'system', summary: 'session created' })
// The main session watches a group (ambient) and another agent's session (explicit).
s.registerMainSessionGroupWatch({ sessionKey: GROUP, agentId: 'main', mainKey: 'main', entry: { chatType: 'group' } })
s.recordSessionHumanDirectMessage({ sessionKey: GROUP, agentId: 'main', actor: { actorType: 'human', actorId: 'telegram:77' }, channel: 'telegram', dedupeKey: 'fixture-hdm-group' })
s.registerSessionStateWatch({ watcherSessionKey: MAIN, targetSessionKey: OPS, targetAgentId: 'ops' })
// Two adopted sessions, as OpenClaw's Claude catalog links them: a local transcript and a
// session on a paired node. The main session watches both.
for (const [sessionKey, link] of [
  [ADOPTED, { hostId: 'gateway:local', threadId: LOCAL_THREAD, upstreamRef: { filePath: TRANSCRIPT }, marker: { offset: 2048 } }],
  [REMOTE, { hostId: 'node:fixture-node', threadId: REMOTE_THREAD, upstreamRef: { nodeId: 'fixture-node', threadId: REMOTE_THREAD }, marker: { uuid: 'c0ffee00-0000-4000-8000-000000000003' } }],
]) {
  s.upsertSessionUpstreamLink({ sessionKey, agentId: 'main', catalogId: 'claude', upstreamKind: 'claude-cli', ...link })
  s.recordSessionStateEvent({ sessionKey, agentId: 'main', kind: 'adopted', actorType: 'human', summary: 'session adopted from claude' })
  s.registerSessionStateWatch({ watcherSessionKey: MAIN, targetSessionKey: sessionKey })
}
// The monitor scanned the local transcript once: marker and last_scanned_at move.
s.updateSessionUpstreamLinkMarker(ADOPTED, 'main', { offset: 4096 })
s.recordSessionHumanDirectMessage({ sessionKey: ADOPTED, agentId: 'main', actor: { actorType: 'human' }, channel: 'claude', dedupeKey: 'fixture-upstream-1', payload: { upstream: true } })

// What OpenClaw reports for the file.
const report = await openClawReport(oc)
const { db } = oc.stateDb.openOpenClawStateDatabase()

// Everything into the main file, then a compact copy: VACUUM keeps every table, index and the
// user_version; 1 KiB pages make the file of 105 mostly empty tables about a third as large.
db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
oc.stateDbCache.closeOpenClawStateDatabase()
const { DatabaseSync } = await import('node:sqlite')
const source = join(stateDir, 'state', 'openclaw.sqlite')
mkdirSync(fixtures, { recursive: true })
rmSync(`${base}.sqlite`, { force: true })
const compact = new DatabaseSync(source)
compact.exec(`VACUUM INTO '${base}.sqlite'`)
compact.close()
const small = new DatabaseSync(`${base}.sqlite`)
small.exec('PRAGMA page_size = 1024; VACUUM')
small.close()
const check = new DatabaseSync(`${base}.sqlite`)
report.tableCount = check.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get().n
report.integrity = check.prepare('PRAGMA integrity_check').get().integrity_check
check.close()
// OpenClaw opens the compacted copy (in another process, from another state directory) and
// reports the same facts.
const again = join(tmpdir(), 'openclaw-fixture-reopen')
rmSync(again, { recursive: true, force: true })
mkdirSync(join(again, 'state'), { recursive: true, mode: 0o700 })
copyFileSync(`${base}.sqlite`, join(again, 'state', 'openclaw.sqlite'))
const reread = JSON.parse(
  execFileSync(process.execPath, [join(root, 'scripts/openclaw/read.mjs'), again], { encoding: 'utf8' }),
)
for (const key of ['rows', 'eventsSince', 'versions', 'upstreamLinks', 'watchedUpstreamLinks', 'ddl', 'userVersion']) {
  if (JSON.stringify(reread[key]) !== JSON.stringify(report[key])) {
    throw new Error(`openclaw-fixture: OpenClaw reads ${key} differently from the compacted copy`)
  }
}
writeFileSync(`${base}.json`, `${JSON.stringify(report, null, 2)}\n`)
console.log(`openclaw-fixture: ${base}.sqlite (${statSync(`${base}.sqlite`).size} bytes, ${report.tableCount} tables), ${base}.json`)
process.exit(0)
