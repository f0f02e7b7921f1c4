// The read cache (semantics.md#reading-memory): changesSince and stateVersions answered from
// memory only when that is what the file holds now. Every change another process commits (a
// record, a prune, a reset, a delete), and every change of this store's own outside a record,
// is seen by the next read; stats() counts the hits and misses and reports the bytes held.
import { spawnSync } from 'node:child_process'
import * as path from 'node:path'

import type { RecordInput } from '../lib'
import { DAY, T0, fixture, must, type SessionState } from './helpers'

jest.setTimeout(60_000)

const fx = fixture('read-cache')
const K = 'agent:main:subagent:k'
const L = 'agent:main:subagent:l'
const ROOT = path.join(__dirname, '..')

const log = (sessionKey: string, summary = 'run'): RecordInput => ({
  sessionKey,
  kind: 'run_completed',
  actorType: 'agent',
  summary,
})

/** Runs `body` in another Node process with `s`, a store open on `file` with `options`. */
function otherProcess(file: string, body: string, options: Record<string, unknown> = {}): void {
  const script = `
    const { SessionState } = require(${JSON.stringify(ROOT)})
    const s = new SessionState(${JSON.stringify(file)}, { ...${JSON.stringify(options)}, onError: (e) => { throw e } })
    ${body}
    s.close()`
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`other process failed: ${r.stderr}`)
}

function seqs(s: SessionState, key: string, after = 0, limit?: number): number[] {
  return s.changesSince(key, after, limit === undefined ? undefined : { limit }).stateChanges.events.map((e) => e.sequence)
}

const lookups = (s: SessionState) => {
  const { hits, misses } = s.stats().readCache
  return { hits, misses }
}

describe('answers from memory', () => {
  test('a repeated read and a read after the store’s own record are hits, with the same answer', () => {
    const s = fx.open(fx.file())
    for (let i = 0; i < 5; i++) must(s.record(log(K, `r${i}`)))
    expect(lookups(s)).toEqual({ hits: 0, misses: 0 })
    const first = s.changesSince(K, 0)
    expect(first.stateChanges.events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5])
    expect(lookups(s)).toEqual({ hits: 0, misses: 1 })
    expect(s.changesSince(K, 0)).toStrictEqual(first)
    expect(seqs(s, K, 3)).toEqual([4, 5])
    expect(lookups(s)).toEqual({ hits: 2, misses: 1 })
    must(s.record(log(L)))
    const e7 = must(s.record(log(K, 'after')))
    const after = s.changesSince(K, 5)
    expect(after.stateChanges.events).toStrictEqual([e7])
    expect(after.stateVersion).toBe(7)
    expect(after.stateChanges.earliestAvailableSequence).toBe(1)
    expect(seqs(s, K, 0, 2)).toEqual([1, 2])
    expect(s.changesSince(K, 0, { limit: 2 }).stateChanges.truncated).toBe(true)
    expect(lookups(s)).toEqual({ hits: 5, misses: 1 })
    // A range below the one kept is read from the file.
    expect(seqs(s, L, 0)).toEqual([6])
    expect(lookups(s).misses).toBe(2)
    expect(s.stats().readCache.bytes).toBeGreaterThan(0)
  })

  test('stateVersions right after a record gives the new version', () => {
    const s = fx.open(fx.file())
    must(s.record(log(K)))
    must(s.record(log(L)))
    const refs = [{ sessionKey: K }, { sessionKey: L }, { sessionKey: 'agent:main:subagent:none' }]
    expect(s.stateVersions(refs).map((v) => v.stateVersion)).toEqual([1, 2])
    must(s.record(log(K)))
    expect(s.stateVersions(refs).map((v) => v.stateVersion)).toEqual([3, 2])
    must(s.record(log('agent:main:subagent:none')))
    expect(s.stateVersions(refs).map((v) => v.stateVersion)).toEqual([3, 2, 4])
  })

  test('recordAsync keeps the cache current too', async () => {
    const s = fx.open(fx.file())
    must(s.record(log(K)))
    expect(seqs(s, K)).toEqual([1])
    await Promise.all([s.recordAsync(log(K)), s.recordAsync(log(L)), s.recordAsync(log(K))])
    expect(seqs(s, K)).toEqual([1, 2, 4])
    expect(s.stateVersion(K)).toBe(4)
    expect(lookups(s)).toEqual({ hits: 1, misses: 1 })
  })

  test('readCacheBytes: 0 keeps nothing, a bad value is ERR_INVALID_ARG', () => {
    const s = fx.open(fx.file(), { readCacheBytes: 0 })
    must(s.record(log(K)))
    expect(seqs(s, K)).toEqual([1])
    expect(seqs(s, K)).toEqual([1])
    expect(s.stats().readCache).toEqual({ hits: 0, misses: 0, bytes: 0 })
    for (const bad of [-1, 1.5, 2 ** 30 + 1, '1']) {
      let code = ''
      try {
        fx.open(fx.file(), { readCacheBytes: bad as number })
      } catch (e) {
        code = (e as { code: string }).code
      }
      expect(code).toBe('ERR_INVALID_ARG')
    }
  })

  test('a small budget holds at most that much', () => {
    const s = fx.open(fx.file(), { readCacheBytes: 64 * 1024 })
    for (let i = 0; i < 400; i++) must(s.record(log(`agent:main:subagent:s${i}`, 'x'.repeat(200))))
    for (let i = 0; i < 400; i++) expect(seqs(s, `agent:main:subagent:s${i}`)).toEqual([i + 1])
    expect(s.stats().readCache.bytes).toBeLessThanOrEqual(64 * 1024)
    expect(s.stats().readCache.bytes).toBeGreaterThan(0)
  })
})

describe('never stale', () => {
  test('this store’s own prune and delete are seen by the next read', () => {
    let now = T0
    const s = fx.open(fx.file(), { clock: () => now, maxEvents: 3 })
    for (let i = 0; i < 5; i++) must(s.record(log(K)))
    now += DAY
    expect(seqs(s, K)).toEqual([1, 2, 3, 4, 5])
    s.prune()
    const c = s.changesSince(K, 0).stateChanges
    expect([c.events.map((e) => e.sequence), c.historyGap, c.earliestAvailableSequence]).toEqual([[3, 4, 5], true, 3])
    expect(s.stateVersions([{ sessionKey: K }]).map((v) => v.stateVersion)).toEqual([5])
    s.deleteSession(K)
    const r = s.changesSince(K, 0)
    const d = r.stateChanges
    expect([d.events, r.stateVersion, d.earliestAvailableSequence, d.historyGap]).toEqual([[], 0, 0, false])
    expect(s.stateVersions([{ sessionKey: K }])).toEqual([])
  })

  test('another process’s record', () => {
    const file = fx.file()
    const s = fx.open(file)
    for (let i = 0; i < 3; i++) must(s.record(log(K)))
    expect(seqs(s, K)).toEqual([1, 2, 3])
    expect(s.stateVersions([{ sessionKey: K }, { sessionKey: L }]).map((v) => v.stateVersion)).toEqual([3])
    otherProcess(file, `s.record(${JSON.stringify(log(K))}); s.record(${JSON.stringify(log(L))})`)
    expect(seqs(s, K)).toEqual([1, 2, 3, 4])
    expect(s.stateVersions([{ sessionKey: K }, { sessionKey: L }]).map((v) => v.stateVersion)).toEqual([4, 5])
    // This store's own record after the other's: the next read still sees both.
    must(s.record(log(K)))
    expect(seqs(s, K, 3)).toEqual([4, 6])
  })

  test('another process’s prune', () => {
    const file = fx.file()
    const s = fx.open(file, { clock: () => T0 })
    for (let i = 0; i < 6; i++) must(s.record(log(K)))
    expect(seqs(s, K)).toEqual([1, 2, 3, 4, 5, 6])
    otherProcess(file, 's.prune()', { maxEvents: 2 })
    const r = s.changesSince(K, 0)
    const c = r.stateChanges
    expect([c.events.map((e) => e.sequence), c.historyGap, c.earliestAvailableSequence, r.stateVersion]).toEqual([
      [5, 6],
      true,
      5,
      6,
    ])
    expect(s.changesSince(K, 4).stateChanges.historyGap).toBe(false)
  })

  test('another process’s reset leaves the events, and the answer is the file’s', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(K, L)
    for (let i = 0; i < 2; i++) must(s.record(log(K)))
    const before = s.changesSince(K, 0)
    otherProcess(file, `s.resetSession(${JSON.stringify(K)})`)
    expect(s.changesSince(K, 0)).toStrictEqual(before)
    expect(s.cursorRows({ watcherKey: K })).toEqual([])
  })

  test('another process’s delete', () => {
    const file = fx.file()
    const s = fx.open(file)
    for (let i = 0; i < 2; i++) must(s.record(log(K)))
    expect(seqs(s, K)).toEqual([1, 2])
    expect(s.stateVersions([{ sessionKey: K }]).map((v) => v.stateVersion)).toEqual([2])
    otherProcess(file, `s.deleteSession(${JSON.stringify(K)})`)
    const r = s.changesSince(K, 0)
    const c = r.stateChanges
    expect([c.events, r.stateVersion, c.earliestAvailableSequence]).toEqual([[], 0, 0])
    expect(s.stateVersions([{ sessionKey: K }])).toEqual([])
    // Recorded again after the delete: the new head, as the file has it.
    const e = must(s.record(log(K)))
    expect(seqs(s, K)).toEqual([e.sequence])
  })
})
