// A PostgreSQL store from JavaScript: SessionState.open on a URL with its options (refused on
// a file), and ERR_ASYNC_ONLY from every synchronous method that may need the database,
// whatever is queued (one answer per method: nothing queued and a notice queued alike), which
// changes nothing (every row of the store's schema and the queue are compared before and
// after), while peek, stats and close answer at once (docs/postgres.md#sync-methods).
import * as fs from 'node:fs'
import { SessionState, SessionStateError } from '../../lib'
import { codeOf, fixture, human, rejection, type CodedError } from '../helpers'
import { useStores } from './stores'

const stores = useStores('asynconly')
const fx = fixture('asynconly-file')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'
const OTHER = 'agent:main:subagent:d'

/** Every row of every table of `schema`, as text, table by table. */
async function rows(schema: string): Promise<Record<string, string[]>> {
  const c = stores.cluster()
  const tables = await c.sql<{ t: string }>(
    "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    [schema],
  )
  const out: Record<string, string[]> = {}
  for (const { t } of tables) {
    const r = await c.sql<{ row: string }>(`SELECT t::text AS row FROM ${schema}.${t} t ORDER BY 1`)
    out[t] = r.map((x) => x.row)
  }
  return out
}

// The synchronous methods that need the database, each called as a gateway would.
const NEEDS_DB: Record<string, (s: SessionState) => unknown> = {
  record: (s) => s.record(human(CHILD)),
  watch: (s) => s.watch(MAIN, OTHER),
  unwatch: (s) => s.unwatch(MAIN, CHILD),
  cursorRows: (s) => s.cursorRows({ watcherKey: MAIN }),
  stateVersion: (s) => s.stateVersion(CHILD),
  stateVersions: (s) => s.stateVersions([{ sessionKey: CHILD }]),
  changesSince: (s) => s.changesSince(CHILD, 0),
  drain: (s) => s.drain(MAIN),
  acknowledge: (s) => s.acknowledge(MAIN, [CHILD]),
  sweep: (s) => s.sweep(),
  prune: (s) => s.prune(),
  resetSession: (s) => s.resetSession(MAIN),
  deleteSession: (s) => s.deleteSession(CHILD),
  adopt: (s) => s.adopt('agent:main:adopted', { source: 'claude', remoteId: 'node-1:abc' }),
  noteOwnUserMessage: (s) => s.noteOwnUserMessage(CHILD, 'hello'),
  checkUpstream: (s) => s.checkUpstream(CHILD, { found: false }),
  scanUpstream: (s) => s.scanUpstream(),
}
// The synchronous members that answer without the database.
const FROM_MEMORY = ['peek', 'stats', 'isClosed', 'close', 'startUpstreamMonitor', 'stopUpstreamMonitor', 'follow (an async iterator: reads off the JS thread)']

test('every synchronous method of SessionState is either refused on PostgreSQL or answers from memory', () => {
  const members = Object.getOwnPropertyNames(SessionState.prototype).filter(
    (m) => m !== 'constructor' && !m.endsWith('Async'),
  )
  const listed = new Set([...Object.keys(NEEDS_DB), ...FROM_MEMORY.map((m) => m.split(' ')[0])])
  expect(members.filter((m) => !listed.has(m))).toEqual([])
  expect([...listed].filter((m) => !members.includes(m as never))).toEqual([])
})

/** Calls each method of NEEDS_DB on `s`: each throws ERR_ASYNC_ONLY naming it, the queue unchanged. */
function everyRefused(s: SessionState, queued: unknown): void {
  for (const [method, call] of Object.entries(NEEDS_DB)) {
    let thrown: unknown
    try {
      call(s)
    } catch (e) {
      thrown = e
    }
    expect([method, thrown instanceof SessionStateError && thrown.code]).toEqual([method, 'ERR_ASYNC_ONLY'])
    expect([method, (thrown as SessionStateError).during]).toEqual([method, method])
    const instead = { stateVersion: 'use stateVersionsAsync' }
    expect((thrown as Error).message).toContain(instead[method as keyof typeof instead] ?? `use ${method}Async`)
    expect(s.peek(MAIN)).toEqual(queued)
  }
}

test('each synchronous method that may need the database throws ERR_ASYNC_ONLY with nothing queued', async () => {
  const place = stores.place('postgres')
  const errors: CodedError[] = []
  const s = await stores.at(place, { onError: (e) => errors.push(e) })
  const before = await rows(place.options.schema as string)
  // A fresh store: no cursor, no notice, nothing in flight. drain is refused all the same.
  everyRefused(s, [])
  expect(s.peek(MAIN)).toEqual([])
  expect(errors).toEqual([])
  // The peeks served MAIN, whose lease the listener's task writes: every other table is as it was.
  const after = await rows(place.options.schema as string)
  expect({ ...after, session_awareness_served: [] }).toEqual(before)
})

test('each synchronous method that may need the database throws ERR_ASYNC_ONLY with a notice queued, and changes nothing', async () => {
  const place = stores.place('postgres')
  const errors: CodedError[] = []
  const s = await stores.at(place, { onError: (e) => errors.push(e) })
  await s.watchAsync(MAIN, CHILD)
  await s.recordAsync(human(CHILD))
  await s.recordAsync(human(CHILD))
  const schema = place.options.schema as string
  const before = await rows(schema)
  expect(before.session_state_events).toHaveLength(2)
  const queued = s.peek(MAIN)
  expect(queued.map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 0]])
  everyRefused(s, queued)
  // record and adopt throw it even without `strict`: nothing is reported to onError.
  expect(errors).toEqual([])
  // The listener's task may renew MAIN's lease meanwhile (its own work, on its own
  // connection): every row is as it was but the lease's expiry.
  const unexpired = (r: Record<string, string[]>): Record<string, string[]> => ({
    ...r,
    session_awareness_served: (r.session_awareness_served ?? []).map((l) => l.replace(/,\d+\)$/, ')')),
  })
  expect(unexpired(await rows(schema))).toEqual(unexpired(before))
  // The Promise API goes on as if nothing had been called.
  expect((await s.recordAsync(human(CHILD)))?.sequence).toBe(3)
  expect((await s.drainAsync(MAIN)).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 0]])
})

test('peek, stats and close answer without the database; drain is refused for a watcher with nothing queued too', async () => {
  const s = await stores.open('postgres')
  await s.watchAsync(MAIN, CHILD)
  await s.recordAsync(human(CHILD))
  expect(s.peek(MAIN).map((n) => n.changesSince)).toEqual([0])
  expect(codeOf(() => s.drain(OTHER))).toBe('ERR_ASYNC_ONLY')
  expect(s.peek(OTHER)).toEqual([])
  expect(s.stats()).toMatchObject({ store: 'postgres', noticesPending: 1 })
  expect(codeOf(() => s.peek(''))).toBe('ERR_INVALID_ARG')
  s.stopUpstreamMonitor()
  s.close()
  expect(s.isClosed).toBe(true)
  expect(await rejection(s.watchAsync(MAIN, OTHER))).toMatchObject({ code: 'ERR_CLOSED' })
})

test('the constructor on a URL is ERR_ASYNC_ONLY; SessionState.open opens it', async () => {
  const place = stores.place('postgres')
  for (const url of [place.path, place.path.replace('postgresql://', 'postgres://'), place.path.replace('postgresql://', 'PostgreSQL://')]) {
    expect(codeOf(() => new SessionState(url, place.options))).toBe('ERR_ASYNC_ONLY')
  }
  const s = await stores.at(place)
  expect((await s.recordAsync(human(CHILD)))?.sequence).toBe(1)
})

test('schema, the timeouts, the reconnect window, maxWaitingCalls and hostName are options of a PostgreSQL store, refused on a file', async () => {
  for (const [name, value] of [
    ['schema', 'x'],
    ['connectTimeoutMs', 1000],
    ['statementTimeoutMs', 1000],
    ['reconnectWindowMs', 30000],
    ['maxWaitingCalls', 10000],
    ['hostName', 'gw-1'],
  ] as const) {
    const e = (() => {
      try {
        new SessionState(fx.file(), { [name]: value })
      } catch (err) {
        return err as CodedError
      }
      throw new Error('expected a throw')
    })()
    expect(e.code).toBe('ERR_INVALID_ARG')
    expect(e.message).toContain(name)
    expect((await rejection(SessionState.open(fx.file(), { [name]: value }))).code).toBe('ERR_INVALID_ARG')
  }
  const url = stores.cluster().url
  for (const bad of [
    { schema: 'Bad-Name' },
    { schema: 'pg_mine' },
    { schema: 7 },
    { connectTimeoutMs: -1 },
    { statementTimeoutMs: 1.5 },
    { reconnectWindowMs: -1 },
    { reconnectWindowMs: 2 ** 31 },
    { maxWaitingCalls: 0 },
    { maxWaitingCalls: 1_000_001 },
    { hostName: '' },
    { hostName: 'a\u0000b' },
    { hostName: 'h'.repeat(256) },
    { hostName: 3 },
  ]) {
    expect([bad, (await rejection(SessionState.open(url, bad as never))).code]).toEqual([bad, 'ERR_INVALID_ARG'])
  }
})

test('a URL of another scheme, a URL with no host and an unknown URL parameter are ERR_INVALID_ARG, and nothing is created', async () => {
  // A text with "://" that is not a PostgreSQL URL would otherwise be a relative file path.
  const before = fs.readdirSync('.').sort()
  const secret = 'hunter22-secret'
  for (const url of [`mysql://u:${secret}@h/db`, `redis://h:6379`, 'postgres://', `postgresql://u:${secret}@/db`]) {
    expect([url, codeOf(() => new SessionState(url))]).toEqual([url, url.startsWith('postgres') ? 'ERR_ASYNC_ONLY' : 'ERR_INVALID_ARG'])
    const e = await rejection(SessionState.open(url))
    expect([url, e.code]).toEqual([url, 'ERR_INVALID_ARG'])
    expect(e.message).not.toContain(secret)
  }
  const e = await rejection(SessionState.open(`${stores.cluster().url}?sslmode=disable&aplication_name=gw`))
  expect(e.code).toBe('ERR_INVALID_ARG')
  expect(e.message).toContain('"aplication_name"')
  expect(fs.readdirSync('.').sort()).toEqual(before)
})

test('the tables go to the schema the option names, or to session_awareness by default', async () => {
  const c = stores.cluster()
  const tables = async (schema: string) =>
    (await c.sql<{ t: string }>('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1', [schema])).map((r) => r.t)
  const named = await stores.open('postgres', { schema: 'gateway_one' })
  await named.recordAsync(human(CHILD))
  expect(await tables('gateway_one')).toEqual(expect.arrayContaining(['session_state_events', 'session_state_heads', 'session_watch_cursors']))
  const plain = await SessionState.open(c.url)
  try {
    expect((await plain.recordAsync(human(CHILD)))?.sequence).toBe(1)
    expect(await tables('session_awareness')).toEqual(await tables('gateway_one'))
  } finally {
    await plain.closeAsync()
  }
})

test('a wrong password is ERR_DB, and no message names it', async () => {
  const c = stores.cluster()
  const secret = 'not-the-password-0123'
  const url = c.passwordUrl.replace(`:${c.password}@`, `:${secret}@`)
  const e = await rejection(SessionState.open(url))
  expect(e.code).toBe('ERR_DB')
  expect(e.message).not.toContain(secret)
  const param = `postgresql://${c.passwordRole}@127.0.0.1:${c.port}/postgres?password=${secret}`
  const e2 = await rejection(SessionState.open(param))
  expect(e2.code).toBe('ERR_DB')
  expect(e2.message).not.toContain(secret)
  await c.sql(`GRANT CREATE ON DATABASE postgres TO ${c.passwordRole}`)
  const ok = await SessionState.open(c.passwordUrl, { schema: 'with_password' })
  expect((await ok.recordAsync(human(CHILD)))?.sequence).toBe(1)
  await ok.closeAsync()
})
