// Bad input to the best-effort methods, record, adopt and checkUpstream: each member of their
// input × every bad value of the matrix. They never throw: a refusal is null with exactly one
// onError call (ERR_INVALID_ARG), and changes nothing stored. Accepted values are listed with
// the exact event they store.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, type StateEvent } from '../../lib'
import { BAD, DAY, LONE, LONE_STORED, NOW, QUOTED, T, W, matrix, type BadName, type Param } from './bad-values'
import { codeOf, tempDir, type CodedError } from './support'

const base = { sessionKey: T, kind: 'goal_changed', actorType: 'human', summary: 's' }
const with_ = (member: string) => (s: SessionState, v: unknown) => s.record({ ...base, [member]: v } as never)

/** The event a seeded store returns for `base` (its fourth), with `changes`. */
function stored(changes: Partial<StateEvent> = {}) {
  return (r: unknown) =>
    expect(r).toStrictEqual({
      sequence: 4,
      sessionKey: T,
      agentId: 'main',
      kind: 'goal_changed',
      actorType: 'human',
      occurredAt: NOW,
      summary: 's',
      ...changes,
    })
}
const same = stored()

/** An optional identifier: '' is absent; any string up to 1 KiB is kept (lone surrogate as U+FFFD). */
function identifier(member: 'sessionId' | 'actorId' | 'runId'): Param {
  return {
    call: `record({${member}})`,
    run: with_(member),
    ok: { undefined: same, null: same, empty: same, lone: stored({ [member]: LONE_STORED }), quoted: stored({ [member]: QUOTED }) },
  }
}

/** The key is kept: a repeat with it returns the first event and stores nothing. */
function dedupedBy(key: string) {
  return (r: unknown, s: SessionState) => {
    same(r)
    expect(s.record({ ...base, summary: 'again', dedupeKey: key } as never)).toStrictEqual(r)
    expect(s.stateVersion(T)).toBe(4)
  }
}

const params: Param[] = [
  { call: 'record(input)', run: (s, v) => s.record(v as never), ok: {} },
  {
    call: 'record({sessionKey})',
    run: with_('sessionKey'),
    ok: { lone: stored({ sessionKey: LONE_STORED }), quoted: stored({ sessionKey: QUOTED }) },
  },
  { call: 'record({agentId})', run: with_('agentId'), ok: { undefined: same, null: same } },
  identifier('sessionId'),
  identifier('actorId'),
  identifier('runId'),
  {
    call: 'record({dedupeKey})',
    run: with_('dedupeKey'),
    ok: { undefined: same, null: same, empty: same, lone: dedupedBy(LONE), quoted: dedupedBy(QUOTED) },
  },
  { call: 'record({kind})', run: with_('kind'), ok: {} },
  { call: 'record({actorType})', run: with_('actorType'), ok: {} },
  {
    call: 'record({summary})',
    run: with_('summary'),
    // One line of at most 240 scalar values: the documented clamp.
    ok: {
      empty: stored({ summary: '' }),
      mib: stored({ summary: 'k'.repeat(240) }),
      lone: stored({ summary: LONE_STORED }),
      quoted: stored({ summary: 'agent:main:say "hi" bye' }),
    },
  },
  { call: 'record({payload})', run: with_('payload'), ok: { undefined: same, null: same, object: stored({ payload: {} }) } },
  {
    call: 'record({payload: {x}})',
    run: (s, v) => s.record({ ...base, payload: { x: v } } as never),
    ok: {
      undefined: stored({ payload: {} }),
      null: stored({ payload: { x: null } }),
      number: stored({ payload: { x: 42 } }),
      object: stored({ payload: { x: {} } }),
      array: stored({ payload: { x: ['x'] } }),
      boolean: stored({ payload: { x: true } }),
      empty: stored({ payload: { x: '' } }),
      lone: stored({ payload: { x: LONE_STORED } }),
      neg: stored({ payload: { x: -1 } }),
      big: stored({ payload: { x: 2 ** 53 } }),
      quoted: stored({ payload: { x: QUOTED } }),
    },
  },
  {
    call: 'record({occurredAt})',
    run: with_('occurredAt'),
    // Floored and clamped to [now - 24h, now]; missing or non-finite is now.
    ok: {
      undefined: same,
      null: same,
      number: stored({ occurredAt: NOW - DAY }),
      nan: same,
      inf: same,
      ninf: same,
      neg: stored({ occurredAt: NOW - DAY }),
      big: same,
    },
  },
  // ['x'] names a bare watcher: dropped, as are '' and the target itself.
  { call: 'record({watchers})', run: with_('watchers'), ok: { undefined: same, null: same, array: same } },
  {
    call: 'record({watchers: [w]})',
    run: (s, v) => s.record({ ...base, watchers: [v] } as never),
    ok: {
      lone: (r: unknown, s: SessionState) => {
        same(r)
        expect(s.peek(LONE).map((n) => [n.watcherKey, n.changesSince])).toEqual([[LONE_STORED, 0]])
      },
      quoted: (r: unknown, s: SessionState) => {
        same(r)
        expect(s.peek(QUOTED).map((n) => n.changesSince)).toEqual([0])
      },
    },
  },
  { call: 'record({onlyIfWatched})', run: with_('onlyIfWatched'), ok: { undefined: same, null: same, boolean: same } },
]

/** The event `adopt(T, { source: 'claude' })` stores on a seeded store, with `changes`. */
function adopted(changes: Partial<StateEvent> = {}) {
  return (r: unknown) =>
    expect(r).toStrictEqual({
      sequence: 4,
      sessionKey: T,
      agentId: 'main',
      kind: 'adopted',
      actorType: 'system',
      occurredAt: NOW,
      summary: 'adopted from claude',
      payload: { source: 'claude' },
      ...changes,
    })
}
const link = (member: string) => (s: SessionState, v: unknown) => s.adopt(T, { source: 'claude', [member]: v } as never)
const asIs = adopted()

const upstream: Param[] = [
  {
    call: 'adopt(sessionKey)',
    run: (s, v) => s.adopt(v as string, { source: 'claude' }),
    ok: { lone: adopted({ sessionKey: LONE_STORED }), quoted: adopted({ sessionKey: QUOTED }) },
  },
  { call: 'adopt(link)', run: (s, v) => s.adopt(T, v as never), ok: {} },
  {
    call: 'adopt({source})',
    run: (s, v) => s.adopt(T, { source: v } as never),
    // The source names the upstream in summaries: one line, like any summary.
    ok: {
      lone: adopted({ summary: `adopted from ${LONE_STORED}`, payload: { source: LONE_STORED } }),
      quoted: adopted({ summary: 'adopted from agent:main:say "hi" bye', payload: { source: QUOTED } }),
    },
  },
  // A path is taken as given; a missing or unreadable file is a failed scan, reported later.
  {
    call: 'adopt({transcriptPath})',
    run: link('transcriptPath'),
    ok: { undefined: asIs, null: asIs, empty: asIs, mib: asIs, lone: asIs, quoted: asIs },
  },
  {
    call: 'adopt({remoteId})',
    run: link('remoteId'),
    // The remote id is kept in the event's payload, so it counts against its 4 KiB.
    ok: {
      undefined: asIs,
      null: asIs,
      empty: asIs,
      lone: adopted({ payload: { source: 'claude', remoteId: LONE_STORED } }),
      quoted: adopted({ payload: { source: 'claude', remoteId: QUOTED } }),
    },
  },
  { call: 'adopt({agentId})', run: link('agentId'), ok: { undefined: asIs, null: asIs } },
  // T has no upstream link: an accepted check changes nothing and returns null, silently.
  { call: 'checkUpstream(sessionKey)', run: (s, v) => s.checkUpstream(v as string, { found: 'unknown' }), ok: { lone: null, quoted: null } },
  { call: 'checkUpstream(result)', run: (s, v) => s.checkUpstream(T, v as never), ok: {} },
  { call: 'checkUpstream({found})', run: (s, v) => s.checkUpstream(T, { found: v } as never), ok: {} },
]

matrix('bad input to record, adopt and checkUpstream', [...params, ...upstream], 'record')

describe('with strict: true, record throws what it would report', () => {
  let dir = ''
  beforeAll(() => {
    dir = tempDir('strict')
  })
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  const refusedKeys: BadName[] = ['undefined', 'null', 'number', 'empty', 'mib', 'nan', 'cyclic', 'bigint']
  test.each(refusedKeys)('sessionKey <- %s throws ERR_INVALID_ARG, onError stays silent', (name) => {
    const errors: CodedError[] = []
    const s = new SessionState(path.join(dir, `${name}.sqlite`), { strict: true, onError: (e) => errors.push(e) })
    try {
      expect(codeOf(() => s.record({ ...base, sessionKey: BAD[name] } as never))).toBe('ERR_INVALID_ARG')
      expect(s.record({ ...base, watchers: [W] } as never)?.sequence).toBe(1)
      expect(errors).toEqual([])
    } finally {
      s.close()
    }
  })
})
