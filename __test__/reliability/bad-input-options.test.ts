// Bad input to the constructor: the path, the options object and each option × every bad
// value of the matrix. A refusal throws ERR_INVALID_ARG (ERR_DB when the file system refuses
// the path) and opens nothing.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState } from '../../lib'
import { LONE, LONE_STORED, QUOTED, matrix, type Param } from './bad-values'
import { tempDir } from './support'

let dir = ''
let n = 0
beforeAll(() => {
  dir = tempDir('ctor')
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** Opens and closes a store at `file`; 'opened' when that worked. */
function openAt(file: unknown, options?: unknown): string {
  const s = new SessionState(file as string, options as never)
  s.close()
  return 'opened'
}

/** Opens and closes a store on a fresh file. */
function openWith(options: unknown): string {
  n += 1
  return openAt(path.join(dir, `s-${n}.sqlite`), options)
}

const OPENED = 'opened'
const absentOrValid = { undefined: OPENED, null: OPENED }

/** An integer option: 42 is in range for each of them; -1 and 2^53 + 1 are not. */
const integer = (name: string): Param => ({
  call: `new SessionState(path, {${name}})`,
  run: (_s, v) => openWith({ [name]: v }),
  ok: { ...absentOrValid, number: OPENED },
})
/** A callback option: a function (it is only called later), or absent. */
const callback = (name: string): Param => ({
  call: `new SessionState(path, {${name}})`,
  run: (_s, v) => openWith({ [name]: v }),
  ok: { ...absentOrValid, function: OPENED },
})

const params: Param[] = [
  {
    call: 'new SessionState(path)',
    // Strings are file names inside the test's directory; '' stays ''.
    run: (_s, v) => openAt(typeof v === 'string' && v !== '' ? path.join(dir, v) : v),
    ok: {
      // The file is created under the name napi hands over: U+FFFD for the lone surrogate.
      lone: (r: unknown) => {
        expect(r).toBe(OPENED)
        expect(fs.statSync(path.join(dir, LONE_STORED)).isFile()).toBe(true)
      },
      quoted: (r: unknown) => {
        expect(r).toBe(OPENED)
        expect(fs.statSync(path.join(dir, QUOTED)).isFile()).toBe(true)
      },
    },
    // A name longer than the file system allows is the file system's refusal.
    codes: { mib: 'ERR_DB' },
  },
  {
    call: 'new SessionState(path, options)',
    run: (_s, v) => openWith(v),
    ok: { ...absentOrValid, object: OPENED },
  },
  integer('retentionMs'),
  integer('maxEvents'),
  integer('busyTimeoutMs'),
  integer('wakeCoalesceMs'),
  callback('wake'),
  callback('onError'),
  callback('clock'),
  { call: 'new SessionState(path, {strict})', run: (_s, v) => openWith({ strict: v }), ok: { ...absentOrValid, boolean: OPENED } },
]

matrix('bad input to the constructor', params, 'throws')

test('a clock that returns a bad value fails each call that reads it, not the store', () => {
  let value: unknown = Number.NaN
  const errors: string[] = []
  const s = new SessionState(path.join(dir, 'clock.sqlite'), { clock: () => value as number, onError: (e) => errors.push(e.code) })
  try {
    const input = { sessionKey: 'agent:main:subagent:c', kind: 'goal_changed' as const, actorType: 'human' as const, summary: 's' }
    for (const bad of [Number.NaN, Infinity, 'soon', undefined, LONE]) {
      value = bad
      expect(s.record(input)).toBeNull()
      expect(() => s.watch('agent:main:main', input.sessionKey)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
    }
    expect(errors).toEqual(Array(5).fill('ERR_INVALID_ARG'))
    value = Date.UTC(2030, 0, 1, 12, 0, 0, 0) + 0.75
    // A fractional clock is floored.
    expect(s.record(input)?.occurredAt).toBe(Date.UTC(2030, 0, 1, 12))
  } finally {
    s.close()
  }
})
