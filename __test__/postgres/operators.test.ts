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

/**
 * A TCP proxy on 127.0.0.1 in front of the cluster that holds every chunk `ms` before passing
 * it on, each way, in order: a round trip through it takes at least 2 × `ms`.
 */
async function slowLink(ms: number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>()
  const pipe = (from: net.Socket, to: net.Socket) => {
    let chain = Promise.resolve()
    from.on('data', (chunk) => {
      chain = chain.then(() => new Promise((resolve) => setTimeout(resolve, ms))).then(() => {
        if (!to.destroyed) to.write(chunk)
      })
    })
    from.on('close', () => void chain.then(() => to.destroy()))
    from.on('error', () => {})
  }
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: pg.get().port })
    for (const s of [client, upstream]) sockets.add(s)
    pipe(client, upstream)
    pipe(upstream, client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

test('a role default statement_timeout of 100 ms: a record that waits 600 ms for a head row succeeds (the store keeps its own)', async () => {
  const url = await role('op_timeouts', ["statement_timeout = '100ms'"])
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
  expect(errors.codes()).toEqual([])
  await holder.end()
  await admin.end()
}, 60000)

test('a role default idle_in_transaction_session_timeout of 1 ms over a link with a 10 ms round trip: every call succeeds', async () => {
  await role('op_idle', ["idle_in_transaction_session_timeout = '1ms'"])
  // Any transaction of the store that waits for an answer before its next statement sits idle
  // in it for 10 ms or more here, ten times the role's timeout.
  const link = await slowLink(5)
  try {
    const errors = errorSink()
    const s = await SessionState.open(`postgresql://op_idle@127.0.0.1:${link.port}/postgres?sslmode=disable`, {
      schema: 'op_idle',
      onError: errors.onError,
    })
    stores.push(s)
    expect(await s.watchAsync(MAIN, CHILD)).toBe(true)
    expect((await s.recordAsync(human(CHILD)))?.sequence).toBe(1)
    // Ten records in flight together: the writer commits them as groups.
    const many = await Promise.all(
      Array.from({ length: 10 }, (_, i) => s.recordAsync(human(i % 2 ? CHILD : 'agent:main:subagent:b'))),
    )
    expect(many.filter((r) => r === null)).toEqual([])
    expect((await s.drainAsync(MAIN)).map((n) => n.targetKey)).toEqual([CHILD])
    expect((await s.changesSinceAsync(CHILD, 0)).stateChanges.events).toHaveLength(6)
    expect(errors.codes()).toEqual([])
    await s.closeAsync()
  } finally {
    await link.close()
  }
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
