// Following a session on PostgreSQL (semantics.md#follow): in the writing store itself, from a
// second store on the schema (the hint and the catch-up), and from a gateway on another host
// (network namespaces, scripts/pg/hosts.js) while a third host writes. The batches are exactly
// the table's rows of the session, in order, none empty.
import type { ChangeEvent, FollowBatch, SessionState } from '../../lib'
import { startHosts, type Hosts } from '../../scripts/pg/hosts'
import { waitFor } from '../helpers'
import { HostGateway } from './hosts-gateway'
import { useStores } from './stores'

jest.setTimeout(180_000)

const stores = useStores('follow-pg')
const MAIN = 'agent:main:main'
const K = 'agent:main:subagent:followed'
const input = (summary: string, watchers?: string[]) => ({
  sessionKey: K,
  kind: 'goal_changed' as const,
  actorType: 'agent' as const,
  summary,
  ...(watchers ? { watchers } : {}),
})

async function stored(state: SessionState, after = 0): Promise<ChangeEvent[]> {
  const out: ChangeEvent[] = []
  for (;;) {
    const c = await state.changesSinceAsync(K, after)
    out.push(...c.stateChanges.events)
    if (!c.stateChanges.truncated) return out
    after = c.stateChanges.events.at(-1)!.sequence
  }
}

function collect(state: SessionState, options: { limit?: number } = {}) {
  const got: FollowBatch[] = []
  const f = state.follow(K, options)
  const done = (async () => {
    for await (const b of f) got.push(b)
  })()
  return { got, f, done, count: () => got.reduce((n, b) => n + b.events.length, 0) }
}

test('in the writing store: replay, then each commit of the Promise API, exactly', async () => {
  const state = await stores.open('postgres')
  for (let i = 0; i < 5; i++) await state.recordAsync(input(`old ${i}`))
  const c = collect(state, { limit: 3 })
  await waitFor(() => c.count() === 5, 'the replay')
  expect(c.got.map((b) => b.events.length)).toEqual([3, 2])
  await Promise.all(Array.from({ length: 120 }, (_, i) => state.recordAsync(input(`new ${i}`))))
  await waitFor(() => c.count() === 125, 'the live batches')
  await c.f.return()
  await c.done
  expect(c.got.every((b) => b.events.length >= 1 && b.events.length <= 3 && !b.historyGap)).toBe(true)
  expect(c.got.flatMap((b) => b.events)).toEqual(await stored(state))
  expect(state.stats().followersOpen).toBe(0)
})

test('from a second store on the schema: watched and unwatched sessions, exactly', async () => {
  const place = stores.place('postgres')
  const follower = await stores.at(place, { syncIntervalMs: 200 })
  const writer = await stores.at(place, { syncIntervalMs: 200 })
  await follower.watchAsync(MAIN, K)
  const c = collect(follower)
  for (let round = 0; round < 5; round++) {
    await Promise.all(Array.from({ length: 30 }, (_, i) => writer.recordAsync(input(`w ${round}.${i}`, round % 2 ? undefined : [MAIN]))))
  }
  await waitFor(() => c.count() === 150, 'every row on the other store')
  await c.f.return()
  await c.done
  expect(c.got.every((b) => b.events.length >= 1 && !b.historyGap)).toBe(true)
  expect(c.got.flatMap((b) => b.events)).toEqual(await stored(writer))
})

test('the hint alone: a session nobody watches reaches a follower whose periodic catch-up is a minute away', async () => {
  const place = stores.place('postgres')
  const follower = await stores.at(place, { syncIntervalMs: 60_000 })
  const writer = await stores.at(place, { syncIntervalMs: 200 })
  const c = collect(follower)
  // The writer hears the follower's announcement soon after the follow: until then its
  // commits send no hint, so each record waits a little for its batch before the next.
  for (let n = 1; n <= 10; n++) {
    await writer.recordAsync(input(`alone ${n}`))
    const deadline = Date.now() + 1000
    while (c.count() < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
  }
  await waitFor(() => c.count() === 10, 'every row through the hint', 20_000)
  await c.f.return()
  await c.done
  expect(c.got.flatMap((b) => b.events)).toEqual(await stored(writer))
})

test('the catch-up alone: rows of a writer that sends no hint (syncIntervalMs 0) arrive at the periodic catch-up', async () => {
  const place = stores.place('postgres')
  const follower = await stores.at(place, { syncIntervalMs: 100 })
  const writer = await stores.at(place, { syncIntervalMs: 0 })
  const c = collect(follower, { limit: 10 })
  await Promise.all(Array.from({ length: 25 }, (_, i) => writer.recordAsync(input(`quiet ${i}`))))
  await waitFor(() => c.count() === 25, 'every row through the catch-up')
  await c.f.return()
  await c.done
  expect(c.got.map((b) => b.events.length).every((n) => n >= 1 && n <= 10)).toBe(true)
  expect(c.got.flatMap((b) => b.events)).toEqual(await stored(writer))
})

describe('another host', () => {
  let hosts: Hosts
  const gateways: HostGateway[] = []
  beforeAll(async () => {
    hosts = await startHosts({ name: 'follow-hosts' })
  }, 120_000)
  afterAll(async () => {
    await Promise.all(gateways.splice(0).map((g) => g.stop()))
    await hosts?.stop()
  }, 60_000)

  test('a follower on host 1 gets every row host 2 writes, in order, none empty', async () => {
    const follower = await HostGateway.start(hosts, 1, { syncIntervalMs: 200 })
    const writer = await HostGateway.start(hosts, 2, { syncIntervalMs: 200 })
    gateways.push(follower, writer)
    await follower.call('watch', { watcher: MAIN, target: K })
    await writer.call('record', { input: input('before') })
    await follower.call('follow', { session: K, options: { limit: 40 } })
    for (let round = 0; round < 4; round++) {
      await writer.call('recordMany', {
        inputs: Array.from({ length: 50 }, (_, i) => input(`h ${round}.${i}`, round % 2 ? undefined : [MAIN])),
      })
    }
    const count = () => follower.batches.reduce((n, b) => n + b.batch.events.length, 0)
    await waitFor(() => count() === 201, 'every row on host 1')
    await follower.call('stopFollowing')
    const table = await writer.call<{ stateChanges: { events: { sequence: number }[] } }>('changesSince', { session: K, after: 0 })
    const rows = table.stateChanges.events.map((e) => e.sequence)
    // changesSince answers 200 at most: the rest is read on.
    const more = await writer.call<{ stateChanges: { events: { sequence: number }[] } }>('changesSince', { session: K, after: rows.at(-1) })
    rows.push(...more.stateChanges.events.map((e) => e.sequence))
    expect(rows).toHaveLength(201)
    const batches = follower.batches.map((b) => b.batch)
    expect(batches.every((b) => b.events.length >= 1 && b.events.length <= 40 && !b.historyGap)).toBe(true)
    expect(batches.flatMap((b) => b.events.map((e) => e.sequence))).toEqual(rows)
    expect(follower.errors).toEqual([])
  })
})
