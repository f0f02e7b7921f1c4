// OpenClaw's first schema generations through the package (semantics.md#storage): a state DB from before the
// provenance column, built from OpenClaw's own statements, is read by `inspect` without a
// change, then opened by the store, upgraded additively, and used; OpenClaw's older writer
// still inserts rows that omit the columns it never knew.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

import { inspectDatabase } from '../lib'
import { Clock, MINUTE, T0, codeOf, fixture, rawDb } from './helpers'

const CLI = path.join(__dirname, '..', 'bin', 'session-awareness.js')
const SCHEMAS = path.join(__dirname, '..', 'crates', 'core', 'tests', 'fixtures', 'openclaw-schema')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:child'
const GROUP = 'agent:main:telegram:group:ops'
const SENTINEL = `ambient-group-watch:${Buffer.from(MAIN, 'utf8').toString('hex')}`

const fx = fixture('generations')

/** A file of `generation` with two sessions, a pending explicit watch and an ambient one. */
function build(file: string, generation: string) {
  const db = rawDb(file)
  db.exec(fs.readFileSync(path.join(SCHEMAS, generation), 'utf8'))
  db.exec('PRAGMA user_version = 3')
  const event = db.prepare(
    'INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, occurred_at, summary) ' +
      "VALUES (?, 'main', ?, ?, ?, ?)",
  )
  event.run(CHILD, 'child_spawned', 'agent', T0, 'spawned')
  event.run(CHILD, 'goal_changed', 'human', T0 + MINUTE, 'goal changed')
  event.run(GROUP, 'human_direct_message', 'human', T0 + 2 * MINUTE, 'human message via telegram')
  const head = db.prepare(
    "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, updated_at) VALUES (?, 'main', ?, ?)",
  )
  head.run(CHILD, 2, T0 + MINUTE)
  head.run(GROUP, 3, T0 + 2 * MINUTE)
  const cursor = db.prepare(
    'INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, ' +
      'notified_sequence, material_sequence, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
  )
  cursor.run(MAIN, CHILD, 1, 2, 2, T0 + MINUTE)
  cursor.run(MAIN, GROUP, 0, 3, 3, T0 + 2 * MINUTE)
  cursor.run(SENTINEL, GROUP, 3, 3, 3, T0 + 3 * MINUTE)
  db.close()
}

function cli(...args: string[]) {
  const out = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}

describe.each(['1-loose.sql', '2-strict.sql'])('a file of generation %s', (generation) => {
  test('inspect reads it as the store will, and leaves it as it was', () => {
    const file = fx.file()
    build(file, generation)
    const bytes = fs.readFileSync(file).toString('base64')
    const out = cli('inspect', file, '--json')
    expect(out.stderr).toBe('')
    expect(out.status).toBe(0)
    const report = JSON.parse(out.stdout)
    expect(report).toStrictEqual(inspectDatabase(file))
    expect(report.counts).toStrictEqual({ events: 3, heads: 2, cursors: 3, upstreamLinks: 0 })
    expect(report.missingTables).toStrictEqual(['session_upstream_links'])
    expect(
      report.cursors.map((c: Record<string, unknown>) => [c.watcherKey, c.targetKey, c.provenance, c.pending]),
    ).toStrictEqual([
      [MAIN, CHILD, 'explicit', true],
      [MAIN, GROUP, 'ambient-group', true],
      [SENTINEL, GROUP, 'explicit', false],
    ])
    expect(report.pendingNotices.map((n: Record<string, unknown>) => [n.targetKey, n.changesSince])).toStrictEqual([
      [CHILD, 1],
      [GROUP, 0],
    ])
    expect(fs.readFileSync(file).toString('base64')).toBe(bytes)
  })

  test('the store opens it, records and notifies, and an older writer still inserts', () => {
    const file = fx.file()
    build(file, generation)
    const now = new Clock(T0 + 10 * MINUTE)
    const errors: unknown[] = []
    const state = fx.open(file, { clock: now.fn, onError: (e) => errors.push(e) })
    state.sweep()
    expect(state.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toStrictEqual([
      [CHILD, 1],
      [GROUP, 0],
    ])
    const event = state.record({
      sessionKey: CHILD, kind: 'human_direct_message', actorType: 'human', summary: 'human message via web',
    })
    expect(event?.sequence).toBe(4)
    expect(state.record({ sessionKey: CHILD, kind: 'compacted', actorType: 'system', summary: 'compacted' })?.sequence).toBe(5)
    expect(state.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toStrictEqual([[CHILD, 2]])
    expect(state.changesSince(CHILD, 0).stateChanges.events.map((e) => e.sequence)).toStrictEqual([1, 2, 4, 5])
    expect(errors).toStrictEqual([])
    state.close()

    const db = rawDb(file)
    try {
      expect(db.pragma('user_version', { simple: true })).toBe(3)
      db.prepare(
        'INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, updated_at) VALUES (?, ?, ?)',
      ).run('agent:main:subagent:legacy', CHILD, T0)
      const rows = db
        .prepare(
          'SELECT watcher_session_key AS w, target_session_key AS t, last_seen_sequence AS l, ' +
            'notified_sequence AS n, material_sequence AS m, provenance AS p, watcher_store_path AS s ' +
            'FROM session_watch_cursors ORDER BY w, t',
        )
        .all()
      expect(rows).toStrictEqual([
        { w: MAIN, t: CHILD, l: 4, n: 4, m: 4, p: 'explicit', s: null },
        { w: MAIN, t: GROUP, l: 3, n: 3, m: 3, p: 'ambient-group', s: null },
        { w: 'agent:main:subagent:legacy', t: CHILD, l: 0, n: 0, m: 0, p: 'explicit', s: null },
        { w: SENTINEL, t: GROUP, l: 3, n: 3, m: 3, p: 'explicit', s: null },
      ])
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
    } finally {
      db.close()
    }
  })
})

test('a table of the same name that no generation wrote: the constructor throws ERR_FOREIGN_SCHEMA, the file is left as it was', () => {
  const file = fx.file()
  const db = rawDb(file)
  db.exec(
    'CREATE TABLE session_watch_cursors (session_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL DEFAULT 0, ' +
      "updated_at TEXT NOT NULL); INSERT INTO session_watch_cursors VALUES ('s1', 4, '2026-11-30')",
  )
  db.close()
  const bytes = fs.readFileSync(file).toString('base64')
  expect(codeOf(() => fx.open(file))).toBe('ERR_FOREIGN_SCHEMA')
  expect(fs.readFileSync(file).toString('base64')).toBe(bytes)
})
