// One SQLite per file per process (semantics.md#storage; RELIABILITY.md, "Another SQLite library in the
// same process"). POSIX locks belong to the process, so another copy of SQLite in it
// (better-sqlite3, node:sqlite) never sees the store's locks, and closing its handle drops
// them: committed events were lost. The store refuses instead: its constructor throws
// ERR_FILE_SHARED when such a handle is open, and once one appears every call that touches
// the file is refused (record: null and one onError) until the store is reopened. Each test
// proves that every event `record` returned is in the file after both closed.
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

  run('store first: each record while the host writes returns null with one ERR_FILE_SHARED', () => {
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
      expect(errors.map((e) => e.code)).toEqual(Array(20).fill('ERR_FILE_SHARED'))
      expect(codeOf(() => state.watch('agent:main:main', KEY))).toBe('ERR_FILE_SHARED')
      expect(codeOf(() => state.changesSince(KEY, 0))).toBe('ERR_FILE_SHARED')
    } finally {
      h.close()
    }
    // The host's close dropped this process's locks: the store stays refused until reopened.
    expect(state.record(input('after the host'))).toBeNull()
    expect(errors).toHaveLength(21)
    expect(errors[20].code).toBe('ERR_FILE_SHARED')
    state.close()
    expect(returned).toEqual([3])
    expect(sequences(file)).toEqual([1, 2, 3])
    expect(hostRows(file)).toBe(20)
    const again = new SessionState(file)
    try {
      expect(again.record(input('reopened'))?.sequence).toBe(4)
    } finally {
      again.close()
    }
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
