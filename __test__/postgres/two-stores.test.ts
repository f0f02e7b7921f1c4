// Two stores on one PostgreSQL schema, as two gateway hosts, through the JavaScript API: a
// notice recorded on one reaches the queue, the wake and the onNotice listener of the store
// that serves its watcher, never the recording store's, and is handed out once.
import { human, noticeText, waitFor } from '../helpers'
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
