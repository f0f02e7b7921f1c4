// Two stores on one PostgreSQL schema, as two gateway hosts, through the JavaScript API: a
// notice recorded on one reaches the queue, the wake and the onNotice listener of the store
// that serves its watcher, never the recording store's, and is handed out once. The listener
// hears of it as soon as the catch-up queues it, not at its timer tick (semantics.md#notices-listener).
import type { QueuedNotice } from '../../lib'
import { delay, encodeNoticeContextKey, human, noticeText, waitFor } from '../helpers'
import { useStores } from './stores'

const stores = useStores('two-stores')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'

test('a notice recorded on host A is queued, woken and heard on host B, which serves the watcher; handed out once', async () => {
  const place = stores.place('postgres')
  const wakes: string[] = []
  const heard: string[] = []
  const b = await stores.at(place, {
    serveWatchers: [MAIN],
    wakeCoalesceMs: 0,
    wake: (r) => wakes.push(`${r.sessionKey} ${r.reason}`),
    onNotice: (n) => heard.push(`${n.watcherKey} ${n.targetKey} ${n.changesSince}`),
  })
  // B's lease is written by its first poll after the open (semantics.md#processes): until
  // then a record elsewhere queues as if nobody served MAIN. Wait for it (through a pooler
  // B's connection takes a little longer).
  const lease = `SELECT count(*)::int AS n FROM ${String(place.options.schema)}.session_awareness_served WHERE watcher_key = $1`
  for (let i = 0; i < 400; i++) {
    if ((await stores.cluster().sql<{ n: number }>(lease, [MAIN]))[0].n === 1) break
    await delay(25)
  }
  const aWakes: string[] = []
  const a = await stores.at(place, { wakeCoalesceMs: 0, wake: (r) => aWakes.push(r.sessionKey) })
  expect(await b.watchAsync(MAIN, CHILD)).toBe(true)
  const e = await a.recordAsync(human(CHILD))
  expect(e?.sequence).toBe(1)
  await waitFor(() => b.peek(MAIN).length === 1 && wakes.length === 1 && heard.length === 1, "host B's notice, wake and listener")
  expect(b.peek(MAIN)).toEqual([
    { watcherKey: MAIN, targetKey: CHILD, changesSince: 0, text: noticeText(CHILD, 0), contextKey: expect.any(String) },
  ])
  expect(wakes).toEqual([`${MAIN} session-state:${CHILD}`])
  expect(heard).toEqual([`${MAIN} ${CHILD} 0`])
  // The recording host does not serve MAIN while B does: nothing queued or woken there.
  expect(a.peek(MAIN)).toEqual([])
  expect(aWakes).toEqual([])
  expect((await b.drainAsync(MAIN)).map((n) => n.changesSince)).toEqual([0])
  expect(await a.drainAsync(MAIN)).toEqual([])
  expect(await b.drainAsync(MAIN)).toEqual([])
  expect(await a.cursorRowsAsync({ watcherKey: MAIN })).toEqual([
    expect.objectContaining({ targetKey: CHILD, lastSeen: 1, notified: 1, material: 1 }),
  ])
})

/** The notice `onNotice` receives for MAIN's explicit cursor on `target` at `since`. */
function heardNotice(target: string, since: number): QueuedNotice {
  return {
    watcherKey: MAIN,
    targetKey: target,
    changesSince: since,
    text: noticeText(target, since),
    contextKey: encodeNoticeContextKey(target),
    wake: true,
    queueOnly: false,
  }
}

test("host B's onNotice hears a notice recorded on host A at once, not at its tick 5 s away; exactly once", async () => {
  const place = stores.place('postgres')
  const heard: Array<{ at: number; notice: QueuedNotice }> = []
  const opened = Date.now()
  // The listener's timer ticks every syncIntervalMs: the first tick is 5 s after the open.
  const b = await stores.at(place, {
    serveWatchers: [MAIN],
    syncIntervalMs: 5000,
    onNotice: (notice) => heard.push({ at: Date.now(), notice }),
  })
  const a = await stores.at(place, {})
  expect(await b.watchAsync(MAIN, CHILD)).toBe(true)
  const t0 = Date.now()
  expect((await a.recordAsync(human(CHILD)))?.sequence).toBe(1)
  await waitFor(() => heard.length > 0, "host B's listener", 10_000)
  expect(heard.map((h) => h.notice)).toEqual([heardNotice(CHILD, 0)])
  // Well inside the window: the tick would have come 5 s after the open.
  expect(heard[0].at - t0).toBeLessThan(1000)
  expect(heard[0].at - opened).toBeLessThan(5000)
  // Nothing else arrives, a tick later either.
  await delay(200)
  expect(heard).toHaveLength(1)
  expect(b.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 0]])
})

test('the signal and a frequent tick together hand each notice over once, in queue order', async () => {
  const place = stores.place('postgres')
  const heard: QueuedNotice[] = []
  const b = await stores.at(place, { serveWatchers: [MAIN], syncIntervalMs: 20, onNotice: (n) => heard.push(n) })
  const a = await stores.at(place, {})
  const targets = Array.from({ length: 20 }, (_, i) => `agent:main:subagent:t${i}`)
  for (const t of targets) expect(await b.watchAsync(MAIN, t)).toBe(true)
  // One at a time, then a burst of ten in flight together.
  for (const t of targets.slice(0, 10)) await a.recordAsync(human(t))
  await Promise.all(targets.slice(10).map((t) => a.recordAsync(human(t))))
  await waitFor(() => b.peek(MAIN).length === 20 && heard.length >= 20, "host B's 20 notices")
  // Many ticks later: still each once.
  await delay(300)
  const queue = b.peek(MAIN).map((n) => n.targetKey)
  expect(heard.map((n) => n.targetKey)).toEqual(queue)
  expect([...queue].sort()).toEqual([...targets].sort())
  expect(heard).toEqual(queue.map((t) => heardNotice(t, 0)))
})

test('a notice already pending when host B opens reaches its listener at once, not at its tick', async () => {
  const place = stores.place('postgres')
  const a = await stores.at(place, {})
  expect(await a.watchAsync(MAIN, CHILD)).toBe(true)
  expect((await a.recordAsync(human(CHILD)))?.sequence).toBe(1)
  const heard: Array<{ at: number; notice: QueuedNotice }> = []
  const opened = Date.now()
  // The catch-up at B's connect queues the pending notice, maybe before the open resolves.
  await stores.at(place, {
    serveWatchers: [MAIN],
    syncIntervalMs: 5000,
    onNotice: (notice) => heard.push({ at: Date.now(), notice }),
  })
  await waitFor(() => heard.length > 0, "host B's listener", 10_000)
  expect(heard.map((h) => h.notice)).toEqual([heardNotice(CHILD, 0)])
  expect(heard[0].at - opened).toBeLessThan(2000)
})
