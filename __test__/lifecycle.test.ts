// Lifecycle: close and ERR_CLOSED everywhere, ERR_DB when the database is locked beyond the
// busy timeout, and the default report of a failed record on stderr.
import { spawnSync } from 'node:child_process'
import * as path from 'node:path'

import { codeOf, errorSink, fixture, holdWriteLock, human, must, type SessionState } from './helpers'

const fx = fixture('lifecycle')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'

const calls: Array<[string, (s: SessionState) => unknown]> = [
  ['watch', (s) => s.watch(MAIN, CHILD)],
  ['unwatch', (s) => s.unwatch(MAIN, CHILD)],
  ['stateVersion', (s) => s.stateVersion(CHILD)],
  ['stateVersions', (s) => s.stateVersions([{ sessionKey: CHILD }])],
  ['changesSince', (s) => s.changesSince(CHILD, 0)],
  ['drain', (s) => s.drain(MAIN)],
  ['peek', (s) => s.peek(MAIN)],
  ['acknowledge', (s) => s.acknowledge(MAIN, [CHILD])],
  ['sweep', (s) => s.sweep()],
  ['prune', (s) => s.prune()],
  ['resetSession', (s) => s.resetSession(MAIN)],
  ['deleteSession', (s) => s.deleteSession(CHILD)],
]

describe('close', () => {
  test.each(calls)('%s throws ERR_CLOSED after close', (_name, call) => {
    const s = fx.open(fx.file())
    s.watch(MAIN, CHILD)
    must(s.record(human(CHILD)))
    s.close()
    expect(codeOf(() => call(s))).toBe('ERR_CLOSED')
  })

  test('close is idempotent and the file can be opened again', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(MAIN, CHILD)
    must(s.record(human(CHILD)))
    s.close()
    expect(() => s.close()).not.toThrow()
    const again = fx.open(file)
    expect(again.stateVersion(CHILD)).toBe(1)
    expect(again.sweep().notices).toBe(1)
  })

  test('one handle’s close leaves another on the same file open', () => {
    const file = fx.file()
    const a = fx.open(file)
    const b = fx.open(file)
    a.close()
    expect(must(b.record(human(CHILD))).sequence).toBe(1)
  })
})

describe('ERR_DB', () => {
  test('a write lock held elsewhere beyond busyTimeoutMs: record reports ERR_DB once, others throw it', async () => {
    const file = fx.file()
    const sink = errorSink()
    const s = fx.open(file, { busyTimeoutMs: 0, onError: sink.onError })
    must(s.record(human(CHILD))) // 1
    const lock = await holdWriteLock(file)
    try {
      expect(s.record(human(CHILD))).toBeNull()
      expect(sink.codes()).toEqual(['ERR_DB'])
      expect(codeOf(() => s.watch(MAIN, CHILD))).toBe('ERR_DB')
      expect(codeOf(() => s.prune())).toBe('ERR_DB')
      // Readers are not blocked by a writer (WAL).
      expect(s.stateVersion(CHILD)).toBe(1)
    } finally {
      await lock.release()
    }
    // Nothing was half-written, and the store recovers.
    expect(s.stateVersion(CHILD)).toBe(1)
    expect(must(s.record(human(CHILD))).sequence).toBe(2)
    expect(s.watch(MAIN, CHILD)).toBe(true)
  })

  test('strict: the ERR_DB throws from record', async () => {
    const file = fx.file()
    const s = fx.open(file, { busyTimeoutMs: 0, strict: true })
    must(s.record(human(CHILD)))
    const lock = await holdWriteLock(file)
    try {
      expect(codeOf(() => s.record(human(CHILD)))).toBe('ERR_DB')
    } finally {
      await lock.release()
    }
  })
})

test('without onError a failed record is one line on stderr, and the process goes on', () => {
  const script = `
    const { SessionState } = require(${JSON.stringify(path.resolve(__dirname, '..'))})
    const s = new SessionState(${JSON.stringify(path.join(fx.dir(), 'stderr.sqlite'))})
    const r = s.record({ sessionKey: '', kind: 'created', actorType: 'system', summary: 's' })
    console.log('result ' + r)
    s.close()
  `
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  expect([child.status, child.signal]).toEqual([0, null])
  expect(child.stdout).toBe('result null\n')
  const lines = child.stderr.split('\n').filter((l) => l !== '')
  expect(lines).toHaveLength(1)
  expect(lines[0].startsWith('session-awareness: ERR_INVALID_ARG: ')).toBe(true)
})
