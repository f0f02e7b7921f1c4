// One SQLite per file per process (semantics.md#storage; RELIABILITY.md, "Another SQLite library in the
// same process"). POSIX locks belong to the process, so another copy of SQLite in it
// (better-sqlite3, node:sqlite) never sees the store's locks, and closing its handle drops
// them: committed events were lost. The store refuses instead: its constructor throws
// ERR_FILE_SHARED when such a handle is open, and while one that appears later is open every
// write is refused (record: null and one onError) and reads are answered; once it is closed
// the store reopens its connections by itself, taking its locks anew, with one onError saying
// so (semantics.md#storage-shared-file). Each test proves that every event `record` returned
// is in the file after both closed.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, inspectDatabase, readEvents, type RecordInput } from '../../lib'
import { codeOf, rawDb, tempDir, withRaw, type CodedError } from './support'

/** The calls the tests make on the host's own handle. */
interface Host {
  exec(sql: string): void
  insert(value: string): void
  close(): void
}

type OpenHost = (file: string) => Host

function betterSqlite(file: string): Host {
  const db = rawDb(file)
  return {
    exec: (sql) => db.exec(sql),
    insert: (v) => void db.prepare('INSERT INTO gateway_rows VALUES (?)').run(v),
    close: () => db.close(),
  }
}

/** node:sqlite's DatabaseSync, where this Node has it (22.5 and later: the Node 24 run). */
function nodeSqlite(): OpenHost | null {
  let DatabaseSync: (new (file: string) => {
    exec(sql: string): void
    prepare(sql: string): { run(...params: unknown[]): unknown }
    close(): void
  }) | undefined
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    DatabaseSync = require('node:sqlite').DatabaseSync
  } catch {
    return null
  }
  if (DatabaseSync === undefined) return null
  const Ctor = DatabaseSync
  return (file) => {
    const db = new Ctor(file)
    db.exec('PRAGMA busy_timeout = 30000')
    return {
      exec: (sql) => db.exec(sql),
      insert: (v) => void db.prepare('INSERT INTO gateway_rows VALUES (?)').run(v),
      close: () => db.close(),
    }
  }
}

const CREATE = 'CREATE TABLE IF NOT EXISTS gateway_rows (k TEXT NOT NULL)'
const KEY = 'agent:main:x'
const input = (summary: string): RecordInput => ({ sessionKey: KEY, kind: 'run_completed', actorType: 'agent', summary })

let dir = ''
let n = 0
beforeAll(() => {
  dir = tempDir('same-process')
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** A fresh file holding two events (sequences 1 and 2), closed. */
function seeded(): string {
  n += 1
  const file = path.join(dir, `state-${n}.sqlite`)
  const s = new SessionState(file)
  s.record(input('a'))
  s.record(input('b'))
  s.close()
  return file
}

function sequences(file: string): number[] {
  const s = new SessionState(file)
  try {
    return s.changesSince(KEY, 0).stateChanges.events.map((e) => e.sequence)
  } finally {
    s.close()
  }
}

function hostRows(file: string): number {
  return withRaw(file, (db) => db.prepare('SELECT count(*) AS n FROM gateway_rows').get()?.n as number)
}

const libraries: Array<[string, OpenHost | null]> = [
  ['better-sqlite3', betterSqlite],
  ['node:sqlite', nodeSqlite()],
]

// Windows has no detection, by design (RELIABILITY.md, the table of systems): its locks belong
// to the handle, so the two libraries exclude each other and nothing is lost. There the
// refusals below do not apply, and the test after them asserts that behaviour instead.
const WINDOWS = process.platform === 'win32'

describe.each(libraries)('the host opens the file through %s', (_name, openHost) => {
  const run = openHost === null || WINDOWS ? test.skip : test
  const onWindows = openHost !== null && WINDOWS ? test : test.skip
  const host = (file: string) => (openHost as OpenHost)(file)

  run('host first: the constructor throws ERR_FILE_SHARED', () => {
    const file = seeded()
    const h = host(file)
    try {
      h.exec(CREATE)
      h.insert('before')
      expect(codeOf(() => new SessionState(file))).toBe('ERR_FILE_SHARED')
      h.insert('after')
    } finally {
      h.close()
    }
    expect(sequences(file)).toEqual([1, 2])
    expect(hostRows(file)).toBe(2)
  })

  run('store first: each record while the host writes returns null with one ERR_FILE_SHARED; reads answered; once closed, the store goes on', async () => {
    const file = seeded()
    const errors: CodedError[] = []
    const state = new SessionState(file, { busyTimeoutMs: 500, onError: (e) => errors.push(e as CodedError) })
    const returned: number[] = []
    const first = state.record(input('before the host'))
    expect(first?.sequence).toBe(3)
    returned.push(first!.sequence)
    const h = host(file)
    try {
      h.exec(CREATE)
      for (let round = 0; round < 20; round += 1) {
        h.exec('BEGIN IMMEDIATE')
        h.insert(`row ${round}`)
        const e = state.record(input(`r${round}`))
        if (e !== null) returned.push(e.sequence)
        h.exec('COMMIT')
      }
      expect(errors.map((e) => [e.code, e.during])).toEqual(Array(20).fill(['ERR_FILE_SHARED', 'record']))
      expect(codeOf(() => state.watch('agent:main:main', KEY))).toBe('ERR_FILE_SHARED')
      // Reads are answered while the host has the file open.
      expect(state.changesSince(KEY, 0).stateChanges.events.map((e) => e.sequence)).toEqual([1, 2, 3])
      expect(state.stateVersion(KEY)).toBe(3)
    } finally {
      h.close()
    }
    // The host's close dropped this process's locks: the store takes them anew and goes on.
    const after = state.record(input('after the host'))
    expect(after?.sequence).toBe(4)
    returned.push(after!.sequence)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(errors.slice(20).map((e) => [e.code, e.during])).toEqual([['ERR_FILE_SHARED', 'task:file-guard']])
    expect(state.record(input('and on'))?.sequence).toBe(5)
    returned.push(5)
    state.close()
    expect(errors).toHaveLength(21)
    expect(returned).toEqual([3, 4, 5])
    expect(sequences(file)).toEqual([1, 2, 3, 4, 5])
    expect(hostRows(file)).toBe(20)
  })

  run('strict: record throws ERR_FILE_SHARED and onError stays silent', () => {
    const file = seeded()
    const errors: unknown[] = []
    const state = new SessionState(file, { strict: true, onError: (e) => errors.push(e) })
    const h = host(file)
    try {
      h.exec(CREATE)
      expect(codeOf(() => state.record(input('refused')))).toBe('ERR_FILE_SHARED')
      expect(errors).toEqual([])
    } finally {
      h.close()
      state.close()
    }
    expect(sequences(file)).toEqual([1, 2])
  })

  run('inspectDatabase and readEvents refuse while the host has the file open', () => {
    const file = seeded()
    const h = host(file)
    try {
      h.exec(CREATE)
      expect(codeOf(() => inspectDatabase(file))).toBe('ERR_FILE_SHARED')
      expect(codeOf(() => readEvents(file, KEY))).toBe('ERR_FILE_SHARED')
    } finally {
      h.close()
    }
    expect(inspectDatabase(file).counts.events).toBe(2)
    expect(readEvents(file, KEY).events.map((e) => e.sequence)).toEqual([1, 2])
  })

  onWindows('Windows: no refusal; the store and the host share the file and neither loses a row', () => {
    const file = seeded()
    const errors: CodedError[] = []
    const h = host(file)
    const returned: number[] = []
    try {
      h.exec(CREATE)
      h.insert('before')
      const state = new SessionState(file, { onError: (e) => errors.push(e as CodedError) })
      try {
        for (let round = 0; round < 5; round += 1) {
          h.insert(`row ${round}`)
          returned.push(state.record(input(`r${round}`))!.sequence)
        }
        expect(inspectDatabase(file).counts.events).toBe(7)
      } finally {
        state.close()
      }
      h.insert('after')
    } finally {
      h.close()
    }
    expect(errors).toEqual([])
    expect(returned).toEqual([3, 4, 5, 6, 7])
    expect(sequences(file)).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(hostRows(file)).toBe(7)
  })
})

// A plain descriptor of the same process (a backup, a checksum, a log shipper) on the file,
// its -wal or its -shm: while it is open, records are refused and reads answered; its close
// drops the process's locks, and the store takes them anew by itself, once, losing nothing.
const posixOnly = WINDOWS ? test.skip : test
describe.each(['', '-wal', '-shm'])('a plain descriptor on the file%s', (suffix) => {
  posixOnly('refuses records while open; once closed the store reopens itself, with one onError', async () => {
    const file = seeded()
    const errors: CodedError[] = []
    const state = new SessionState(file, { onError: (e) => errors.push(e as CodedError) })
    expect(state.record(input('c'))?.sequence).toBe(3)
    const fd = fs.openSync(`${file}${suffix}`, 'r')
    try {
      expect(state.record(input('refused'))).toBeNull()
      expect(state.changesSince(KEY, 0).stateChanges.events.map((e) => e.sequence)).toEqual([1, 2, 3])
      expect(codeOf(() => state.watch('agent:main:main', KEY))).toBe('ERR_FILE_SHARED')
    } finally {
      fs.closeSync(fd)
    }
    expect(state.record(input('d'))?.sequence).toBe(4)
    expect(await state.recordAsync(input('e'))).toMatchObject({ sequence: 5 })
    expect(state.watch('agent:main:main', KEY)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(errors.map((e) => [e.code, e.during])).toEqual([
      ['ERR_FILE_SHARED', 'record'],
      ['ERR_FILE_SHARED', 'task:file-guard'],
    ])
    state.close()
    expect(sequences(file)).toEqual([1, 2, 3, 4, 5])
  })
})
