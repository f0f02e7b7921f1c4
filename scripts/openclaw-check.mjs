// `npm run test:openclaw`: OpenClaw's published code (2026.9.6) reads the upstream links the
// store wrote (semantics.md#storage, semantics.md#upstream). Runs under Node 24 (OpenClaw needs node:sqlite) with the built addon.
//
// 1. A copy of the file OpenClaw wrote (crates/core/tests/fixtures/openclaw-2026.9.6.sqlite):
//    the store adopts a local transcript and a remote session, scans, checks and closes; then
//    OpenClaw opens the file in another process (its schema check runs there) and its own
//    functions must report the store's links, the links it wrote itself, and the store's events.
// 2. A fresh file: OpenClaw's link functions that take a database handle read the same rows.
// 3. Rows OpenClaw writes and the store would not (semantics.md#reading-foreign-events): OpenClaw's
//    own API records a 319-character multi-line summary, payloads over 4 KiB and every kind it
//    knows; rows a later version could write (an unknown kind, a payload that is a JSON array)
//    are added by hand. `changesSince` on OpenClaw's file, and on the file `import` makes of it,
//    must answer every row OpenClaw's `listSessionStateEventsSince` answers: the same sequences,
//    kinds, actors, run ids and payloads, the summary made one line as documented.
//
// Prints one line per check and a closing "N passed, N failed" line; exits 1 on a failure.

import { execFileSync } from 'node:child_process'
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const started = Date.now()
const work = mkdtempSync(join(tmpdir(), 'openclaw-check-'))
process.env.OPENCLAW_STATE_DIR = join(work, 'openclaw-own-state')
const { loadOpenClaw } = await import('./openclaw/load.mjs')
const oc = await loadOpenClaw()
const { SessionState } = createRequire(import.meta.url)(root)
const fixtureDir = join(root, 'crates/core/tests/fixtures')
const fixtureReport = JSON.parse(readFileSync(join(fixtureDir, 'openclaw-2026.9.6.json'), 'utf8'))

// An hour after OpenClaw's last write to the fixture: the store's retention (30 days) keeps
// OpenClaw's rows, as it would in a gateway that moved to the store that day.
const T = Math.max(...Object.values(fixtureReport.rows).flat().map((r) => r.updated_at ?? r.occurred_at)) + 3_600_000
const MAIN = 'agent:main:main'
const LOCAL = 'agent:main:claude:adopted-local'
const REMOTE = 'agent:main:claude:adopted-remote'
const THREAD = '0d9e8f7a-6b5c-4d3e-8f21-a0b1c2d3e4f5'
const human = (text) => JSON.stringify({ type: 'user', message: { role: 'user', content: text } }) + '\n'
const item = (uuid, text) => ({ uuid, type: 'user', message: { role: 'user', content: text } })

let passed = 0
let failed = 0
function check(name, got, want) {
  if (isDeepStrictEqual(got, want)) {
    passed++
    console.log(`ok   ${name}`)
  } else {
    failed++
    console.log(`FAIL ${name}\n  got:  ${JSON.stringify(got)}\n  want: ${JSON.stringify(want)}`)
  }
}

/** The store's part: adopt, scan, check; returns what OpenClaw must then read. */
function runStore(file, dir) {
  const now = { t: T }
  const errors = []
  const s = new SessionState(file, { clock: () => now.t, onError: (e) => errors.push(e.code) })
  const transcript = join(dir, `${THREAD}.jsonl`)
  appendFileSync(transcript, human('history'))
  const adopted = s.adopt(LOCAL, { source: 'claude', transcriptPath: transcript })
  s.watch(MAIN, LOCAL)
  appendFileSync(transcript, human('typed in the terminal'))
  now.t = T + 1
  const scanned = s.scanUpstream().filter((e) => e.sessionKey === LOCAL)
  now.t = T + 2
  s.adopt(REMOTE, { source: 'claude', remoteId: THREAD, hostId: 'node:n1' })
  now.t = T + 3
  s.checkUpstream(REMOTE, { found: true, items: [item('u-1', 'old')] })
  now.t = T + 4
  s.checkUpstream(REMOTE, { found: true, items: [item('u-1', 'old'), item('u-2', 'new')] })
  s.close()
  const common = { agentId: 'main', catalogId: 'claude', threadId: THREAD, upstreamKind: 'claude-cli' }
  return {
    errors,
    events: [adopted, ...scanned],
    local: {
      sessionKey: LOCAL,
      ...common,
      hostId: 'gateway:local',
      upstreamRef: { filePath: transcript },
      marker: { offset: statSync(transcript).size },
      lastScannedAt: T + 1,
      createdAt: T,
      updatedAt: T + 1,
    },
    remote: {
      sessionKey: REMOTE,
      ...common,
      hostId: 'node:n1',
      upstreamRef: { nodeId: 'n1', threadId: THREAD },
      marker: { uuid: 'u-2' },
      lastScannedAt: T + 4,
      createdAt: T + 2,
      updatedAt: T + 4,
    },
  }
}

// Key order as OpenClaw builds its link objects.
const ordered = (l) => ({
  sessionKey: l.sessionKey,
  agentId: l.agentId,
  catalogId: l.catalogId,
  hostId: l.hostId,
  threadId: l.threadId,
  upstreamKind: l.upstreamKind,
  upstreamRef: l.upstreamRef,
  marker: l.marker,
  ...(l.lastScannedAt === undefined ? {} : { lastScannedAt: l.lastScannedAt }),
  createdAt: l.createdAt,
  updatedAt: l.updatedAt,
})

// 1. OpenClaw's file.
{
  const stateDir = join(work, 'openclaw-file')
  mkdirSync(join(stateDir, 'state'), { recursive: true, mode: 0o700 })
  const file = join(stateDir, 'state', 'openclaw.sqlite')
  copyFileSync(join(fixtureDir, 'openclaw-2026.9.6.sqlite'), file)
  const want = runStore(file, stateDir)
  check("openclaw file: the store reported no error", want.errors, [])
  let report
  try {
    report = JSON.parse(execFileSync(process.execPath, [join(root, 'scripts/openclaw/read.mjs'), stateDir], { encoding: 'utf8' }))
  } catch (e) {
    check('openclaw file: OpenClaw opens the file', String(e.stderr ?? e), 'no error')
  }
  if (report) {
    check('openclaw file: OpenClaw opens the file', report.userVersion, 18)
    const byKey = Object.fromEntries(report.upstreamLinks.map((l) => [l.sessionKey, l]))
    check('openclaw file: readSessionUpstreamLink of the adopted transcript', byKey[LOCAL], ordered(want.local))
    check('openclaw file: readSessionUpstreamLink of the adopted remote session', byKey[REMOTE], ordered(want.remote))
    const theirs = Object.fromEntries(fixtureReport.upstreamLinks.map((l) => [l.sessionKey, l]))
    const ocRemote = 'agent:main:claude:fixture-remote'
    check("openclaw file: OpenClaw's own remote link is untouched", byKey[ocRemote], theirs[ocRemote])
    // OpenClaw's local link is watched and its transcript is absent here: one failed scan
    // is counted in the store's column; OpenClaw's columns keep their values.
    const ocLocal = 'agent:main:claude:fixture-local'
    check("openclaw file: OpenClaw's own local link keeps its marker", byKey[ocLocal], {
      ...theirs[ocLocal],
      updatedAt: T + 1,
    })
    check(
      'openclaw file: listWatchedSessionUpstreamLinks',
      (report.watchedUpstreamLinks.claude ?? []).map((l) => l.sessionKey),
      ['agent:main:claude:adopted-local', ocLocal, ocRemote],
    )
    const since = report.eventsSince.find((e) => e.sessionKey === LOCAL)
    check(
      "openclaw file: listSessionStateEventsSince reads the store's events",
      since?.events.map((e) => [e.sequence, e.kind, e.actorType, e.summary]),
      want.events.map((e) => [e.sequence, e.kind, e.actorType, e.summary]),
    )
    check('openclaw file: the events continue OpenClaw\'s sequence', want.events.map((e) => e.sequence), [14, 15])
  }
}

// 2. A fresh file, read through OpenClaw's functions that take a database handle.
{
  const dir = join(work, 'fresh')
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'session-state.sqlite')
  const want = runStore(file, dir)
  check('fresh file: the store reported no error', want.errors, [])
  const { DatabaseSync } = await import('node:sqlite')
  const db = new DatabaseSync(file)
  const rows = db.prepare('SELECT * FROM session_upstream_links ORDER BY session_key').all()
  check(
    'fresh file: rowToSessionUpstreamLink of every row',
    rows.map((r) => oc.upstreamLinks.rowToSessionUpstreamLink(r)),
    [ordered(want.local), ordered(want.remote)],
  )
  check(
    'fresh file: listWatchedSessionUpstreamLinksInDatabase',
    oc.upstreamLinks.listWatchedSessionUpstreamLinksInDatabase(db),
    [ordered(want.local)],
  )
  db.close()
}

// 3. Rows OpenClaw writes that the store would not write itself.
{
  const KEY = 'agent:main:subagent:long-history'
  const long = `Compacted the conversation.\nKept: the plan, the open questions.\r\nDropped: ${'tool output '.repeat(22)}\nDone.`
  const big = { notes: 'n'.repeat(6000), list: [1, 2, 3] }
  const kinds = ['created', 'child_spawned', 'human_direct_message', 'goal_changed', 'run_completed', 'run_failed', 'compacted', 'adopted', 'upstream_missing']
  const at = T - 60_000
  kinds.forEach((kind, i) => {
    oc.sessionState.recordSessionStateEvent(
      {
        sessionKey: KEY,
        agentId: 'main',
        kind,
        actorType: i % 3 === 0 ? 'system' : i % 3 === 1 ? 'agent' : 'human',
        ...(i % 3 === 1 ? { actorId: 'agent:main:main' } : {}),
        ...(i % 2 === 0 ? { runId: `run-${i}` } : {}),
        summary: i % 2 === 0 ? long : `${kind}\u2028second line`,
        ...(i % 3 === 2 ? { payload: big } : i % 3 === 1 ? { payload: { step: i } } : {}),
      },
      { now: at + i },
    )
  })
  const ocFile = join(process.env.OPENCLAW_STATE_DIR, 'state', 'openclaw.sqlite')
  oc.stateDbCache.closeOpenClawStateDatabase()
  // What a later OpenClaw could write: a kind this version does not know, a payload array.
  {
    const { DatabaseSync } = await import('node:sqlite')
    const db = new DatabaseSync(ocFile)
    const insert = db.prepare(
      `INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json)
       VALUES (?, 'main', ?, ?, NULL, ?, ?, ?, ?)`,
    )
    const a = insert.run(KEY, 'session_forked', 'agent', 'run-x', at + 20, 'forked into\ntwo', '{"branch":2}')
    const b = insert.run(KEY, 'goal_changed', 'human', null, at + 21, 'goal set', '["a","b"]')
    db.prepare('UPDATE session_state_heads SET last_sequence = ? WHERE session_key = ? AND agent_id = ?').run(Number(b.lastInsertRowid), KEY, 'main')
    void a
    db.close()
  }
  const theirs = oc.sessionState.listSessionStateEventsSince(KEY, 'main', 0)
  oc.stateDbCache.closeOpenClawStateDatabase()
  const oneLine = (s) => [...s.replace(/\r\n|[\r\n\u2028\u2029]/g, ' ')].slice(0, 240).join('')
  const view = (events, summary = (s) => s) =>
    events.map((e) => ({
      sequence: e.sequence,
      kind: e.kind,
      actorType: e.actorType,
      actorId: e.actorId,
      runId: e.runId,
      payload: e.payload,
      summary: summary(e.summary),
    }))
  const expected = view(theirs.events, oneLine)
  check('foreign rows: OpenClaw answers all 11 rows', theirs.events.length, 11)
  const dest = join(work, 'foreign-import', 'session-state.sqlite')
  mkdirSync(dirname(dest), { recursive: true })
  execFileSync(process.execPath, [join(root, 'bin/session-awareness.js'), 'import', ocFile, dest], { encoding: 'utf8' })
  for (const [name, file] of [
    ["OpenClaw's file", ocFile],
    ['the imported file', dest],
  ]) {
    const errors = []
    const s = new SessionState(file, { clock: () => T, onError: (e) => errors.push(e.code) })
    const all = s.changesSince(KEY, 0)
    check(`foreign rows, ${name}: changesSince answers every row OpenClaw answers`, view(all.stateChanges.events), expected)
    check(`foreign rows, ${name}: nothing truncated, no gap`, [all.stateChanges.truncated, all.stateChanges.historyGap, all.stateVersion], [false, false, theirs.events.at(-1).sequence])
    check(
      `foreign rows, ${name}: what each row differs in`,
      all.stateChanges.events.map((e) => e.foreign ?? []),
      [...kinds.map((_, i) => (i % 3 === 2 ? ['summary', 'payload'] : ['summary'])), ['kind', 'summary'], ['payload']],
    )
    check(`foreign rows, ${name}: the array payload is kept as text`, all.stateChanges.events.at(-1).payloadText, '["a","b"]')
    const pages = []
    let after = 0
    for (;;) {
      const page = s.changesSince(KEY, after, { limit: 4 }).stateChanges
      pages.push(page.events.map((e) => e.sequence))
      if (!page.truncated) break
      after = page.events.at(-1).sequence
    }
    check(`foreign rows, ${name}: pages of 4 follow truncated to the end`, pages.flat(), expected.map((e) => e.sequence))
    check(`foreign rows, ${name}: no notice and no error`, [s.peek('agent:main:main'), errors], [[], []])
    s.close()
  }
}

rmSync(work, { recursive: true, force: true })
console.log(`openclaw check (OpenClaw ${oc.version}, Node ${process.versions.node}): ${passed} passed, ${failed} failed in ${((Date.now() - started) / 1000).toFixed(1)} s`)
process.exit(failed === 0 ? 0 : 1)
