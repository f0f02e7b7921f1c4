// The bad values of the input matrix, and the matrix runner shared by the bad-input tests.
//
// Each parameter of each method lists the values it ACCEPTS, with the exact result expected
// (a clamp, a default, the value as stored); every other value must be refused with
// ERR_INVALID_ARG (record: null and exactly one onError call), leaving every stored row as it
// was.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, type SessionStateOptions } from '../../lib'
import { Snapshots, codeOf, tempDir, type CodedError } from './support'

function nest(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = { leaf: true }
  for (let i = 0; i < depth; i += 1) v = { a: v }
  return v
}
const cyclic: Record<string, unknown> = { name: 'loop' }
cyclic.self = cyclic

/** A lone high surrogate inside a qualified key: napi hands Rust U+FFFD in its place. */
export const LONE = 'agent:main:\uD800'
/** What LONE becomes once stored. */
export const LONE_STORED = 'agent:main:\uFFFD'
/** Quotes and a newline inside a qualified key. */
export const QUOTED = 'agent:main:say "hi"\nbye'
/** One MiB. */
export const MIB = 'k'.repeat(1024 * 1024)

/** Every bad value of the matrix, by name. */
export const BAD = {
  undefined: undefined,
  null: null,
  number: 42,
  object: {},
  array: ['x'],
  boolean: true,
  function: () => 'x',
  empty: '',
  mib: MIB,
  lone: LONE,
  nan: NaN,
  inf: Infinity,
  ninf: -Infinity,
  neg: -1,
  big: 2 ** 53 + 1,
  deep: nest(40),
  cyclic,
  bigint: BigInt(10),
  quoted: QUOTED,
} as const

export type BadName = keyof typeof BAD
export const BAD_NAMES = Object.keys(BAD) as BadName[]

/** An exact expected result, or a check of the result. */
export type Expect = unknown | ((result: unknown, s: SessionState) => void)
/** One parameter: how to call with a value, and the values it accepts. */
export interface Param {
  call: string
  run: (s: SessionState, v: unknown) => unknown
  ok: Partial<Record<BadName, Expect>>
  /** Refusals with another code than ERR_INVALID_ARG. */
  codes?: Partial<Record<BadName, string>>
}

/** Seeded sessions of every store the matrix uses. */
export const W = 'agent:main:main'
export const T = 'agent:main:subagent:target'
/** The clock of every matrix store (2030-01-01). */
export const NOW = Date.UTC(2030, 0, 1)
export const DAY = 24 * 60 * 60 * 1000

function check(expected: Expect, result: unknown, s: SessionState): void {
  if (typeof expected === 'function') (expected as (r: unknown, s: SessionState) => void)(result, s)
  else expect(result).toEqual(expected)
}

/**
 * Declares the tests of a list of parameters. Refusals run on one shared store whose rows
 * are compared before and after each call; accepted values run on a fresh store each, so no
 * expectation depends on the order of the table.
 */
export function matrix(title: string, params: Param[], kind: 'throws' | 'record'): void {
  let dir = ''
  let shared: SessionState
  let file = ''
  let n = 0
  const errors: CodedError[] = []
  let snapshots: Snapshots

  function open(f: string, sink: CodedError[], options: SessionStateOptions = {}): SessionState {
    return new SessionState(f, { clock: () => NOW, onError: (e) => sink.push(e), ...options })
  }

  /** A store with a little of everything: events, a cursor, a pending notice. */
  function seeded(f: string, sink: CodedError[]): SessionState {
    const s = open(f, sink)
    s.record({ sessionKey: T, kind: 'child_spawned', actorType: 'agent', actorId: W, summary: 'spawn', watchers: [W] })
    s.record({ sessionKey: T, kind: 'human_direct_message', actorType: 'human', summary: 'hello', payload: { n: 1 } })
    s.record({ sessionKey: 'global', kind: 'run_completed', actorType: 'system', summary: 'bare' })
    return s
  }

  describe(title, () => {
    beforeAll(() => {
      snapshots = new Snapshots()
      dir = tempDir('matrix')
      file = path.join(dir, 'shared.sqlite')
      shared = seeded(file, errors)
      expect(errors).toEqual([])
    })
    afterAll(async () => {
      shared.close()
      await snapshots.close()
      fs.rmSync(dir, { recursive: true, force: true })
    })

    const refusals = params.flatMap((p) =>
      BAD_NAMES.filter((v) => !(v in p.ok)).map((v) => ({
        call: p.call,
        value: v,
        run: p.run,
        code: p.codes?.[v] ?? 'ERR_INVALID_ARG',
      })),
    )
    const accepted = params.flatMap((p) =>
      BAD_NAMES.filter((v) => v in p.ok).map((v) => ({ call: p.call, value: v, run: p.run, expected: p.ok[v] })),
    )

    test('the snapshots see what the store writes', async () => {
      const before = await snapshots.take(file)
      shared.watch(W, 'agent:main:subagent:probe')
      const after = await snapshots.take(file)
      expect(after).not.toBe(before)
      expect(after).toContain('agent:main:subagent:probe')
      shared.unwatch(W, 'agent:main:subagent:probe')
      expect(await snapshots.take(file)).toBe(before)
    })

    test.each(refusals)('$call <- $value is refused with $code', async ({ run, value, code }) => {
      const before = await snapshots.take(file)
      const pending = shared.peek(W)
      if (kind === 'throws') {
        expect(codeOf(() => run(shared, BAD[value]))).toBe(code)
        expect(errors).toEqual([])
      } else {
        expect(run(shared, BAD[value])).toBeNull()
        expect(errors.splice(0).map((e) => e.code)).toEqual([code])
      }
      expect(await snapshots.take(file)).toBe(before)
      expect(shared.peek(W)).toEqual(pending)
    })

    test.each(accepted)('$call <- $value is accepted', ({ run, value, expected }) => {
      n += 1
      const sink: CodedError[] = []
      const s = seeded(path.join(dir, `fresh-${n}.sqlite`), sink)
      try {
        check(expected, run(s, BAD[value]), s)
        expect(sink).toEqual([])
      } finally {
        s.close()
      }
    })

    test('the shared store still works after every refusal', () => {
      const e = shared.record({ sessionKey: T, kind: 'goal_changed', actorType: 'human', summary: 'after' })
      expect(e?.sequence).toBe(4)
      expect(shared.drain(W).map((x) => x.changesSince)).toEqual([1])
      expect(shared.changesSince(T, 0).stateChanges.events.map((x) => x.summary)).toEqual(['spawn', 'hello', 'after'])
      expect(errors).toEqual([])
    })
  })
}
