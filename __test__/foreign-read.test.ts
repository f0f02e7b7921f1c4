// semantics.md#reading-foreign-events: every stored event row of a session is answered, in
// sequence order, by changesSince, changesSinceAsync, the OpenClaw adapter's
// listSessionStateEventsSince and readEvents; a row the store would not write comes back in
// one safe form. Rows are written by hand while no store of this process has the file open.
import * as childProcess from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, readEvents, type ChangeEvent, type ForeignStateEvent, type UnknownKind } from '../lib'
import * as openclaw from '../lib/openclaw'
import { T0, errorSink, fixture, human, must, rawDb, wakeSink } from './helpers'

/** A kind as stored that this version does not know (its type is a marker: lib/types.ts). */
const unknownKind = (kind: string): UnknownKind => kind as UnknownKind

const fx = fixture('foreign-read')
const W = 'agent:main:main'
const T = 'agent:main:subagent:t'

/** One foreign row per line: [kind, actor type, actor id, run id, occurred_at, summary, payload]. */
const ROWS: Array<[string | null, string | null, string | null, string | null, number | string | null, string | null, string | null]> = [
  ['compacted', 'system', null, null, T0, `first line\nsecond line\r\n${'x'.repeat(300)}`, null],
  ['session_forked', 'agent', W, 'run-9', T0, 'forked', '{"branch":2}'],
  ['goal_changed', 'robot', '', null, T0, 'goal', '[1,2]'],
  ['goal_changed', 'human', null, null, 'yesterday', 'when?', '{not json'],
  ['run_completed', 'system', null, null, T0 + 0.5, 'ok', ` {"big":"${'y'.repeat(5000)}"}`],
  [null, 'human', null, null, T0, null, '"text"'],
]

/** OpenClaw's older generations: tables that hold what a STRICT table refuses. */
const LOOSE_SCHEMA = fs.readFileSync(path.join(__dirname, '../crates/core/tests/fixtures/loose-schema.sql'), 'utf8')

/** The file: a cursor W -> T, T's first event (1), the foreign rows (2..7), a live event (8). */
function build(): string {
  const file = fx.file()
  const loose = rawDb(file)
  loose.exec(LOOSE_SCHEMA)
  loose.close()
  const s = new SessionState(file, { clock: () => T0 })
  expect(s.watch(W, T)).toBe(true)
  must(s.record({ ...human(T), summary: 'typed' }))
  s.drain(W)
  s.close()
  const db = rawDb(file)
  const insert = db.prepare(
    `INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json)
     VALUES ('${T}', 'main', ?, ?, ?, ?, ?, ?, ?)`,
  )
  for (const row of ROWS) insert.run(...row)
  db.prepare(`UPDATE session_state_heads SET last_sequence = 7 WHERE session_key = '${T}'`).run()
  db.close()
  return file
}

const base = { sessionKey: T, agentId: 'main' }
/** What a read answers for rows 2..7, in order. */
const FOREIGN: ForeignStateEvent[] = [
  {
    sequence: 2,
    ...base,
    kind: 'compacted',
    actorType: 'system',
    occurredAt: T0,
    summary: `first line second line ${'x'.repeat(217)}`,
    foreign: ['summary'],
  },
  {
    sequence: 3,
    ...base,
    kind: unknownKind('session_forked'),
    actorType: 'agent',
    actorId: W,
    runId: 'run-9',
    occurredAt: T0,
    summary: 'forked',
    payload: { branch: 2 },
    foreign: ['kind'],
  },
  {
    sequence: 4,
    ...base,
    kind: 'goal_changed',
    actorType: 'robot',
    occurredAt: T0,
    summary: 'goal',
    payloadText: '[1,2]',
    foreign: ['actorType', 'actorId', 'payload'],
  },
  {
    sequence: 5,
    ...base,
    kind: 'goal_changed',
    actorType: 'human',
    occurredAt: 0,
    summary: 'when?',
    payloadText: '{not json',
    foreign: ['occurredAt', 'payload'],
  },
  {
    sequence: 6,
    ...base,
    kind: 'run_completed',
    actorType: 'system',
    occurredAt: T0,
    summary: 'ok',
    payload: { big: 'y'.repeat(5000) },
    foreign: ['occurredAt', 'payload'],
  },
  {
    sequence: 7,
    ...base,
    kind: unknownKind(''),
    actorType: 'human',
    occurredAt: T0,
    summary: '',
    payloadText: '"text"',
    foreign: ['kind', 'summary', 'payload'],
  },
]

describe('foreign event rows are read, never hidden', () => {
  test('changesSince answers every row in order, each foreign one in its safe form', () => {
    const file = build()
    const errors = errorSink()
    const wakes = wakeSink()
    const s = fx.open(file, { clock: () => T0, onError: errors.onError, wake: wakes.wake })
    const live = must(s.record({ ...human(T), summary: 'after' }))
    expect(live.sequence).toBe(8)
    const { stateVersion, stateChanges } = s.changesSince(T, 0)
    expect(stateVersion).toBe(8)
    expect(stateChanges.events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    expect(stateChanges.events.slice(1, 7)).toStrictEqual(FOREIGN)
    expect(stateChanges.events[7]).toStrictEqual(live)
    expect(stateChanges.events[0]?.foreign).toBeUndefined()
    expect(stateChanges).toMatchObject({ truncated: false, historyGap: false, earliestAvailableSequence: 1 })
    // Foreign rows never notify: the one live event gives the one notice, naming L = 1.
    expect(s.peek(W).map((n) => n.changesSince)).toEqual([1])
    expect(errors.codes()).toEqual([])
  })

  test('limit and truncated count foreign rows like any other', () => {
    const s = fx.open(build(), { clock: () => T0 })
    const pages: number[][] = []
    let after = 0
    for (;;) {
      const page = s.changesSince(T, after, { limit: 2 }).stateChanges
      pages.push(page.events.map((e) => e.sequence))
      if (!page.truncated) break
      after = must(page.events.at(-1)).sequence
    }
    expect(pages).toEqual([
      [1, 2],
      [3, 4],
      [5, 6],
      [7],
    ])
  })

  test('a consumer tells the two apart by `foreign`', () => {
    const s = fx.open(build(), { clock: () => T0 })
    const kinds = s.changesSince(T, 0).stateChanges.events.map((e: ChangeEvent) =>
      e.foreign === undefined ? `known:${e.kind}` : `foreign:${e.kind}:${e.foreign.join('+')}`,
    )
    expect(kinds).toEqual([
      'known:human_direct_message',
      'foreign:compacted:summary',
      'foreign:session_forked:kind',
      'foreign:goal_changed:actorType+actorId+payload',
      'foreign:goal_changed:occurredAt+payload',
      'foreign:run_completed:occurredAt+payload',
      'foreign::kind+summary+payload',
    ])
  })

  test('changesSinceAsync answers the same', async () => {
    const file = build()
    const s = fx.open(file, { clock: () => T0 })
    expect(await s.changesSinceAsync(T, 1)).toStrictEqual(s.changesSince(T, 1))
    expect((await s.changesSinceAsync(T, 1)).stateChanges.events).toStrictEqual(FOREIGN)
  })

  test("the adapter's listSessionStateEventsSince answers the rows in OpenClaw's shape", () => {
    const file = build()
    const store = fx.open(file, { clock: () => T0 })
    openclaw.configureSessionState({ store })
    try {
      const got = openclaw.listSessionStateEventsSince(T, 'main', 1)
      expect(got.events.map((e) => [e.sequence, e.kind, e.actorType, e.summary])).toEqual(
        FOREIGN.map((e) => [e.sequence, e.kind, e.actorType, e.summary]),
      )
      // OpenClaw leaves out a payload that is not a JSON object, and has no `foreign`.
      expect(got.events.map((e) => e.payload)).toEqual(FOREIGN.map((e) => e.payload))
      expect(got.events.some((e) => 'foreign' in e || 'payloadText' in e)).toBe(false)
      expect([got.truncated, got.historyGap]).toEqual([false, false])
    } finally {
      openclaw.closeSessionState()
    }
  })

  test('readEvents answers the same rows as changesSince, in the same form', () => {
    const file = build()
    const read = readEvents(file, T, { since: 1 })
    expect(read.events).toStrictEqual(FOREIGN)
    expect([read.stateVersion, read.historyGap]).toEqual([7, false])
    const s = fx.open(file, { clock: () => T0 })
    expect(readEvents(file, T).events).toStrictEqual(s.changesSince(T, 0).stateChanges.events)
  })

  test('the events command prints foreign rows with what they differ in', () => {
    const file = build()
    const cli = require.resolve('../bin/session-awareness.js')
    const json = JSON.parse(
      childProcess.execFileSync(process.execPath, [cli, 'events', file, T, '--since', '1', '--json'], { encoding: 'utf8' }),
    )
    expect(json.events).toStrictEqual(FOREIGN)
    const text = childProcess.execFileSync(process.execPath, [cli, 'events', file, T, '--since', '3'], { encoding: 'utf8' })
    expect(text).toContain('"goal"  [1,2]  (foreign: actorType, actorId, payload)')
    expect(text).toContain('(foreign: kind, summary, payload)')
  })
})
