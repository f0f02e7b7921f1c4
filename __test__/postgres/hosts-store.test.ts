// Gateways on several hosts sharing one PostgreSQL store (docs/postgres.md): the server in a
// network namespace of its own and a gateway process on each of two other hosts
// (scripts/pg/hosts.js), each reaching the server only over its own link.
//
// - Order: a per-session `changesSince` follower ends equal to the table, while a naive global
//   follower ("every sequence above N") is seen to skip an event whose transaction commits
//   late: the interleaving is forced by a transaction of the test's that holds a lock the late
//   record's insert waits on (a trigger on the events table, after the sequence is drawn).
// - Faults: kill -9 of a gateway in the middle of a group, a server restart with `-m
//   immediate`, `pg_terminate_backend` of every backend, and a cut link that comes back. Each
//   asserts that nothing resolved is missing, that nothing is half-written (every head equals
//   its session's last event), and that no notice is handed out twice, by (watcher, target, N).
import type { Client } from 'pg'

import { startHosts, type Hosts } from '../../scripts/pg/hosts'
import { HostGateway } from './hosts-gateway'
import { connect } from './server'

const SCHEMA = 'session_awareness'
const MAIN = 'agent:main:main'
const child = (name: string) => `agent:main:subagent:${name}`
const input = (sessionKey: string, summary: string, watchers?: string[]) => ({
  sessionKey,
  kind: 'human_direct_message',
  actorType: 'human',
  summary,
  ...(watchers ? { watchers } : {}),
})

type Event = { sequence: number; kind: string; summary: string }
type Changes = { stateVersion: number; stateChanges: { events: Event[]; truncated: boolean; historyGap: boolean } }
type Notice = { watcherKey: string; targetKey: string; changesSince: number }

let hosts: Hosts
let admin: Client
const gateways: HostGateway[] = []

async function gateway(i: number, options: Record<string, unknown> = {}): Promise<HostGateway> {
  const g = await HostGateway.start(hosts, i, { syncIntervalMs: 200, ...options })
  gateways.push(g)
  return g
}

/** The test's own connection (again after a restart of the server ended it). */
async function connectAdmin(): Promise<void> {
  await admin?.end().catch(() => {})
  admin = await connect(hosts.cluster.url, 'sa-admin')
  // A restart or a terminated backend ends it with an error event: the next connectAdmin replaces it.
  admin.on('error', () => {})
}

beforeAll(async () => {
  hosts = await startHosts({ name: 'hosts-store' })
  await connectAdmin()
}, 120000)

afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop()))
})

afterAll(async () => {
  await admin?.end()
  await hosts?.stop()
}, 60000)

/** The sequences of `session`'s rows in the table, in order. */
async function tableSequences(session: string): Promise<number[]> {
  const r = await admin.query<{ sequence: string }>(
    `SELECT sequence FROM ${SCHEMA}.session_state_events WHERE session_key = $1 ORDER BY sequence`,
    [session],
  )
  return r.rows.map((row) => Number(row.sequence))
}

/** Heads that differ from their session's last event: none when nothing is half-written. */
async function badHeads(): Promise<unknown[]> {
  const r = await admin.query(
    `SELECT h.session_key, h.last_sequence, max(e.sequence) AS last_event
       FROM ${SCHEMA}.session_state_heads h
       LEFT JOIN ${SCHEMA}.session_state_events e ON e.session_key = h.session_key AND e.agent_id = h.agent_id
      GROUP BY h.session_key, h.agent_id, h.last_sequence
     HAVING h.last_sequence IS DISTINCT FROM max(e.sequence)`,
  )
  return r.rows
}

/** Follows `session` through `g`'s changesSince from 0, page by page; returns every sequence. */
async function follow(g: HostGateway, session: string, after = 0): Promise<number[]> {
  const seen: number[] = []
  for (;;) {
    const c = await g.call<Changes>('changesSince', { session, after, options: { limit: 50 } })
    const { events, truncated } = c.stateChanges
    seen.push(...events.map((e) => e.sequence))
    if (events.length > 0) after = events[events.length - 1].sequence
    if (!truncated) return seen
  }
}

/** Makes the insert of an event of `session` wait while the test holds advisory lock `key`. */
async function gate(session: string, key: number): Promise<() => Promise<void>> {
  const fn = `${SCHEMA}.sa_test_gate_${key}`
  await admin.query(`CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(${key}); RETURN NEW; END $$`)
  await admin.query(`CREATE TRIGGER sa_test_gate_${key} AFTER INSERT ON ${SCHEMA}.session_state_events
    FOR EACH ROW WHEN (NEW.session_key = '${session}') EXECUTE FUNCTION ${fn}()`)
  const holder = await connect(hosts.cluster.url, 'sa-holder')
  await holder.query('BEGIN')
  await holder.query('SELECT pg_advisory_xact_lock($1)', [key])
  const holderPid = Number((await holder.query('SELECT pg_backend_pid() AS p')).rows[0].p)
  let open = true
  const release = async () => {
    if (!open) return
    open = false
    await holder.query('COMMIT').catch(() => {})
    await holder.end().catch(() => {})
    await admin.query(`DROP TRIGGER IF EXISTS sa_test_gate_${key} ON ${SCHEMA}.session_state_events`)
    await admin.query(`DROP FUNCTION IF EXISTS ${fn}()`)
  }
  return Object.assign(release, { holderPid })
}

/** Waits until some backend waits for backend `holder`; resolves to its pid. */
async function untilSomeoneWaitsFor(holder: number): Promise<number> {
  for (let i = 0; i < 800; i++) {
    const r = await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
      [holder],
    )
    if (r.rows.length > 0) return r.rows[0].pid
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`nobody ever waited for backend ${holder}`)
}

/** The (watcher, target, N) of every notice handed out, each counted: a count above 1 is a double. */
function handedOutTwice(notices: Notice[]): string[] {
  const counts = new Map<string, number>()
  for (const n of notices) {
    const k = `${n.watcherKey} ${n.targetKey} ${n.changesSince}`
    counts.set(k, (counts.get(k) ?? 0) + 1)
  }
  return [...counts].filter(([, c]) => c > 1).map(([k]) => k)
}

test('a per-session follower never skips; the naive global follower is seen to skip the late commit', async () => {
  const g1 = await gateway(1)
  const g2 = await gateway(2)
  const late = child('late')
  const early = child('early')
  const before = Number((await admin.query(`SELECT coalesce(max(sequence), 0) AS n FROM ${SCHEMA}.session_state_events`)).rows[0].n)
  const release = (await gate(late, 4201)) as (() => Promise<void>) & { holderPid: number }
  let naive = before
  const naiveSeen: number[] = []
  const pollNaive = async () => {
    const r = await admin.query<{ sequence: string }>(
      `SELECT sequence FROM ${SCHEMA}.session_state_events WHERE sequence > $1 ORDER BY sequence`,
      [naive],
    )
    for (const row of r.rows) naiveSeen.push(Number(row.sequence))
    if (naiveSeen.length > 0) naive = naiveSeen[naiveSeen.length - 1]
  }
  try {
    const pending = g1.call<Event>('record', { input: input(late, 'late') })
    await untilSomeoneWaitsFor(release.holderPid)
    const second = await g2.call<Event>('record', { input: input(early, 'early') })
    await pollNaive()
    await release()
    const first = await pending
    await pollNaive()
    expect(first.sequence).toBeLessThan(second.sequence)
    // The negative control: the global follower moved past `first` before it committed.
    expect(naiveSeen).toEqual([second.sequence])
    // Per-session followers, each on the other host, see everything.
    expect(await follow(g2, late)).toEqual([first.sequence])
    expect(await follow(g1, early)).toEqual([second.sequence])
  } finally {
    await release()
  }

  // Then both hosts write a burst into five shared sessions while each follows them all.
  const sessions = [0, 1, 2, 3, 4].map((i) => child(`burst-${i}`))
  const positions = new Map(sessions.map((s) => [s, 0]))
  const followed = new Map<string, number[]>(sessions.map((s) => [s, []]))
  let writing = true
  const follower = (async () => {
    while (writing) {
      for (const s of sessions) {
        const got = await follow(g2, s, positions.get(s))
        followed.get(s)?.push(...got)
        if (got.length > 0) positions.set(s, got[got.length - 1])
      }
    }
  })()
  const burst = (g: HostGateway, tag: string) =>
    g.call<(number | null)[]>('recordMany', {
      inputs: Array.from({ length: 150 }, (_, n) => input(sessions[n % sessions.length], `${tag} ${n}`)),
    })
  const [a, b] = await Promise.all([burst(g1, 'one'), burst(g2, 'two')])
  writing = false
  await follower
  for (const s of sessions) {
    const rest = await follow(g2, s, positions.get(s))
    followed.get(s)?.push(...rest)
    expect(followed.get(s)).toEqual(await tableSequences(s))
  }
  expect([...a, ...b].every((x) => typeof x === 'number')).toBe(true)
  expect(await badHeads()).toEqual([])
}, 120000)

test('notices cross hosts: recorded on host 1, queued and woken on host 2 that serves the watcher, handed out once', async () => {
  const g1 = await gateway(1)
  const g2 = await gateway(2)
  const targets = Array.from({ length: 200 }, (_, i) => child(`cross-${i}`))
  for (const t of targets) await g2.call('watch', { watcher: MAIN, target: t })
  // A drain that leaves nothing queued withdraws the wake not yet made (semantics.md#wakes):
  // the wake is asserted before the drain loop starts, on a notice that loop then hands out.
  await g1.call('record', { input: input(targets[0], 'wakes host 2') })
  const woken = Date.now() + 10000
  while (g2.wakes.length === 0 && Date.now() < woken) await new Promise((resolve) => setTimeout(resolve, 10))
  expect(g2.wakes.map((w) => w.req)).toEqual([
    { source: 'session-state', intent: 'immediate', reason: `session-state:${targets[0]}`, sessionKey: MAIN },
  ])
  await g2.call('startDrainLoop', { watcher: MAIN, everyMs: 50 })
  // One notice per target, recorded on host 1 one at a time: the latency from the record call
  // to the notice entering host 2's queue.
  const latencies: number[] = []
  for (const t of targets) {
    const t0 = performance.timeOrigin + performance.now()
    await g1.call('record', { input: input(t, 'across') })
    const until = Date.now() + 10000
    let heard
    while (!(heard = g2.heard.find((h) => h.target === t)) && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
    expect(heard).toBeDefined()
    latencies.push((heard?.at ?? 0) - t0)
  }
  const sorted = [...latencies].sort((a, b) => a - b)
  console.log(
    `cross-host notice latency over ${sorted.length}: p50 ${sorted[Math.floor(sorted.length * 0.5)].toFixed(1)} ms, ` +
      `p99 ${sorted[Math.floor(sorted.length * 0.99)].toFixed(1)} ms`,
  )
  await new Promise((resolve) => setTimeout(resolve, 500))
  const on2 = await g2.call<Notice[]>('stopDrainLoop')
  expect(handedOutTwice(on2)).toEqual([])
  expect(new Set(on2.map((n) => n.targetKey))).toEqual(new Set(targets))
  expect(new Set(g2.wakes.map((w) => w.req.sessionKey))).toEqual(new Set([MAIN]))
  // Host 1 does not serve MAIN: it queued nothing and woke nobody.
  expect(g1.heard).toEqual([])
  expect(g1.wakes).toEqual([])

  // Both hosts serve MAIN and drain it at once: each notice is handed out by one of them only.
  await g1.call('startDrainLoop', { watcher: MAIN, everyMs: 2 })
  await g2.call('startDrainLoop', { watcher: MAIN, everyMs: 2 })
  for (let round = 0; round < 5; round++) {
    await g1.call('recordMany', { inputs: targets.slice(0, 20).map((t) => input(t, `round ${round}`)) })
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const both = [...(await g1.call<Notice[]>('stopDrainLoop')), ...(await g2.call<Notice[]>('stopDrainLoop'))]
  expect(both.filter((n) => 'error' in n)).toEqual([])
  expect(handedOutTwice(both)).toEqual([])
  expect(new Set(both.map((n) => n.targetKey))).toEqual(new Set(targets.slice(0, 20)))
}, 180000)

test('kill -9 of a gateway in the middle of a group leaves the group all there or not there', async () => {
  const g1 = await gateway(1)
  const g2 = await gateway(2)
  const held = child('held')
  const others = [0, 1, 2].map((i) => child(`group-${i}`))
  const release = (await gate(held, 4202)) as (() => Promise<void>) & { holderPid: number }
  try {
    const inputs = [...others.map((s) => input(s, 'before')), input(held, 'held'), ...others.map((s) => input(s, 'after'))]
    void g1.call('recordMany', { inputs }).catch(() => {})
    await untilSomeoneWaitsFor(release.holderPid)
    await g1.kill()
  } finally {
    await release()
  }
  // The killed gateway's backend ends its transaction one way or the other; then the table is whole.
  for (let i = 0; i < 200; i++) {
    const r = await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'idle in transaction' OR wait_event_type = 'Lock'",
    )
    if (r.rows[0].n === 0) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  // The writer may have committed a first group before the one with the held record (it takes
  // what has arrived): the group that was in flight is not there at all, nor anything after it.
  const counts = await Promise.all([held, ...others].map(tableSequences))
  expect(counts[0]).toEqual([])
  for (const s of counts.slice(1)) expect(s.length).toBeLessThanOrEqual(1)
  const after = (await admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.session_state_events WHERE summary = 'after'`)).rows[0].n
  expect(after).toBe(0)
  expect(await badHeads()).toEqual([])
  // The other host goes on.
  const e = await g2.call<Event>('record', { input: input(held, 'after the crash') })
  expect(await follow(g2, held)).toEqual([...counts[0], e.sequence])
}, 120000)

/** Host 1 records `n` events into `sessions` in groups while `fault` runs; returns what resolved. */
async function recordThrough(g: HostGateway, sessions: string[], fault: () => Promise<void>) {
  const resolved: number[] = []
  let failed = 0
  let going = true
  const writer = (async () => {
    let n = 0
    while (going) {
      const out = await g.call<(number | { error: string } | null)[]>('recordMany', {
        inputs: sessions.map((s) => input(s, `fault ${n++}`)),
      })
      for (const x of out) {
        if (typeof x === 'number') resolved.push(x)
        else failed += 1
      }
    }
  })()
  await new Promise((resolve) => setTimeout(resolve, 300))
  await fault()
  // Later calls succeed without reopening: wait until one does.
  const until = Date.now() + 30000
  const before = resolved.length
  while (resolved.length === before && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100))
  await new Promise((resolve) => setTimeout(resolve, 300))
  going = false
  await writer
  return { resolved, failed, recoveredAfter: resolved.length > before }
}

async function assertWhole(g: HostGateway, sessions: string[], resolved: number[]): Promise<void> {
  const inTable = new Set((await Promise.all(sessions.map(tableSequences))).flat())
  expect(resolved.filter((s) => !inTable.has(s))).toEqual([])
  expect(await badHeads()).toEqual([])
  for (const s of sessions) expect(await follow(g, s)).toEqual(await tableSequences(s))
}

test('a server restart with -m immediate: nothing resolved is lost, the store reconnects by itself', async () => {
  const g1 = await gateway(1)
  const sessions = [0, 1, 2].map((i) => child(`restart-${i}`))
  const out = await recordThrough(g1, sessions, async () => {
    await hosts.cluster.restart({ mode: 'immediate' })
    await connectAdmin()
  })
  expect(out.recoveredAfter).toBe(true)
  await assertWhole(g1, sessions, out.resolved)
  // One report per failed record, named by its call; the rest are the store's background tasks
  // (its listener losing the connection), named as such (semantics.md#errors).
  expect(g1.during.filter((d) => d === 'recordAsync')).toHaveLength(out.failed)
  expect(g1.during.filter((d) => d !== 'recordAsync' && !d?.startsWith('task:'))).toEqual([])
}, 120000)

test('pg_terminate_backend of every backend of the store: nothing resolved is lost, it reconnects', async () => {
  const g1 = await gateway(1)
  const sessions = [0, 1, 2].map((i) => child(`terminate-${i}`))
  const out = await recordThrough(g1, sessions, async () => {
    await admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND application_name <> 'sa-admin'`,
    )
  })
  expect(out.recoveredAfter).toBe(true)
  await assertWhole(g1, sessions, out.resolved)
}, 120000)

test('a cut link: calls in flight settle, nothing resolved is lost, and the store comes back with the link', async () => {
  const g1 = await gateway(1, { statementTimeoutMs: 2000, connectTimeoutMs: 2000 })
  const sessions = [0, 1].map((i) => child(`cut-${i}`))
  const out = await recordThrough(g1, sessions, async () => {
    hosts.cut(1)
    await new Promise((resolve) => setTimeout(resolve, 3000))
    hosts.restore(1)
  })
  expect(out.recoveredAfter).toBe(true)
  await assertWhole(g1, sessions, out.resolved)
}, 120000)

test('a call in flight on a link cut for longer than its deadline settles while the link is still cut', async () => {
  // Deadline: statementTimeoutMs plus the connect timeout (at least 5 s): 7 s here, and no
  // wait for the server past it (reconnectWindowMs 0; the window is tested in
  // crates/core/tests/pg_faults.rs). No listener (syncIntervalMs 0), so the only report is
  // the record's own.
  const g1 = await gateway(1, {
    statementTimeoutMs: 2000,
    connectTimeoutMs: 2000,
    reconnectWindowMs: 0,
    syncIntervalMs: 0,
  })
  const s = child('cut-long')
  const first = await g1.call<Event>('record', { input: input(s, 'before') })
  // The store's first record starts its automatic prune in the background, which waits for
  // the connection; a call queued behind it returns once it is done, so that prune cannot
  // fail on the cut link and report an ERR_DB of its own.
  await g1.call('changesSince', { session: s, after: 0 })
  hosts.cut(1)
  let settled = false
  const during = g1
    .call<(number | { error: string } | null)[]>('recordMany', { inputs: [input(s, 'during')] })
    .finally(() => (settled = true))
  const until = Date.now() + 40000
  while (!settled && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100))
  const settledWhileCut = settled
  hosts.restore(1)
  expect(settledWhileCut).toBe(true)
  // Best-effort as ever: null and one onError with the code of a lost connection.
  expect(await during).toEqual([null])
  expect(g1.errors).toEqual(['ERR_DB'])
  // The next call connects again by itself; nothing but what resolved is in the table.
  const after = await g1.call<Event>('record', { input: input(s, 'after') })
  expect(await tableSequences(s)).toEqual([first.sequence, after.sequence])
  expect(await follow(g1, s)).toEqual([first.sequence, after.sequence])
}, 120000)
