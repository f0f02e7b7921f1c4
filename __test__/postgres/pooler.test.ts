// The store behind a real PgBouncer (docs/postgres.md#poolers), started by the tests in front
// of this file's cluster. Session mode: two hosts through it, notices across hosts handed out
// once, concurrent records none lost or twice, a follower that sees every event in order.
// Transaction and statement mode: refused at open with ERR_POOLER_MODE, nothing written.
import { startPgBouncer, type PgBouncer } from '../../scripts/pg/pgbouncer'
import { SessionState, errorSink, human, waitFor, type CodedError } from '../helpers'
import { usePostgres } from './server'

const pg = usePostgres('pooler')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'

const bouncers: PgBouncer[] = []
const stores: SessionState[] = []
afterEach(async () => {
  for (const s of stores.splice(0)) await s.closeAsync().catch(() => {})
  for (const b of bouncers.splice(0)) await b.stop()
})

async function bouncer(mode: 'session' | 'transaction' | 'statement', poolSize?: number): Promise<PgBouncer> {
  // The server's URL may itself be a pooler's (SESSION_AWARENESS_PG_POOLER): start at the server.
  const b = await startPgBouncer(pg.get(), { mode, poolSize })
  bouncers.push(b)
  return b
}

async function open(url: string, options: Parameters<typeof SessionState.open>[1]): Promise<SessionState> {
  const s = await SessionState.open(url, options)
  stores.push(s)
  return s
}

async function schemaExists(name: string): Promise<boolean> {
  const rows = await pg.get().sql<{ n: number }>('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [name])
  return rows[0].n === 1
}

test("session mode: two hosts through PgBouncer; notices cross once, 400 concurrent records none lost or twice, a follower reads each session's in order", async () => {
  const b = await bouncer('session')
  const schema = 'pooler_session'
  const errors = errorSink()
  const heard: string[] = []
  const hostB = await open(b.url, {
    schema,
    serveWatchers: [MAIN],
    onNotice: (n) => heard.push(`${n.targetKey} ${n.changesSince}`),
    onError: errors.onError,
  })
  const hostA = await open(b.url, { schema, onError: errors.onError })
  expect(await hostB.watchAsync(MAIN, CHILD)).toBe(true)
  expect((await hostA.recordAsync(human(CHILD)))?.sequence).toBe(1)
  await waitFor(() => heard.length === 1, "host B's notice through the pooler", 10_000)
  expect(heard).toEqual([`${CHILD} 0`])
  expect((await hostB.drainAsync(MAIN)).map((n) => n.targetKey)).toEqual([CHILD])
  expect(await hostA.drainAsync(MAIN)).toEqual([])
  // 400 records on 4 sessions from both hosts at once.
  const keys = [0, 1, 2, 3].map((i) => `agent:main:subagent:p${i}`)
  const results = await Promise.all(
    Array.from({ length: 400 }, (_, i) => (i % 2 ? hostA : hostB).recordAsync(human(keys[i % 4]))),
  )
  expect(results.filter((r) => r === null)).toEqual([])
  const all = results.map((r) => r?.sequence)
  expect(new Set(all).size).toBe(400)
  for (const key of keys) {
    const seqs = results.filter((r) => r?.sessionKey === key).map((r) => r?.sequence ?? 0)
    expect(seqs.length).toBe(100)
    // The follower's read: every event of the session once, in sequence order, none else.
    const d = await hostB.changesSinceAsync(key, 0)
    expect(d.stateChanges.events.map((e) => e.sequence)).toEqual([...seqs].sort((x, y) => x - y))
    expect(d.stateVersion).toBe(Math.max(...seqs))
  }
  expect(errors.errors).toEqual([])
}, 60000)

test('transaction mode: SessionState.open refuses with ERR_POOLER_MODE naming the mode, and writes nothing', async () => {
  const b = await bouncer('transaction')
  const schema = 'pooler_transaction'
  const e = (await SessionState.open(b.url, { schema }).then(
    () => null,
    (err: unknown) => err,
  )) as CodedError | null
  expect(e?.code).toBe('ERR_POOLER_MODE')
  expect(e?.message).toContain('transaction mode')
  expect(await schemaExists(schema)).toBe(false)
  // The same URL on the server itself opens.
  const direct = await open(`postgresql://postgres@127.0.0.1:${pg.get().port}/postgres`, { schema })
  expect((await direct.recordAsync(human(CHILD)))?.sequence).toBe(1)
}, 60000)

test('transaction mode with one server connection (the check waits for it): refused within the connect timeout', async () => {
  const b = await bouncer('transaction', 1)
  const began = Date.now()
  const e = (await SessionState.open(b.url, { schema: 'pooler_one', connectTimeoutMs: 1000 }).then(
    () => null,
    (err: unknown) => err,
  )) as CodedError | null
  expect(e?.code).toBe('ERR_POOLER_MODE')
  expect(Date.now() - began).toBeLessThan(10_000)
  expect(await schemaExists('pooler_one')).toBe(false)
}, 60000)

test('statement mode: refused with ERR_POOLER_MODE naming the mode', async () => {
  const b = await bouncer('statement')
  const e = (await SessionState.open(b.url, { schema: 'pooler_statement' }).then(
    () => null,
    (err: unknown) => err,
  )) as CodedError | null
  expect(e?.code).toBe('ERR_POOLER_MODE')
  expect(e?.message).toContain('statement mode')
  expect(await schemaExists('pooler_statement')).toBe(false)
}, 60000)
