// Faults: a read-only file, a deleted directory, a corrupt file, a full disk, a lock held
// beyond busyTimeoutMs. Each gives a coded error at open, or null + onError from record (a
// throw with a code from the other methods); the process survives; and once the fault is
// gone the store works again without losing what it had stored.
import { execFileSync, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, type StateEvent } from '../../lib'
import { codeOf, prng, reportFigures, startChild, tempDir, type CodedError } from './support'

const KEY = 'agent:main:subagent:c'
const WATCHER = 'agent:main:main'
const figures: Record<string, unknown> = {}

let dir = ''
beforeAll(() => {
  dir = tempDir('faults')
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  reportFigures('faults', figures)
})

function open(file: string, errors: CodedError[], options: { busyTimeoutMs?: number } = {}): SessionState {
  return new SessionState(file, { onError: (e) => errors.push(e), ...options })
}

function record(s: SessionState, i: number, fill = 0): StateEvent | null {
  return s.record({
    sessionKey: KEY,
    kind: 'goal_changed',
    actorType: 'human',
    summary: `event ${i}`,
    payload: fill > 0 ? { i, fill: 'f'.repeat(fill) } : { i },
    watchers: [WATCHER],
  })
}

/** The summaries of every event of KEY, read through a fresh store. */
function summariesAfterReopen(file: string): string[] {
  const s = new SessionState(file)
  try {
    const out: string[] = []
    let after = 0
    for (;;) {
      const page = s.changesSince(KEY, after).stateChanges
      out.push(...page.events.map((e) => e.summary))
      if (!page.truncated) return out
      after = page.events[page.events.length - 1].sequence
    }
  } finally {
    s.close()
  }
}

const codes = (errors: CodedError[]) => errors.splice(0).map((e) => e.code)
const range = (n: number) => Array.from({ length: n }, (_, i) => `event ${i}`)
const isRoot = process.getuid?.() === 0
// The file-size limit is set with bash's `ulimit -f` (RLIMIT_FSIZE): POSIX only, Windows has none.
const posixOnly = process.platform === 'win32' ? test.skip : test

/**
 * Makes `files` read-only for this process: immutable (chattr +i) as root, whom file modes do
 * not stop, which also stops writes through descriptors already open; mode 0444 otherwise,
 * which only stops new opens. Returns how, or null (undoing everything) when the files can
 * still be opened for writing (no chattr here, or a file system without the flag).
 */
function makeReadOnly(files: string[]): 'immutable' | 'mode 0444' | null {
  try {
    for (const f of files) {
      if (isRoot) execFileSync('chattr', ['+i', f], { stdio: 'ignore' })
      else fs.chmodSync(f, 0o444)
    }
    fs.closeSync(fs.openSync(files[0], 'r+'))
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'EPERM' || code === 'EACCES') return isRoot ? 'immutable' : 'mode 0444'
  }
  makeWritable(files)
  return null
}

function makeWritable(files: string[]): void {
  for (const f of files) {
    if (!fs.existsSync(f)) continue
    if (isRoot) spawnSync('chattr', ['-i', f], { stdio: 'ignore' })
    else fs.chmodSync(f, 0o600)
  }
}

describe('read-only database file', () => {
  test('read-only before opening: the constructor throws ERR_DB; writable again, nothing lost', () => {
    const file = path.join(dir, 'ro-closed', 'state.sqlite')
    const errors: CodedError[] = []
    let s = open(file, errors)
    for (let i = 0; i < 3; i += 1) expect(record(s, i)).not.toBeNull()
    s.close()
    const how = makeReadOnly([file])
    if (how === null) {
      figures.readOnlyAtOpen = 'skipped: the file stayed writable (no chattr, or a file system without it)'
      return
    }
    try {
      expect(codeOf(() => open(file, errors))).toBe('ERR_DB')
      // Refused before SQLite touched anything: no -wal or -shm born with a read-only mode
      // (a closed store leaves none behind).
      expect(fs.readdirSync(path.dirname(file))).toEqual(['state.sqlite'])
    } finally {
      makeWritable([file])
    }
    figures.readOnlyAtOpen = { how, outcome: 'constructor threw ERR_DB' }
    s = open(file, errors)
    expect(record(s, 3)?.sequence).toBe(4)
    s.close()
    expect(summariesAfterReopen(file)).toEqual(range(4))
    expect(errors).toEqual([])
  })

  test('read-only while open: record is null + ERR_DB, reads work; writable again, the same store goes on', () => {
    const file = path.join(dir, 'ro-open', 'state.sqlite')
    const errors: CodedError[] = []
    const s = open(file, errors)
    try {
      for (let i = 0; i < 3; i += 1) expect(record(s, i)).not.toBeNull()
      // The database and its WAL. Not the -shm file: SQLite maps it into memory, and a page
      // fault on a mapping the kernel will not write ends the process with SIGBUS.
      const files = [file, `${file}-wal`]
      const how = makeReadOnly(files)
      if (how === null) {
        figures.readOnlyWhileOpen = 'skipped: the file stayed writable (no chattr, or a file system without it)'
        return
      }
      try {
        if (how === 'immutable') {
          expect(record(s, 3)).toBeNull()
          expect(codes(errors)).toEqual(['ERR_DB'])
          expect(codeOf(() => s.watch(WATCHER, 'agent:main:subagent:other'))).toBe('ERR_DB')
          expect(s.stateVersion(KEY)).toBe(3)
          expect(s.peek(WATCHER).map((n) => n.changesSince)).toEqual([0])
        } else {
          // A mode change does not reach descriptors opened before it: the store writes on.
          expect(record(s, 3)?.sequence).toBe(4)
        }
      } finally {
        makeWritable(files)
      }
      figures.readOnlyWhileOpen = { how, outcome: how === 'immutable' ? 'record null + ERR_DB; reads work' : 'unaffected' }
      if (how === 'immutable') expect(record(s, 3)?.sequence).toBe(4)
      expect(s.drain(WATCHER).map((n) => n.changesSince)).toEqual([0])
    } finally {
      s.close()
    }
    expect(summariesAfterReopen(file)).toEqual(range(4))
    expect(errors).toEqual([])
  })
})

test('a closed store leaves one complete file: the database file alone holds every event', () => {
  const file = path.join(dir, 'complete', 'state.sqlite')
  const errors: CodedError[] = []
  const s = open(file, errors)
  for (let i = 0; i < 50; i += 1) expect(record(s, i)).not.toBeNull()
  s.close()
  expect(fs.readdirSync(path.dirname(file))).toEqual(['state.sqlite'])
  const copy = path.join(dir, 'complete-copy.sqlite')
  fs.copyFileSync(file, copy)
  expect(summariesAfterReopen(copy)).toEqual(range(50))
  expect(errors).toEqual([])
})

test('directory deleted while open: the store goes on with the unlinked file; reopened, it starts afresh', () => {
  const sub = path.join(dir, 'deleted')
  const file = path.join(sub, 'state.sqlite')
  const errors: CodedError[] = []
  const s = open(file, errors)
  try {
    expect(record(s, 0)?.sequence).toBe(1)
    fs.rmSync(sub, { recursive: true, force: true })
    // SQLite keeps its descriptors: writes and reads go on against the deleted inode.
    expect(record(s, 1)?.sequence).toBe(2)
    expect(s.stateVersion(KEY)).toBe(2)
    expect(s.drain(WATCHER).map((n) => n.changesSince)).toEqual([0])
  } finally {
    s.close()
  }
  expect(errors).toEqual([])
  expect(fs.existsSync(sub)).toBe(false)
  // What the deletion took is gone; the store recreates the directory (0700) and works.
  expect(summariesAfterReopen(file)).toEqual([])
  expect(fs.statSync(sub).mode & 0o777).toBe(0o700)
  const again = open(file, errors)
  expect(record(again, 0)?.sequence).toBe(1)
  again.close()
  expect(errors).toEqual([])
})

describe('corrupt file', () => {
  test('random bytes: the constructor throws ERR_NOT_SQLITE and leaves the file as it was', () => {
    const file = path.join(dir, 'random.sqlite')
    const rand = prng(0x5eed)
    const bytes = Buffer.from(Array.from({ length: 64 * 1024 }, () => Math.floor(rand() * 256)))
    fs.writeFileSync(file, bytes)
    expect(codeOf(() => new SessionState(file))).toBe('ERR_NOT_SQLITE')
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    // The fault removed (the file moved aside), the path works again.
    fs.renameSync(file, `${file}.corrupt`)
    const errors: CodedError[] = []
    const s = open(file, errors)
    expect(record(s, 0)?.sequence).toBe(1)
    s.close()
    expect(errors).toEqual([])
  })

  test('damaged pages of a real store: every failing call is ERR_DB, nothing crashes', () => {
    const file = path.join(dir, 'damaged.sqlite')
    const errors: CodedError[] = []
    let s = open(file, errors)
    for (let i = 0; i < 300; i += 1) record(s, i, 200)
    s.close()
    const good = fs.readFileSync(file)
    const rand = prng(0xbad)
    let outcomes = 0
    for (let round = 0; round < 8; round += 1) {
      // Keep the header page, scramble a run of the rest.
      const damaged = Buffer.from(good)
      const from = 4096 + Math.floor(rand() * (damaged.length - 8192))
      for (let i = from; i < Math.min(damaged.length, from + 4096 * 3); i += 1) damaged[i] = Math.floor(rand() * 256)
      fs.writeFileSync(file, damaged)
      let state: SessionState | null = null
      try {
        state = open(file, errors)
      } catch (e) {
        expect((e as CodedError).code).toBe('ERR_DB')
      }
      if (state !== null) {
        const r = record(state, 1000 + round)
        if (r === null) expect(codes(errors)).toEqual(['ERR_DB'])
        for (const call of [() => state!.stateVersion(KEY), () => state!.changesSince(KEY, 0), () => state!.sweep()]) {
          try {
            call()
          } catch (e) {
            expect((e as CodedError).code).toBe('ERR_DB')
          }
        }
        state.close()
      }
      outcomes += 1
    }
    expect(outcomes).toBe(8)
    // Restored from the copy (with no stale -wal beside it), the store works and has every event.
    fs.writeFileSync(file, good)
    for (const suffix of ['-wal', '-shm']) fs.rmSync(`${file}${suffix}`, { force: true })
    s = open(file, errors)
    expect(s.stateVersion(KEY)).toBe(300)
    s.close()
    expect(errors).toEqual([])
  })
})

describe('full disk', () => {
  test('a full tmpfs: record is null + ERR_DB; space freed, the same store goes on; nothing lost', () => {
    const mnt = path.join(dir, 'tmpfs')
    fs.mkdirSync(mnt)
    const mounted = isRoot && spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', mnt]).status === 0
    if (!mounted) {
      figures.fullDiskTmpfs = 'skipped: mounting a tmpfs needs root (the file-size-limit test covers a full disk)'
      return
    }
    try {
      const filler = path.join(mnt, 'filler')
      fs.writeFileSync(filler, Buffer.alloc(256 * 1024))
      const file = path.join(mnt, 'state.sqlite')
      const errors: CodedError[] = []
      const s = open(file, errors)
      const returned: number[] = []
      let failed = 0
      try {
        for (let i = 0; i < 2000 && failed < 5; i += 1) {
          const e = record(s, i, 3000)
          if (e === null) failed += 1
          else returned.push(i)
        }
        expect(failed).toBe(5)
        expect(codes(errors)).toEqual(Array(5).fill('ERR_DB'))
        expect(s.stateVersion(KEY)).toBeGreaterThan(0)
        expect(s.drain(WATCHER).map((n) => n.changesSince)).toEqual([0])
        fs.rmSync(filler)
        const more = record(s, 5000, 3000)
        expect(more).not.toBeNull()
        returned.push(5000)
      } finally {
        s.close()
      }
      expect(errors).toEqual([])
      expect(summariesAfterReopen(file)).toEqual(returned.map((i) => `event ${i}`))
      figures.fullDiskTmpfs = { recordsBeforeFull: returned.length - 1, failedRecords: failed }
    } finally {
      execFileSync('umount', [mnt])
    }
  })

  posixOnly('a file-size limit (ulimit -f): record is null + ERR_DB; the process goes on; nothing lost', async () => {
    const file = path.join(dir, 'fsize', 'state.sqlite')
    fs.mkdirSync(path.dirname(file))
    const child = startChild('full-disk-writer.js', [file, KEY], { fileSizeLimitKiB: 512 })
    const exit = await child.exited
    expect(exit).toEqual({ code: 0, signal: null })
    const out = JSON.parse(child.lines[child.lines.length - 1]) as { returned: number[]; failed: number; errors: string[]; readable: boolean }
    expect(out.failed).toBe(5)
    expect(out.errors).toEqual(Array(5).fill('ERR_DB'))
    expect(out.readable).toBe(true)
    // Without the limit: every record that returned is there, and the store takes more.
    const s = new SessionState(file)
    try {
      expect(s.changesSince(KEY, 0, { limit: 200 }).stateChanges.events.map((e) => e.sequence)).toEqual(
        out.returned.slice(0, 200),
      )
      expect(s.stateVersion(KEY)).toBe(out.returned[out.returned.length - 1])
      expect(record(s, 9999)?.sequence).toBeGreaterThan(out.returned[out.returned.length - 1])
    } finally {
      s.close()
    }
    figures.fullDiskFileSizeLimit = { limitKiB: 512, recordsBeforeFull: out.returned.length, failedRecords: out.failed }
  })
})

describe('lock held by another process', () => {
  test('beyond busyTimeoutMs: open throws ERR_DB, record is null + ERR_DB; released, nothing lost', async () => {
    const file = path.join(dir, 'locked.sqlite')
    const errors: CodedError[] = []
    const s = open(file, errors, { busyTimeoutMs: 200 })
    try {
      expect(record(s, 0)?.sequence).toBe(1)
      const holder = startChild('lock-holder.js', [file])
      await holder.waitLine((l) => l === 'locked')
      expect(record(s, 1)).toBeNull()
      expect(codes(errors)).toEqual(['ERR_DB'])
      expect(codeOf(() => s.watch(WATCHER, 'agent:main:subagent:other'))).toBe('ERR_DB')
      // Readers are not blocked by a writer (WAL).
      expect(s.stateVersion(KEY)).toBe(1)
      expect(s.peek(WATCHER).map((n) => n.changesSince)).toEqual([0])
      // Creating the schema is a write: a new store cannot open while the lock is held.
      expect(codeOf(() => new SessionState(file, { busyTimeoutMs: 200 }))).toBe('ERR_DB')
      holder.send('release')
      await holder.waitLine((l) => l === 'released')
      expect(await holder.exited).toEqual({ code: 0, signal: null })
      // The failed record consumed nothing: the next one takes sequence 2.
      expect(record(s, 1)?.sequence).toBe(2)
      expect(s.drain(WATCHER).map((n) => n.changesSince)).toEqual([0])
    } finally {
      s.close()
    }
    expect(errors).toEqual([])
    expect(summariesAfterReopen(file)).toEqual(range(2))
  })

  test('within busyTimeoutMs: record waits for the lock and succeeds', async () => {
    const file = path.join(dir, 'waits.sqlite')
    const errors: CodedError[] = []
    const s = open(file, errors)
    try {
      expect(record(s, 0)?.sequence).toBe(1)
      const holder = startChild('lock-holder.js', [file, '1000'])
      await holder.waitLine((l) => l === 'locked')
      // The default busy timeout (30 s) outlasts the one-second hold.
      expect(record(s, 1)?.sequence).toBe(2)
      expect(await holder.exited).toEqual({ code: 0, signal: null })
    } finally {
      s.close()
    }
    expect(errors).toEqual([])
  })
})
