// semantics.md#storage: rows the store would never write itself are inert. Hostile rows are written with
// better-sqlite3 while no store has the file open (its handle closed before the store opens);
// then every JS-visible path runs over them: no notice, no wake, no error, each row unchanged
// byte for byte, until retention deletes it by the ordinary rules, and no prune adds a head.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, encodeNoticeContextKey } from '../../lib'
import { ROOT, tempDir, withRaw, type CodedError } from './support'

const CLI = path.join(ROOT, 'bin', 'session-awareness.js')
const T0 = Date.UTC(2030, 0, 1)
const DAY = 24 * 60 * 60 * 1000
const W = 'agent:main:main'
const T = 'agent:main:t'

/** Cursor rows on T (head 1), each with a pending notice and one defect. */
const HOSTILE_CURSORS = [
  `('global', '${T}', 0, 1, 1, 'explicit', ${T0})`,
  `('', '${T}', 0, 1, 1, 'explicit', ${T0})`,
  `('${T}', '${T}', 0, 1, 1, 'explicit', ${T0})`,
  // An upper-case agent id: a bare watcher. (An unknown provenance is refused by the table's
  // CHECK; the core's foreign-row matrix covers it on older, loose tables.)
  `('agent:MAIN:w2', '${T}', 0, 1, 1, 'explicit', ${T0})`,
  `(CAST(x'6167656e743a6d61696e3a77ff' AS TEXT), '${T}', 0, 1, 1, 'explicit', ${T0})`,
  `('agent:main:w4', '${T}', 0, 50, 50, 'explicit', ${T0})`,
  `('${W}', 'global', 0, 1, 1, 'explicit', ${T0})`,
]

/** Event rows of T at sequences 2..5, the head moved along as a writer that keeps heads would. */
const HOSTILE_EVENTS = [
  `(2, NULL, '${T}', NULL, 'main', 'bogus', 'human', NULL, NULL, ${T0}, 's', NULL)`,
  `(3, NULL, '${T}', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ${T0}, CAST(x'61ff62' AS TEXT), NULL)`,
  `(4, NULL, '${T}', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ${T0}, 's', '{not json')`,
  `(5, NULL, '${T}', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ${T0}, printf('%.*c', 100000, 'x'), NULL)`,
]

/** Every column of every row of the hostile tables, as (type, hex): the stored bytes. */
function rawRows(file: string): string[] {
  return withRaw(file, (db) => {
    const cursors = db.prepare(
      `SELECT hex(watcher_session_key) || '|' || hex(target_session_key) || '|' ||
         typeof(last_seen_sequence) || last_seen_sequence || '|' || notified_sequence || '|' ||
         material_sequence || '|' || hex(provenance) || '|' || updated_at AS r
       FROM session_watch_cursors WHERE NOT (watcher_session_key = ? AND target_session_key = ?)
       ORDER BY rowid`,
    ).all(W, T)
    const events = db.prepare(
      `SELECT sequence || '|' || hex(kind) || '|' || hex(summary) || '|' || hex(coalesce(payload_json, '')) AS r
       FROM session_state_events WHERE sequence BETWEEN 2 AND 5 ORDER BY sequence`,
    ).all()
    return [...cursors, ...events].map((row) => String(row.r))
  })
}

function count(file: string, table: string): number {
  return withRaw(file, (db) => Number(db.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n))
}

function cli(...args: string[]) {
  const out = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}

let dir: string
let file: string

beforeEach(() => {
  dir = tempDir('foreign')
  file = path.join(dir, 'state.sqlite')
  const state = new SessionState(file, { clock: () => T0, strict: true })
  expect(state.watch(W, T)).toBe(true)
  expect(state.record({ sessionKey: T, kind: 'created', actorType: 'system', summary: 'c' })?.sequence).toBe(1)
  state.close()
  withRaw(file, (db) => {
    for (const row of HOSTILE_CURSORS) db.exec(
      `INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ${row}`,
    )
    for (const row of HOSTILE_EVENTS) db.exec(`INSERT INTO session_state_events VALUES ${row}`)
    db.exec(`UPDATE session_state_heads SET last_sequence = 5 WHERE session_key = '${T}'`)
    // A lone surrogate as a binding that encodes it naively stores it: the bytes ED A0 80, not
    // valid UTF-8. What better-sqlite3 stores for 'agent:main:\ud800' depends on the Node
    // version (under Node 24 the row came out a valid key), so the bytes are written as such.
    db.prepare(
      `INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (CAST(x'6167656e743a6d61696e3aeda080' AS TEXT), ?, 0, 1, 1, 'explicit', ?)`,
    ).run(T, T0)
  })
})

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

test('every JS path leaves hostile rows inert, and retention deletes them by the ordinary rules', async () => {
  const before = rawRows(file)
  expect(before).toHaveLength(HOSTILE_CURSORS.length + 1 + HOSTILE_EVENTS.length)
  const heads = count(file, 'session_state_heads')
  const errors: CodedError[] = []
  const wakes: string[] = []
  let now = T0
  const state = new SessionState(file, {
    clock: () => now,
    onError: (e) => errors.push(e),
    wake: (req) => wakes.push(req.sessionKey),
    wakeCoalesceMs: 0,
  })

  // record fan-out (and the first record's background prune)
  expect(state.record({ sessionKey: T, kind: 'goal_changed', actorType: 'human', summary: 'g' })?.sequence).toBe(6)
  const text =
    `Session "${T}" changed (other actor). Reconcile before acting: ` + `session_status sessionKey "${T}" changesSince 0.`
  expect(state.drain(W)).toEqual([
    { watcherKey: W, targetKey: T, changesSince: 0, text, contextKey: encodeNoticeContextKey(T) },
  ])
  for (const watcher of ['global', T, 'agent:MAIN:w2', 'agent:main:w4']) {
    expect(state.peek(watcher)).toEqual([])
    expect(state.drain(watcher)).toEqual([])
    expect(state.acknowledge(watcher, [T, 'global', W])).toBe(0)
  }
  expect(state.acknowledge(W, ['global', T])).toBe(0)
  expect(state.sweep()).toEqual({ notices: 0, prune: { eventsDeleted: 0, cursorsDeleted: 0 } })
  const asked: string[] = []
  expect(state.sweep({ watcherExists: (w) => (asked.push(w), true) })).toEqual({
    notices: 0,
    prune: { eventsDeleted: 0, cursorsDeleted: 0 },
  })
  expect(asked).toEqual([])
  expect(state.prune()).toEqual({ eventsDeleted: 0, cursorsDeleted: 0 })

  // Reads answer every stored row, the foreign ones in their safe form
  // (semantics.md#reading-foreign-events); sequences and versions stay exact.
  const changes = state.changesSince(T, 0)
  expect(changes.stateVersion).toBe(6)
  expect(changes.stateChanges.events.map((e) => [e.sequence, e.foreign ?? null])).toEqual([
    [1, null],
    [2, ['kind']],
    [3, ['summary']],
    [4, ['payload']],
    [5, ['summary']],
    [6, null],
  ])
  expect(changes.stateChanges.events.map((e) => e.summary.length)).toEqual([1, 1, 3, 1, 240, 1])
  expect(changes.stateChanges.truncated).toBe(false)
  expect(changes.stateChanges.historyGap).toBe(false)
  expect(state.changesSince(T, 0, { limit: 1 }).stateChanges).toMatchObject({ truncated: true })
  expect(state.changesSince(T, 1, { limit: 4 }).stateChanges.events.map((e) => e.sequence)).toEqual([2, 3, 4, 5])
  expect(state.stateVersions([{ sessionKey: T }, { sessionKey: 'global' }, { sessionKey: 'agent:main:w2' }])).toEqual([
    { sessionKey: T, agentId: 'main', stateVersion: 6 },
  ])
  state.resetSession('agent:main:other')
  state.deleteSession('agent:main:other')
  await new Promise((resolve) => setTimeout(resolve, 50))
  // The one notice was drained in the same turn it opened, before its wake was due: the drain
  // that emptied W's queue withdrew the wake (semantics.md#wake), and no hostile row woke anyone.
  expect(wakes).toEqual([])
  expect(errors.map((e) => e.code)).toEqual([])
  state.close()

  // The CLI reads the file without failing, and lists no notice for an inert cursor.
  const inspected = cli('inspect', file, '--json')
  expect(inspected.status).toBe(0)
  const report = JSON.parse(inspected.stdout)
  expect(report.pendingNotices).toEqual([])
  expect(cli('inspect', file).status).toBe(0)
  const events = cli('events', file, T, '--json')
  expect(events.status).toBe(0)
  expect(rawRows(file)).toEqual(before)

  // Retention: every row is older than 30 days; none survives, and no head is added.
  now = T0 + 31 * DAY
  const later = new SessionState(file, { clock: () => now, onError: (e) => errors.push(e) })
  expect(later.prune()).toEqual({ eventsDeleted: 6, cursorsDeleted: HOSTILE_CURSORS.length + 2 })
  later.close()
  expect(count(file, 'session_state_events')).toBe(0)
  expect(count(file, 'session_watch_cursors')).toBe(0)
  expect(count(file, 'session_state_heads')).toBe(heads)
  expect(errors.map((e) => e.code)).toEqual([])
})
