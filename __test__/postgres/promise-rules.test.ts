// The rules of recording, cursors and notices through the Promise API, on both stores: each
// script runs on a fresh SQLite file and on a fresh PostgreSQL schema, and the two transcripts
// must be equal; the values that carry the rule are pinned on top (queue order and the
// reopened notice, the notice text byte for byte for hostile keys, provenance promotion,
// scopes, notifyKinds, seedResetsProvenance, unwatch and re-seed dropping the notice, delete
// for another agent, retention by row count with historyGap exact, the onNotice listener).
import { Clock, type SessionState, type SessionStateOptions, human, must, noticeText, spawn } from '../helpers'
import { type Kind, useStores } from './stores'

const stores = useStores('rules')
const MAIN = 'agent:main:main'
const A = 'agent:main:subagent:a'
const B = 'agent:main:subagent:b'
const OPS = 'agent:ops:main'

type Script = (s: SessionState, clock: Clock) => Promise<unknown[]>

/** Runs `script` on a fresh store of each kind; the two transcripts must be equal. Returns SQLite's. */
async function both(script: Script, options: SessionStateOptions = {}): Promise<unknown[]> {
  const out: Partial<Record<Kind, unknown[]>> = {}
  for (const kind of ['sqlite', 'postgres'] as const) {
    const clock = new Clock()
    const s = await stores.open(kind, { clock: clock.fn, strict: true, ...options })
    out[kind] = await script(s, clock)
  }
  expect(out.postgres).toEqual(out.sqlite)
  return out.sqlite as unknown[]
}

const pairs = (ns: Array<{ targetKey: string; changesSince: number }>) => ns.map((n) => [n.targetKey, n.changesSince])
const rowsOf = async (s: SessionState, watcherKey = MAIN) =>
  (await s.cursorRowsAsync({ watcherKey })).map((r) => [r.targetKey, r.lastSeen, r.notified, r.material, r.provenance, r.scope ?? null])

test('queue order: notices in the order they entered; a reopened one goes after those still queued', async () => {
  const t = await both(async (s) => {
    await s.watchAsync(MAIN, A)
    await s.watchAsync(MAIN, B)
    await s.recordAsync(human(B))
    await s.recordAsync(human(A))
    const first = pairs(s.peek(MAIN))
    await s.recordAsync(human(B))
    // B had a material event after its notice was queued: acknowledging it reopens one, queued after A's.
    const acked = await s.acknowledgeAsync(MAIN, [B])
    return [first, acked, pairs(s.peek(MAIN)), pairs(await s.drainAsync(MAIN)), await s.drainAsync(MAIN)]
  })
  expect(t).toEqual([[[B, 0], [A, 0]], 1, [[A, 0], [B, 1]], [[A, 0], [B, 1]], []])
})

test('the notice text for keys with a quote, a newline, U+2028 and non-ASCII is pinned byte for byte', async () => {
  const odd = ['agent:main:subagent:"q"\nx', 'agent:main:subagent:\u2028', 'agent:main:subagent:é中']
  const t = await both(async (s) => {
    for (const k of odd) await s.watchAsync(MAIN, k)
    for (const k of odd) await s.recordAsync(human(k))
    return (await s.drainAsync(MAIN)).map((n) => [n.targetKey, n.text, n.contextKey])
  })
  expect(t.map((n) => (n as string[])[1])).toEqual(odd.map((k) => noticeText(k, 0)))
})

test('provenance: ambient-group is promoted by a watch, never back; a spawn keeps it', async () => {
  const t = await both(async (s) => {
    await s.watchAsync(MAIN, A, { provenance: 'ambient-group' })
    const ambient = await rowsOf(s)
    await s.watchAsync(MAIN, A)
    await s.watchAsync(MAIN, A, { provenance: 'ambient-group' })
    await s.watchAsync(MAIN, B, { provenance: 'ambient-group' })
    await s.recordAsync(spawn(B, MAIN))
    return [ambient, await rowsOf(s)]
  })
  expect(t).toEqual([
    [[A, 0, 0, 0, 'ambient-group', null]],
    [
      [A, 0, 0, 0, 'explicit', null],
      [B, 1, 1, 1, 'ambient-group', null],
    ],
  ])
})

test('scopes: a record binds a named watcher; acknowledge with a scope takes only its cursors', async () => {
  const t = await both(async (s) => {
    await s.watchAsync(MAIN, A, { scope: 'store-1' })
    await s.recordAsync({ ...human(B), watchers: [MAIN], watcherScopes: { [MAIN]: 'store-2' } })
    await s.recordAsync(human(A))
    const drained = (await s.drainAsync(MAIN)).map((n) => [n.targetKey, n.changesSince, n.scope ?? null])
    await s.recordAsync(human(A))
    await s.recordAsync(human(B))
    const acked = await s.acknowledgeAsync(MAIN, [A, B], { scope: 'store-2' })
    return [drained, acked, pairs(s.peek(MAIN)), await rowsOf(s)]
  })
  expect(t[0]).toEqual([
    [B, 0, 'store-2'],
    [A, 0, 'store-1'],
  ])
  expect(t[1]).toBe(1)
  expect(t[2]).toEqual([[A, 2]])
})

test('notifyKinds and seedResetsProvenance', async () => {
  const t = await both(
    async (s) => {
      await s.watchAsync(MAIN, A, { provenance: 'ambient-group' })
      await s.recordAsync({ sessionKey: A, kind: 'goal_changed', actorType: 'human', summary: 'log only here' })
      const none = pairs(s.peek(MAIN))
      await s.recordAsync({ sessionKey: A, kind: 'run_completed', actorType: 'agent', actorId: B, summary: 'done' })
      const some = pairs(await s.drainAsync(MAIN))
      await s.recordAsync(spawn(A, MAIN))
      return [none, some, await rowsOf(s)]
    },
    { notifyKinds: ['human_direct_message', 'run_completed'], seedResetsProvenance: true },
  )
  expect(t).toEqual([[], [[A, 0]], [[A, 3, 3, 3, 'explicit', null]]])
})

test('unwatch and a re-seed drop the pending notice; deleteSession drops the cursors on the session', async () => {
  const t = await both(async (s) => {
    await s.watchAsync(MAIN, A)
    await s.watchAsync(MAIN, B)
    await s.watchAsync(MAIN, OPS)
    for (const k of [A, B, OPS]) await s.recordAsync(human(k))
    const removed = await s.unwatchAsync(MAIN, A)
    await s.recordAsync(spawn(B, MAIN))
    const left = pairs(s.peek(MAIN))
    await s.deleteSessionAsync(OPS)
    const versions = await s.stateVersionsAsync([{ sessionKey: OPS }, { sessionKey: B }])
    return [removed, left, pairs(s.peek(MAIN)), versions.map((v) => [v.sessionKey, v.stateVersion]), await rowsOf(s)]
  })
  expect(t).toEqual([true, [[OPS, 0]], [], [[B, 4]], [[B, 4, 4, 4, 'explicit', null]]])
})

test('retention by row count: the newest maxEvents stay, the watermark makes historyGap exact', async () => {
  const t = await both(
    async (s) => {
      for (let i = 0; i < 8; i++) must(await s.recordAsync(human(i % 2 ? A : B)))
      // The first record also started the automatic prune in the background, which may take
      // a part of the batch first: the report's count depends on timing, the state does not.
      const report = await s.pruneAsync()
      expect(report.eventsDeleted).toBeLessThanOrEqual(4)
      const gap = (await s.changesSinceAsync(A, 0)).stateChanges
      const exact = (await s.changesSinceAsync(A, 5)).stateChanges
      const b = (await s.changesSinceAsync(B, 3)).stateChanges
      return [
        [gap.historyGap, gap.earliestAvailableSequence, gap.events.map((e) => e.sequence)],
        [exact.historyGap, exact.events.map((e) => e.sequence)],
        [b.historyGap, b.events.map((e) => e.sequence)],
      ]
    },
    { maxEvents: 4 },
  )
  expect(t).toEqual([
    [true, 6, [6, 8]],
    [false, [6, 8]],
    [false, [5, 7]],
  ])
})

test('the onNotice listener hears every notice entering the queue, in order, before the promise settles', async () => {
  const t = await both(async (s) => s.recordAsync(human(A)).then(() => []), {})
  expect(t).toEqual([])
  const heard: Record<string, unknown[]> = {}
  for (const kind of ['sqlite', 'postgres'] as const) {
    const got: unknown[] = []
    const s = await stores.open(kind, { clock: new Clock().fn, onNotice: (n) => got.push([n.watcherKey, n.targetKey, n.changesSince]) })
    await s.watchAsync(MAIN, A)
    await s.watchAsync(MAIN, B)
    await s.recordAsync(human(A))
    const atOnce = got.length
    await s.recordAsync(human(B))
    await s.recordAsync(human(A))
    await s.acknowledgeAsync(MAIN, [A])
    heard[kind] = [atOnce, ...got]
  }
  expect(heard.postgres).toEqual(heard.sqlite)
  expect(heard.sqlite).toEqual([1, [MAIN, A, 0], [MAIN, B, 0], [MAIN, A, 1]])
})
