// Operators' settings (docs/postgres.md#settings) and what a failure to connect or to create
// the tables names (docs/postgres.md#errors). Each role here gets its defaults with ALTER ROLE
// … SET, as an operator would; the store connects as that role (trust authentication).
import net from 'node:net'

import { SessionState, errorSink, human, type CodedError } from '../helpers'
import { backendPidOf, connect, untilBlocked, usePostgres } from './server'

const pg = usePostgres('operators')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'

const stores: SessionState[] = []
afterEach(async () => {
  for (const s of stores.splice(0)) await s.closeAsync().catch(() => {})
})

/** The URL of role `role` on the cluster itself (not through a pooler). */
function urlOf(role: string): string {
  return `postgresql://${role}@127.0.0.1:${pg.get().port}/postgres`
}

/** A login role that may create schemas in the database, with `defaults` (`name = value`). */
async function role(name: string, defaults: string[]): Promise<string> {
  const c = pg.get()
  await c.sql(`CREATE ROLE ${name} LOGIN`)
  await c.sql(`GRANT CREATE ON DATABASE postgres TO ${name}`)
  for (const d of defaults) await c.sql(`ALTER ROLE ${name} SET ${d}`)
  return urlOf(name)
}

async function openErr(url: string, options: Parameters<typeof SessionState.open>[1]): Promise<CodedError> {
  return (await SessionState.open(url, options).then(
    (s) => {
      stores.push(s)
      throw new Error('opened')
    },
    (e: unknown) => e,
  )) as CodedError
}

test('a role default statement_timeout of 100 ms and idle_in_transaction_session_timeout of 1 ms: the store keeps its own', async () => {
  const url = await role('op_timeouts', ["statement_timeout = '100ms'", "idle_in_transaction_session_timeout = '1ms'"])
  const errors = errorSink()
  const s = await SessionState.open(url, { schema: 'op_timeouts', onError: errors.onError })
  stores.push(s)
  expect((await s.recordAsync(human(CHILD)))?.sequence).toBe(1)
  // A record that waits 600 ms for the head row another transaction holds: past the role's
  // 100 ms, inside the store's 30 s.
  const holder = await connect(urlOf('postgres'), 'holder')
  await holder.query('BEGIN')
  await holder.query('SELECT 1 FROM op_timeouts.session_state_heads FOR UPDATE')
  const pending = s.recordAsync(human(CHILD))
  const admin = await connect(urlOf('postgres'), 'admin')
  await untilBlocked(admin, await waitForWaiter(admin), await backendPidOf(holder))
  await new Promise((resolve) => setTimeout(resolve, 600))
  await holder.query('COMMIT')
  expect((await pending)?.sequence).toBe(2)
  // Group commits (records in flight together), watches and drains: transactions of several
  // statements, none ended by the role's 1 ms idle timeout.
  expect(await s.watchAsync(MAIN, CHILD)).toBe(true)
  for (let i = 0; i < 20; i++) {
    const group = await Promise.all([s.recordAsync(human(CHILD)), s.recordAsync(human(`agent:main:subagent:g${i}`))])
    expect(group.map((r) => r === null)).toEqual([false, false])
  }
  expect((await s.drainAsync(MAIN)).length).toBe(1)
  expect(errors.codes()).toEqual([])
  await holder.end()
  await admin.end()
}, 60000)

async function waitForWaiter(admin: Awaited<ReturnType<typeof connect>>): Promise<number> {
  for (let i = 0; i < 400; i++) {
    const r = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE usename = 'op_timeouts' AND wait_event_type = 'Lock'",
    )
    if (r.rows.length > 0) return r.rows[0].pid
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error('the record never waited for the head row')
}

test('default_transaction_read_only = on: ERR_DB naming read-only at open, nothing created', async () => {
  const url = await role('op_readonly', ['default_transaction_read_only = on'])
  const e = await openErr(url, { schema: 'op_readonly' })
  expect(e.code).toBe('ERR_DB')
  expect(e.message).toContain('read-only')
  expect(e.message).toContain('default_transaction_read_only')
  const rows = await pg.get().sql<{ n: number }>("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'op_readonly'")
  expect(rows[0].n).toBe(0)
})

test('a search_path that puts another schema first, with tables and functions of the same names: the store uses its own', async () => {
  const c = pg.get()
  const url = await role('op_path', ['search_path = decoy, pg_catalog, public'])
  await c.sql('CREATE SCHEMA decoy AUTHORIZATION op_path')
  await c.sql('CREATE TABLE decoy.session_state_events (x int)')
  await c.sql('CREATE TABLE decoy.session_state_heads (x int)')
  // Ahead of pg_catalog's in this path: a store that relied on the path would call these.
  await c.sql(
    "CREATE FUNCTION decoy.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'decoy pg_notify'; END$$",
  )
  await c.sql(
    "CREATE FUNCTION decoy.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'decoy unnest'; END$$",
  )
  const errors = errorSink()
  const heard: string[] = []
  const b = await SessionState.open(url, {
    schema: 'op_path',
    serveWatchers: [MAIN],
    onNotice: (n) => heard.push(n.targetKey),
    onError: errors.onError,
  })
  stores.push(b)
  const a = await SessionState.open(url, { schema: 'op_path', onError: errors.onError })
  stores.push(a)
  expect(await b.watchAsync(MAIN, CHILD)).toBe(true)
  expect((await a.recordAsync(human(CHILD)))?.sequence).toBe(1)
  const group = await Promise.all([a.recordAsync(human(CHILD)), a.recordAsync(human('agent:main:subagent:d'))])
  expect(group.map((r) => r?.sessionKey)).toEqual([CHILD, 'agent:main:subagent:d'])
  for (let i = 0; i < 200 && heard.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 25))
  expect(heard).toEqual([CHILD])
  expect((await c.sql<{ n: number }>('SELECT count(*)::int AS n FROM op_path.session_state_events'))[0].n).toBe(3)
  expect((await c.sql<{ n: number }>('SELECT count(*)::int AS n FROM decoy.session_state_events'))[0].n).toBe(0)
  expect((await c.sql<{ n: number }>('SELECT count(*)::int AS n FROM decoy.session_state_heads'))[0].n).toBe(0)
  expect(errors.codes()).toEqual([])
}, 60000)

/** A port nothing listens on. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })
}

test('a refused connection is ERR_DB naming host, port and database, never the password', async () => {
  const port = await closedPort()
  const e = await openErr(`postgresql://gw:hunter2secret@127.0.0.1:${port}/appdb?sslmode=disable`, { schema: 'x' })
  expect(e.code).toBe('ERR_DB')
  expect(e.message).toContain(`host 127.0.0.1, port ${port}, database appdb`)
  expect(e.message).not.toContain('hunter2secret')
})

test('a role that may not create the schema: ERR_DB naming the schema', async () => {
  const c = pg.get()
  // PUBLIC has no CREATE on a database: this role may connect, not create a schema.
  await c.sql('CREATE ROLE op_nocreate LOGIN')
  const e = await openErr(urlOf('op_nocreate'), { schema: 'op_denied' })
  expect(e.code).toBe('ERR_DB')
  expect(e.message).toContain('schema "op_denied"')
})
