// Constructor options (semantics.md#api-options): every bad value is ERR_INVALID_ARG from the
// constructor, the documented boundaries are accepted, and a bad option creates no file.
import * as fs from 'node:fs'

import { Clock, codeOf, fixture, human, must, SessionState, type SessionStateOptions } from './helpers'

const fx = fixture('options')

const bad: Array<[string, Record<string, unknown>]> = [
  ['retentionMs 0', { retentionMs: 0 }],
  ['retentionMs -1', { retentionMs: -1 }],
  ['retentionMs 1.5', { retentionMs: 1.5 }],
  ['retentionMs 9e12 + 1', { retentionMs: 9e12 + 1 }],
  ['retentionMs NaN', { retentionMs: NaN }],
  ['retentionMs Infinity', { retentionMs: Infinity }],
  ['maxEvents 0', { maxEvents: 0 }],
  ['maxEvents -5', { maxEvents: -5 }],
  ['maxEvents 2.5', { maxEvents: 2.5 }],
  ['maxEvents 2^53', { maxEvents: 2 ** 53 }],
  ['busyTimeoutMs -1', { busyTimeoutMs: -1 }],
  ['busyTimeoutMs 2^31', { busyTimeoutMs: 2 ** 31 }],
  ['busyTimeoutMs 0.5', { busyTimeoutMs: 0.5 }],
  ['wakeCoalesceMs -1', { wakeCoalesceMs: -1 }],
  ['wakeCoalesceMs 60001', { wakeCoalesceMs: 60_001 }],
  ['wakeCoalesceMs 1.5', { wakeCoalesceMs: 1.5 }],
  ['retentionMs as a string', { retentionMs: '30d' }],
  ['wake not a function', { wake: 'call me' }],
  ['onError not a function', { onError: 42 }],
  ['clock not a function', { clock: Date.now() }],
  ['strict not a boolean', { strict: 'yes' }],
]

test.each(bad)('%s is ERR_INVALID_ARG, and nothing is created', (_what, options) => {
  const file = fx.file()
  expect(codeOf(() => new SessionState(file, options as SessionStateOptions))).toBe('ERR_INVALID_ARG')
  expect(fs.existsSync(file)).toBe(false)
})

test.each([5, 'strict', true, () => ({})])('options %p (not an object) is ERR_INVALID_ARG', (options) => {
  const file = fx.file()
  expect(codeOf(() => new SessionState(file, options as SessionStateOptions))).toBe('ERR_INVALID_ARG')
  expect(fs.existsSync(file)).toBe(false)
})

test.each([undefined, null, 5, {}])('a path of %p is ERR_INVALID_ARG', (p) => {
  expect(codeOf(() => new SessionState(p as unknown as string))).toBe('ERR_INVALID_ARG')
})

const good: Array<[string, SessionStateOptions]> = [
  ['no options at all', {}],
  ['retentionMs 1', { retentionMs: 1 }],
  ['retentionMs 9e12', { retentionMs: 9e12 }],
  ['maxEvents 1', { maxEvents: 1 }],
  ['maxEvents 2^53 - 1', { maxEvents: 2 ** 53 - 1 }],
  ['busyTimeoutMs 0', { busyTimeoutMs: 0 }],
  ['busyTimeoutMs 2^31 - 1', { busyTimeoutMs: 2 ** 31 - 1 }],
  ['wakeCoalesceMs 0', { wakeCoalesceMs: 0 }],
  ['wakeCoalesceMs 60000', { wakeCoalesceMs: 60_000 }],
  ['every option', { retentionMs: 1000, maxEvents: 10, busyTimeoutMs: 5, wakeCoalesceMs: 5, strict: false, wake: () => {}, onError: () => {}, clock: () => 1 }],
]

test.each(good)('%s is accepted', (_what, options) => {
  const s = fx.open(fx.file(), options)
  expect(must(s.record(human('agent:main:x'))).sequence).toBe(1)
})

test('undefined and null options are the defaults', () => {
  expect(must(fx.open(fx.file(), undefined).record(human('agent:main:x'))).sequence).toBe(1)
  expect(must(fx.open(fx.file(), null as unknown as undefined).record(human('agent:main:x'))).sequence).toBe(1)
  const explicitUndefined = { retentionMs: undefined, maxEvents: undefined, wake: undefined, clock: undefined }
  expect(must(fx.open(fx.file(), explicitUndefined).record(human('agent:main:x'))).sequence).toBe(1)
})

test('the clock governs heads and occurredAt; the system clock otherwise', () => {
  const clock = new Clock(1_000_000)
  const s = fx.open(fx.file(), { clock: clock.fn })
  expect(must(s.record(human('agent:main:x'))).occurredAt).toBe(1_000_000)
  clock.advance(500)
  expect(must(s.record(human('agent:main:x'))).occurredAt).toBe(1_000_500)
  const before = Date.now()
  const ev = must(fx.open(fx.file()).record(human('agent:main:x')))
  expect(ev.occurredAt).toBeGreaterThanOrEqual(before)
  expect(ev.occurredAt).toBeLessThanOrEqual(Date.now())
})
