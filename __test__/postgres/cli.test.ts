// The command-line tool on a PostgreSQL store: `inspect` and `events` on a URL give the report
// a SQLite file with the same rows gives (field for field, but the path and the size), under a
// role that may only SELECT the store's tables, with no password in any output; and
// `import <file> <URL>` copies a store file or an OpenClaw database with its sequences,
// idempotently.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { CHILD, OPS, T, cli, writeCliStore } from '../cli-store'
import { SessionState, fixture, rawDb, sql } from '../helpers'
import { usePostgres } from './server'

const TABLES = ['session_state_events', 'session_state_heads', 'session_watch_cursors', 'session_upstream_links']

const pg = usePostgres('cli')
const fx = fixture('pg-cli')
let file = ''

/** `url` as another role (trust authentication on the test cluster). */
const as = (url: string, role: string) => url.replace('postgres@', `${role}@`)

/** Every row of the store's tables in `schema`, as text, table by table. */
async function rows(schema: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {}
  for (const t of TABLES) {
    out[t] = (await pg.get().sql<{ row: string }>(`SELECT t::text AS row FROM ${schema}.${t} t ORDER BY 1`)).map((r) => r.row)
  }
  return out
}

/** Copies the rows of the store file into the tables of `schema` (created by an open). */
async function copy(schema: string): Promise<void> {
  const s = await SessionState.open(pg.get().url, { schema })
  await s.closeAsync()
  for (const t of TABLES) {
    for (const r of sql(file, `SELECT * FROM ${t}`)) {
      const cols = Object.keys(r)
      await pg.get().sql(
        `INSERT INTO ${schema}.${t} (${cols.join(', ')}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(', ')})`,
        cols.map((c) => r[c]),
      )
    }
  }
}

beforeAll(async () => {
  file = fx.file('cli')
  writeCliStore(file, { channel: 'telegram', n: [1, 2] })
  await copy('copied')
  const c = pg.get()
  await c.sql('CREATE ROLE reader LOGIN')
  await c.sql('GRANT USAGE ON SCHEMA copied TO reader')
  await c.sql('GRANT SELECT ON ALL TABLES IN SCHEMA copied TO reader')
  await c.sql(`GRANT USAGE ON SCHEMA copied TO ${c.passwordRole}`)
  await c.sql(`GRANT SELECT ON ALL TABLES IN SCHEMA copied TO ${c.passwordRole}`)
}, 60_000)

test('inspect --json on a URL, as a role with only SELECT, gives the file report of the same rows', async () => {
  const before = await rows('copied')
  const url = as(pg.get().url, 'reader')
  const out = cli('inspect', url, '--schema', 'copied', '--json')
  expect(out.stderr).toBe('')
  expect(out.status).toBe(0)
  const got = JSON.parse(out.stdout)
  const want = JSON.parse(cli('inspect', file, '--json').stdout)
  expect(got).toStrictEqual({ ...want, path: url, fileBytes: expect.any(Number), wal: false })
  expect(got.fileBytes).toBeGreaterThan(0)
  expect(got.counts).toEqual({ events: 4, heads: 3, cursors: 2, upstreamLinks: 0 })
  expect(got.pendingNotices.map((n: { targetKey: string; changesSince: number }) => [n.targetKey, n.changesSince])).toEqual([
    [CHILD, 1],
    [OPS, 0],
  ])
  expect(await rows('copied')).toEqual(before)
})

test('events --json on a URL gives what the file gives, and the text report names the schema', () => {
  const url = as(pg.get().url, 'reader')
  for (const args of [[CHILD], [CHILD, '--since', '1'], [OPS, '--agent', 'ops'], ['agent:main:none']]) {
    const got = cli('events', url, ...args, '--schema', 'copied', '--json')
    expect(got.stderr).toBe('')
    expect(JSON.parse(got.stdout)).toStrictEqual(JSON.parse(cli('events', file, ...args, '--json').stdout))
  }
  const text = cli('inspect', url, '--schema', 'copied')
  expect(text.status).toBe(0)
  expect(text.stdout.split('\n').slice(0, 3)).toEqual([
    `database   ${url}`,
    expect.stringMatching(/^schema {5}copied, \d+ bytes of tables on the server \(read in one read-only snapshot\)$/),
    'rows       4 events, 3 session heads, 2 cursors, 0 upstream links',
  ])
  const none = cli('inspect', url, '--schema', 'nothing_here')
  expect(none.status).toBe(0)
  expect(none.stdout).toContain("tables     none of the store's tables in this schema")
})

test('no output of inspect or events contains the password, and failures are ERR_DB with exit status 1', () => {
  const c = pg.get()
  for (const args of [['inspect', c.passwordUrl], ['events', c.passwordUrl, CHILD]]) {
    const ok = cli(...args, '--schema', 'copied', '--json')
    expect(ok.status).toBe(0)
    expect(ok.stdout + ok.stderr).not.toContain(c.password)
    expect(JSON.parse(ok.stdout).path ?? 'no path').not.toContain(c.password)
  }
  const wrong = c.passwordUrl.replace(c.password, 'wrong-secret-4567')
  for (const args of [['inspect', wrong], ['events', wrong, CHILD], ['inspect', `postgresql://${c.passwordRole}@127.0.0.1:${c.port}/postgres?password=wrong-secret-4567`]]) {
    const bad = cli(...args, '--json')
    expect(bad.status).toBe(1)
    expect(JSON.parse(bad.stderr).error.code).toBe('ERR_DB')
    expect(bad.stdout + bad.stderr).not.toContain('wrong-secret-4567')
    expect(bad.stdout + bad.stderr).not.toContain(c.password)
  }
})

test('--schema is for a URL; a bad schema name is ERR_INVALID_ARG', () => {
  const usage = cli('inspect', file, '--schema', 'copied')
  expect(usage.status).toBe(2)
  expect(usage.stderr).toContain('--schema belongs to a postgres:// URL')
  const bad = cli('inspect', pg.get().url, '--schema', 'Bad-Name', '--json')
  expect(bad.status).toBe(2)
  expect(JSON.parse(bad.stderr).error.code).toBe('ERR_INVALID_ARG')
})

test('a location of another scheme is ERR_INVALID_ARG in inspect, events and import, naming neither its password nor creating anything', () => {
  const before = fs.readdirSync('.').sort()
  for (const args of [
    ['inspect', 'mysql://u:hunter22@h/db', '--json'],
    ['events', 'mysql://u:hunter22@h/db', 'agent:main:main', '--json'],
    ['import', 'mysql://u:hunter22@h/db', file, '--json'],
    ['import', file, 'redis://u:hunter22@h', '--json'],
  ]) {
    const out = cli(...args)
    expect([args, out.status, JSON.parse(out.stderr).error.code]).toEqual([args, 2, 'ERR_INVALID_ARG'])
    expect(out.stderr).not.toContain('hunter22')
  }
  expect(fs.readdirSync('.').sort()).toEqual(before)
})

describe('import into a PostgreSQL store', () => {
  const OPENCLAW = path.join(__dirname, '..', '..', 'crates', 'core', 'tests', 'fixtures', 'openclaw-2026.9.6.sqlite')
  /** Runs the import as a gateway engineer would; its JSON summary. */
  function imported(source: string, dest: string, ...flags: string[]) {
    const out = cli('import', source, dest, ...flags, '--json')
    expect([out.status, out.stderr]).toEqual([0, ''])
    return JSON.parse(out.stdout)
  }
  const same = (url: string, schema: string, reference: string) => {
    const got = JSON.parse(cli('inspect', url, '--schema', schema, '--json').stdout)
    const want = JSON.parse(cli('inspect', reference, '--json').stdout)
    expect(got).toStrictEqual({ ...want, path: url, fileBytes: expect.any(Number), wal: false })
  }

  test('a store file, with its sequences, twice: the second run adds nothing, and the identity numbers after it', async () => {
    const url = pg.get().url
    const first = imported(file, url, '--schema', 'from_file')
    expect(first.events).toEqual({ read: 4, inserted: 4, updated: 0, present: 0, skipped: 0 })
    expect(first.heads).toEqual({ read: 3, inserted: 3, updated: 0, present: 0, skipped: 0 })
    expect(first.cursors).toEqual({ read: 2, inserted: 2, updated: 0, present: 0, skipped: 0 })
    expect(first.sourceLastSequence).toBe(4)
    const after = await rows('from_file')
    const second = imported(file, url, '--schema', 'from_file')
    expect(second.events).toEqual({ read: 4, inserted: 0, updated: 0, present: 4, skipped: 0 })
    expect(second.heads).toEqual({ read: 3, inserted: 0, updated: 0, present: 3, skipped: 0 })
    expect(second.cursors).toEqual({ read: 2, inserted: 0, updated: 0, present: 2, skipped: 0 })
    expect(await rows('from_file')).toEqual(after)
    same(url, 'from_file', file)
    const next = await pg.get().sql<{ n: string }>(
      "SELECT nextval(pg_get_serial_sequence('from_file.session_state_events', 'sequence'))::text AS n",
    )
    expect(next).toEqual([{ n: '5' }])
  })

  test("OpenClaw's state database: the PostgreSQL store ends as the file import does", () => {
    const url = pg.get().url
    const dest = fx.file('openclaw-import')
    const toFile = imported(OPENCLAW, dest)
    const toPg = imported(OPENCLAW, url, '--schema', 'from_openclaw')
    expect(toPg).toStrictEqual(toFile)
    expect(toPg.events.inserted).toBeGreaterThan(0)
    same(url, 'from_openclaw', dest)
    expect(imported(OPENCLAW, url, '--schema', 'from_openclaw').events.inserted).toBe(0)
  })

  test('a diverged history is refused with ERR_IMPORT_DIVERGED and nothing is written', async () => {
    const url = pg.get().url
    imported(file, url, '--schema', 'diverged')
    await pg.get().sql("UPDATE diverged.session_state_events SET summary = 'edited' WHERE sequence = 2")
    await pg.get().sql('DELETE FROM diverged.session_watch_cursors')
    const before = await rows('diverged')
    const out = cli('import', file, url, '--schema', 'diverged', '--json')
    expect(out.status).toBe(1)
    expect(JSON.parse(out.stderr).error.code).toBe('ERR_IMPORT_DIVERGED')
    expect(await rows('diverged')).toEqual(before)
  })

  test('a row PostgreSQL cannot hold (a NUL in its text) is skipped and counted; the others are copied', () => {
    const odd = fx.file('nul')
    const state = new SessionState(odd, { clock: () => T, strict: true })
    state.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'kept' })
    state.close()
    const db = rawDb(odd)
    db.prepare(
      "INSERT INTO session_state_events (sequence, session_key, agent_id, kind, actor_type, occurred_at, summary) VALUES (2, ?, 'main', 'created', 'system', ?, ?)",
    ).run(CHILD, T, 'a\u0000b')
    db.close()
    const summary = imported(odd, pg.get().url, '--schema', 'with_nul')
    expect(summary.events).toEqual({ read: 2, inserted: 1, updated: 0, present: 0, skipped: 1 })
    const again = imported(odd, pg.get().url, '--schema', 'with_nul')
    expect(again.events).toEqual({ read: 2, inserted: 0, updated: 0, present: 1, skipped: 1 })
  })

  test('the summary names the destination without its password', () => {
    const c = pg.get()
    return c.sql(`GRANT CREATE ON DATABASE postgres TO ${c.passwordRole}`).then(() => {
      const out = cli('import', file, c.passwordUrl, '--schema', 'by_password')
      expect(out.status).toBe(0)
      expect(out.stdout).toContain(`imported   ${file} -> postgresql://${c.passwordRole}:***@127.0.0.1:${c.port}/postgres`)
      expect(out.stdout + out.stderr).not.toContain(c.password)
    })
  })
})
