// The order argument of the PostgreSQL store (docs/postgres.md#order), shown on a real server
// with plain SQL: a sequence is drawn at insert, not at commit, so a follower of "every
// sequence above N" skips an event whose transaction commits late (the negative controls);
// locking the session's head row before drawing the sequence makes per-session sequence order
// equal commit order, so a per-session follower never skips. Groups that lock several heads in
// one sorted order never deadlock, the reverse order does (40P01). A LISTEN/NOTIFY hint sent
// after the commit arrives; one sent while the listener is away is lost, so every (re)connect
// needs a catch-up read of the rows.
import type { Client } from 'pg'

import { connect, untilBlocked, usePostgres } from './server'

const pg = usePostgres('ordering')

let schemaN = 0
/** A fresh schema with the two tables of the argument; returns its name. */
async function tables(client: Client): Promise<string> {
  const s = `ord_${++schemaN}`
  await client.query(`CREATE SCHEMA ${s};
    CREATE TABLE ${s}.heads (session_key text PRIMARY KEY, last_sequence bigint NOT NULL);
    CREATE TABLE ${s}.events (sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      session_key text NOT NULL, body text NOT NULL);`)
  return s
}

/** Locks the session's head row (creating it at 0): the statement the store runs first. */
const lockHead = (s: string) =>
  `INSERT INTO ${s}.heads (session_key, last_sequence) VALUES ($1, 0)
   ON CONFLICT (session_key) DO UPDATE SET last_sequence = heads.last_sequence`

/** Inserts an event (drawing its sequence); resolves to the sequence. */
async function insert(c: Client, s: string, session: string, body: string): Promise<number> {
  const r = await c.query<{ sequence: string }>(
    `INSERT INTO ${s}.events (session_key, body) VALUES ($1, $2) RETURNING sequence`,
    [session, body],
  )
  return Number(r.rows[0].sequence)
}

/** A follower: reads the rows above its position (all sessions, or one) and moves to the last. */
function follower(c: Client, s: string, session?: string) {
  let n = 0
  const seen: number[] = []
  return {
    seen,
    async poll() {
      const r = session
        ? await c.query<{ sequence: string }>(
            `SELECT sequence FROM ${s}.events WHERE session_key = $1 AND sequence > $2 ORDER BY sequence`,
            [session, n],
          )
        : await c.query<{ sequence: string }>(`SELECT sequence FROM ${s}.events WHERE sequence > $1 ORDER BY sequence`, [n])
      for (const row of r.rows) seen.push(Number(row.sequence))
      if (seen.length > 0) n = seen[seen.length - 1]
    },
  }
}

const pids = new WeakMap<Client, number>()
/** The client's backend pid, read when it was opened (a client runs one query at a time). */
function backendPid(c: Client): number {
  const pid = pids.get(c)
  if (pid === undefined) throw new Error('a client not opened by open()')
  return pid
}

async function allSequences(c: Client, s: string, session?: string): Promise<number[]> {
  const r = session
    ? await c.query<{ sequence: string }>(`SELECT sequence FROM ${s}.events WHERE session_key = $1 ORDER BY 1`, [session])
    : await c.query<{ sequence: string }>(`SELECT sequence FROM ${s}.events ORDER BY 1`)
  return r.rows.map((row) => Number(row.sequence))
}

const clients: Client[] = []
async function open(n: number): Promise<Client[]> {
  const out: Client[] = []
  for (let i = 0; i < n; i++) {
    const c = await connect(pg.get().url, 'ordering')
    pids.set(c, (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid)
    out.push(c)
  }
  clients.push(...out)
  return out
}
afterEach(async () => {
  for (const c of clients.splice(0)) await c.end().catch(() => {})
})

test('negative control: without the head lock, a global follower skips the event whose transaction commits late', async () => {
  const [t1, t2, reader] = await open(3)
  const s = await tables(reader)
  await t1.query('BEGIN')
  expect(await insert(t1, s, 'a', 'first drawn')).toBe(1)
  await t2.query('BEGIN')
  expect(await insert(t2, s, 'a', 'second drawn')).toBe(2)
  await t2.query('COMMIT')
  const global = follower(reader, s)
  await global.poll()
  expect(global.seen).toEqual([2])
  await t1.query('COMMIT')
  await global.poll()
  expect(await allSequences(reader, s)).toEqual([1, 2])
  expect(global.seen).toEqual([2]) // 1 skipped for good
})

test('negative control: head locks order one session, not the whole log: a global follower still skips across sessions', async () => {
  const [t1, t2, reader] = await open(3)
  const s = await tables(reader)
  await t1.query('BEGIN')
  await t1.query(lockHead(s), ['a'])
  expect(await insert(t1, s, 'a', 'a1')).toBe(1)
  await t2.query('BEGIN')
  await t2.query(lockHead(s), ['b']) // another session's head: no wait
  expect(await insert(t2, s, 'b', 'b1')).toBe(2)
  await t2.query('COMMIT')
  const global = follower(reader, s)
  const onA = follower(reader, s, 'a')
  const onB = follower(reader, s, 'b')
  for (const f of [global, onA, onB]) await f.poll()
  await t1.query('COMMIT')
  for (const f of [global, onA, onB]) await f.poll()
  expect(global.seen).toEqual([2])
  expect(onA.seen).toEqual([1])
  expect(onB.seen).toEqual([2])
})

test('with the head locked before the sequence is drawn, the second writer waits and a per-session follower misses nothing', async () => {
  const [t1, t2, reader, admin] = await open(4)
  const s = await tables(reader)
  const onA = follower(reader, s, 'a')
  await t1.query('BEGIN')
  await t1.query(lockHead(s), ['a'])
  expect(await insert(t1, s, 'a', 'first')).toBe(1)
  await t2.query('BEGIN')
  const t2Locked = t2.query(lockHead(s), ['a'])
  await untilBlocked(admin, backendPid(t2), backendPid(t1))
  await onA.poll()
  expect(onA.seen).toEqual([]) // T1 is not committed, and T2 has drawn nothing
  await t1.query(`UPDATE ${s}.heads SET last_sequence = 1 WHERE session_key = 'a'`)
  await t1.query('COMMIT')
  await t2Locked
  expect(await insert(t2, s, 'a', 'second')).toBe(2)
  await t2.query(`UPDATE ${s}.heads SET last_sequence = 2 WHERE session_key = 'a'`)
  await onA.poll()
  expect(onA.seen).toEqual([1])
  await t2.query('COMMIT')
  await onA.poll()
  expect(onA.seen).toEqual([1, 2])
  const head = await reader.query(`SELECT last_sequence::int AS h FROM ${s}.heads WHERE session_key = 'a'`)
  expect(head.rows).toEqual([{ h: 2 }])
})

test('8 writers on one session with the head lock, a follower polling throughout: it ends equal to the table, in order', async () => {
  const writers = await open(8)
  const [reader] = await open(1)
  const s = await tables(reader)
  const onA = follower(reader, s, 'a')
  let done = false
  const polling = (async () => {
    while (!done) await onA.poll()
  })()
  await Promise.all(
    writers.map(async (w, i) => {
      for (let k = 0; k < 40; k++) {
        await w.query('BEGIN')
        await w.query(lockHead(s), ['a'])
        const seq = await insert(w, s, 'a', `w${i}-${k}`)
        await w.query(`UPDATE ${s}.heads SET last_sequence = $2 WHERE session_key = $1`, ['a', seq])
        await w.query('COMMIT')
      }
    }),
  )
  done = true
  await polling
  await onA.poll()
  const table = await allSequences(reader, s, 'a')
  expect(table).toHaveLength(320)
  expect(onA.seen).toEqual(table)
  const head = await reader.query(`SELECT last_sequence::int AS h FROM ${s}.heads`)
  expect(head.rows).toEqual([{ h: table[table.length - 1] }])
})

/** Locks the heads of `keys` in the order given, on `c`, inside its open transaction. */
async function lockAll(c: Client, s: string, keys: string[]): Promise<void> {
  for (const k of keys) await c.query(lockHead(s), [k])
}

test('negative control: two groups locking two heads in opposite orders deadlock (40P01), one of them rolled back', async () => {
  const [g1, g2, admin] = await open(3)
  const s = await tables(admin)
  for (const g of [g1, g2]) await g.query("SET deadlock_timeout = '100ms'; SET lock_timeout = '20s'")
  await g1.query('BEGIN')
  await g2.query('BEGIN')
  await lockAll(g1, s, ['a'])
  await lockAll(g2, s, ['b'])
  const settle = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (e: { code?: string }) => e.code ?? 'error',
    )
  const r1 = settle(lockAll(g1, s, ['b']))
  await untilBlocked(admin, backendPid(g1), backendPid(g2))
  const r2 = settle(lockAll(g2, s, ['a']))
  const outcomes = [await r1, await r2].sort()
  expect(outcomes).toEqual(['40P01', 'ok'])
  await g1.query('ROLLBACK')
  await g2.query('ROLLBACK')
})

test('groups that lock their heads in one sorted order never deadlock: 4 hosts × 30 groups over 3 heads all commit', async () => {
  const groups = await open(4)
  const [admin] = await open(1)
  const s = await tables(admin)
  const keys = ['a', 'b', 'c']
  const codes: string[] = []
  await Promise.all(
    groups.map(async (g, i) => {
      await g.query("SET deadlock_timeout = '100ms'; SET lock_timeout = '20s'")
      for (let k = 0; k < 30; k++) {
        // Each group names its sessions in its own order; the store sorts them before locking.
        const mine = (i + k) % 2 === 0 ? [...keys].reverse() : [keys[(i + k) % 3], keys[(i + k + 1) % 3]]
        try {
          await g.query('BEGIN')
          await lockAll(g, s, [...mine].sort())
          for (const key of mine) await insert(g, s, key, `g${i}-${k}`)
          await g.query('COMMIT')
        } catch (e) {
          codes.push((e as { code?: string }).code ?? 'error')
          await g.query('ROLLBACK')
        }
      }
    }),
  )
  expect(codes).toEqual([])
  const n = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.events`)
  // Per host: 15 groups of 3 events and 15 of 2.
  expect(n.rows).toEqual([{ n: 4 * (15 * 3 + 15 * 2) }])
})

/** Collects the notifications `c` receives on `channel`; `next()` resolves to the next payload. */
function inbox(c: Client) {
  const got: string[] = []
  const waiters: ((p: string) => void)[] = []
  c.on('notification', (m) => {
    const w = waiters.shift()
    if (w) w(m.payload ?? '')
    else got.push(m.payload ?? '')
  })
  return {
    next: () => new Promise<string>((resolve) => (got.length > 0 ? resolve(got.shift()!) : waiters.push(resolve))),
  }
}

test('LISTEN/NOTIFY: a hint sent after the commit arrives; one sent while the listener is away is lost, the row stays for the catch-up read', async () => {
  const [writer] = await open(1)
  const s = await tables(writer)
  let listener = await connect(pg.get().url, 'listener')
  const first = inbox(listener)
  await listener.query('LISTEN sa_hint')
  const seq = await insert(writer, s, 'a', 'one') // its own transaction, committed
  await writer.query("SELECT pg_notify('sa_hint', $1)", [`a:${seq}`])
  expect(await first.next()).toBe('a:1')

  // Away: the listener's connection ends; a row is committed and its hint sent meanwhile.
  await listener.end()
  const missed = await insert(writer, s, 'a', 'two')
  await writer.query("SELECT pg_notify('sa_hint', $1)", [`a:${missed}`])
  listener = await connect(pg.get().url, 'listener')
  clients.push(listener)
  const second = inbox(listener)
  await listener.query('LISTEN sa_hint')
  await writer.query("SELECT pg_notify('sa_hint', 'marker')")
  // Notifications arrive in order, so the first one after re-listening being the marker
  // proves the hint of sequence 2 is gone for good.
  expect(await second.next()).toBe('marker')
  // The catch-up read from the last position (1) finds the row the hint was about.
  const catchUp = await listener.query<{ sequence: string }>(`SELECT sequence FROM ${s}.events WHERE sequence > 1`)
  expect(catchUp.rows.map((r) => Number(r.sequence))).toEqual([2])
})

test('LISTEN/NOTIFY: a notify inside a transaction is delivered at its commit, in order; a rolled-back one never', async () => {
  const [writer] = await open(1)
  const listener = await connect(pg.get().url, 'listener')
  clients.push(listener)
  const box = inbox(listener)
  await listener.query('LISTEN sa_hint')
  await writer.query('BEGIN')
  await writer.query("SELECT pg_notify('sa_hint', 'rolled back')")
  await writer.query('ROLLBACK')
  await writer.query('BEGIN')
  await writer.query("SELECT pg_notify('sa_hint', 'committed')")
  await writer.query("SELECT pg_notify('sa_hint', 'after it')")
  await writer.query('COMMIT')
  expect(await box.next()).toBe('committed')
  expect(await box.next()).toBe('after it')
})
