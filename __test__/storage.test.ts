// Storage (semantics.md#storage): coexisting with the host's tables and user_version, several handles on one
// file, the file and directory modes, and ERR_DB for what cannot be opened.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, codeOf, errOf, fixture, human, must, rawDb } from './helpers'
import { SessionStateError, inspectDatabase } from '../lib'

const fx = fixture('storage')
// File modes are POSIX permission bits: Windows keeps no such bits (its ACLs decide access).
const posixOnly = process.platform === 'win32' ? test.skip : test
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'

test('a file with an unrelated table and user_version 7 is used and left as it was', () => {
  const file = fx.file()
  const db = rawDb(file)
  db.exec("CREATE TABLE gateway_settings (name TEXT PRIMARY KEY, value TEXT) ; INSERT INTO gateway_settings VALUES ('theme', 'dark'), ('lang', 'fa')")
  db.pragma('user_version = 7')
  db.close()

  const s = fx.open(file)
  expect(s.watch(MAIN, CHILD)).toBe(true)
  must(s.record(human(CHILD)))
  expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([0])
  expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
  s.close()

  const after = rawDb(file)
  try {
    expect(after.pragma('user_version', { simple: true })).toBe(7)
    expect(after.prepare('SELECT name, value FROM gateway_settings ORDER BY name').all()).toEqual([
      { name: 'lang', value: 'fa' },
      { name: 'theme', value: 'dark' },
    ])
    const tables = after
      .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all()
    expect(tables.map((t) => t.name)).toEqual([
      'gateway_settings',
      'session_awareness_served', // the store created the shared tables: its own file (semantics.md#processes)
      'session_state_events',
      'session_state_heads',
      'session_upstream_links',
      'session_watch_cursors',
    ])
    for (const t of tables.filter((t) => String(t.name).startsWith('session_'))) {
      expect(String(t.sql).trimEnd().endsWith('STRICT')).toBe(true)
    }
    expect(after.pragma('journal_mode', { simple: true })).toBe('wal')
  } finally {
    after.close()
  }
  // Reopening keeps the history.
  const again = fx.open(file)
  expect(again.stateVersion(CHILD)).toBe(1)
  expect(again.changesSince(CHILD, 0).stateChanges.events.map((e) => e.summary)).toEqual(['human message'])
})

test('two SessionState objects on one file both work and see each other’s records', () => {
  const file = fx.file()
  const a = fx.open(file)
  const b = fx.open(file)
  const ea = must(a.record(human(CHILD)))
  const eb = must(b.record(human(CHILD)))
  const ea2 = must(a.record({ sessionKey: MAIN, kind: 'created', actorType: 'system', summary: 'm' }))
  expect([ea.sequence, eb.sequence, ea2.sequence]).toEqual([1, 2, 3])
  for (const s of [a, b]) {
    expect(s.stateVersion(CHILD)).toBe(2)
    expect(s.changesSince(CHILD, 0).stateChanges.events.map((e) => e.sequence)).toEqual([1, 2])
    expect(s.stateVersions([{ sessionKey: MAIN }])).toEqual([{ sessionKey: MAIN, agentId: 'main', stateVersion: 3 }])
  }
  // A cursor made through one handle is the truth for the other's records.
  expect(a.watch(MAIN, CHILD)).toBe(true)
  must(b.record(human(CHILD))) // 4
  expect(b.peek(MAIN).map((n) => n.changesSince)).toEqual([2])
  expect(b.drain(MAIN).map((n) => n.changesSince)).toEqual([2])
  // Dedupe keys are shared too.
  const d1 = must(a.record(human(CHILD, { dedupeKey: 'same' })))
  expect(must(b.record(human(CHILD, { dedupeKey: 'same' })))).toStrictEqual(d1)
  a.close()
  expect(must(b.record(human(CHILD))).sequence).toBeGreaterThan(d1.sequence)
})

posixOnly('a new file is created with mode 0600, a missing directory with 0700', () => {
  const dir = path.join(fx.dir(), 'made', 'here')
  const file = path.join(dir, 'state.sqlite')
  const s = fx.open(file)
  must(s.record(human(CHILD)))
  expect(fs.statSync(file).mode & 0o777).toBe(0o600)
  expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
  expect(fs.statSync(path.dirname(dir)).mode & 0o777).toBe(0o700)
  for (const side of [`${file}-wal`, `${file}-shm`]) {
    if (fs.existsSync(side)) expect(fs.statSync(side).mode & 0o777).toBe(0o600)
  }
})

posixOnly('an existing file keeps its mode', () => {
  const file = fx.file()
  fs.writeFileSync(file, '')
  fs.chmodSync(file, 0o640)
  const s = fx.open(file)
  must(s.record(human(CHILD)))
  expect(fs.statSync(file).mode & 0o777).toBe(0o640)
})

describe('ERR_DB when the file cannot be a database', () => {
  test('a directory', () => {
    expect(codeOf(() => new SessionState(fx.dir()))).toBe('ERR_DB')
  })

  test('a path under a regular file', () => {
    const plain = path.join(fx.dir(), 'plain.txt')
    fs.writeFileSync(plain, 'x')
    expect(codeOf(() => new SessionState(path.join(plain, 'state.sqlite')))).toBe('ERR_DB')
  })

  test('a path that cannot be created names the file', () => {
    const err = errOf(() => new SessionState('/proc/nope/x.sqlite'))
    expect(err.code).toBe('ERR_DB')
    expect(err.message).toContain('/proc/nope/x.sqlite')
  })
})

describe('ERR_NOT_SQLITE for a file that is not SQLite, wherever it is met', () => {
  test('the constructor, SessionState.open and inspectDatabase give one code, and the file is left as it was', async () => {
    const dir = fs.mkdtempSync(path.join(fx.dir(), 'junk-'))
    const junk = path.join(dir, 'junk')
    fs.writeFileSync(junk, Buffer.alloc(8192, 0x5a))
    const ctor = errOf(() => new SessionState(junk))
    expect(ctor.code).toBe('ERR_NOT_SQLITE')
    expect(ctor.message).toContain(junk)
    const opened = await SessionState.open(junk).then(
      () => undefined,
      (e: SessionStateError) => e,
    )
    expect(opened?.code).toBe('ERR_NOT_SQLITE')
    expect(opened?.message).toContain(junk)
    expect(errOf(() => inspectDatabase(junk)).code).toBe('ERR_NOT_SQLITE')
    expect(fs.readFileSync(junk).equals(Buffer.alloc(8192, 0x5a))).toBe(true)
    expect(fs.readdirSync(dir)).toEqual(['junk'])
  })

  test('the empty path is ERR_INVALID_ARG', () => {
    expect(codeOf(() => new SessionState(''))).toBe('ERR_INVALID_ARG')
  })
})
