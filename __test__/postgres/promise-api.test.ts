// The Promise API (semantics.md#promise-api) over both stores: a SQLite file and a PostgreSQL
// database (a schema of its own per test on this file's throwaway cluster). Each *Async call
// gives what the synchronous call gives on a SQLite store in the same state; calls commit in
// call order; close waits and refuses later calls; failures keep their codes; and the rules of
// recording and notices (seeding, onlyIfWatched, dedupe, self-suppression, one notice per
// burst and reopen once, acknowledge through, reset and delete) hold with the same values.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import { Clock, errorSink, fixture, human, must, noticeText, spawn, wakeSink } from '../helpers'
import { ADOPTED, CHILD, LOCAL, MAIN, OTHER, expectReached, pairs, promiseSteps, recordsSettleInOrder, rejection, runSteps, typed } from '../promise-steps'
import { KINDS, useStores } from './stores'

const stores = useStores('promise')
const fx = fixture('promise-ref')
const transcripts = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-promise-upstream-'))
afterAll(() => fs.rmSync(transcripts, { recursive: true, force: true }))

describe.each(KINDS)('the Promise API on %s', (kind) => {
  test('every *Async method gives what the synchronous call gives on a SQLite file in the same state', async () => {
    const clock = new Clock()
    const reference = fx.open(fx.file(), { clock: clock.fn, strict: true })
    const s = await stores.open(kind, { clock: clock.fn, strict: true })
    const transcript = path.join(transcripts, `${kind}.jsonl`)
    fs.writeFileSync(transcript, typed('history'))
    const { got, want, of } = await runSteps(promiseSteps({ n: 1, b: [true, null] }, transcript), reference, s, () => clock.advance(1000))
    expect(got).toEqual(want)
    // The script reached every kind of result.
    expectReached(of, true)
    expect(of('cursorRows')).toEqual([
      { watcherKey: MAIN, targetKey: CHILD, lastSeen: 1, notified: 2, material: 2, provenance: 'explicit', updatedAt: expect.any(Number) },
      { watcherKey: MAIN, targetKey: OTHER, lastSeen: 0, notified: 4, material: 4, provenance: 'ambient-group', updatedAt: expect.any(Number) },
    ])
    expect(of('noteOwnUserMessage')).toBeUndefined()
    // The gateway's own message is an echo: one human turn of the two lines.
    expect(of('scanUpstream')).toEqual([expect.objectContaining({ sessionKey: LOCAL, kind: 'human_direct_message', payload: { turns: 1 } })])
    expect(of('scanUpstream nothing new')).toEqual([])
  })

  test('calls settle in call order, one record after another, and notices are drainable at once', async () => {
    const s = await stores.open(kind)
    expect(await s.watchAsync(MAIN, CHILD)).toBe(true)
    await recordsSettleInOrder(s)
    expect(pairs(await s.drainAsync(MAIN))).toEqual([[CHILD, 0]])
    expect(await s.stateVersionsAsync([{ sessionKey: CHILD }, { sessionKey: OTHER }])).toEqual([
      { sessionKey: CHILD, agentId: 'main', stateVersion: 64 },
      { sessionKey: OTHER, agentId: 'main', stateVersion: 63 },
    ])
    const page = await s.changesSinceAsync(CHILD, 60)
    expect(page.stateVersion).toBe(64)
    expect(page.stateChanges.historyGap).toBe(false)
    expect(page.stateChanges.events.map((e) => e.sequence)).toEqual([62, 64])
  })

  test('drainAsync hands out the notice of a record queued before it; a later record reopens from the acknowledged position', async () => {
    const s = await stores.open(kind)
    await s.watchAsync(MAIN, CHILD)
    const recorded = s.recordAsync(human(CHILD))
    const drained = s.drainAsync(MAIN)
    const later = s.recordAsync(human(CHILD))
    const notices = await drained
    expect(notices).toEqual([
      { watcherKey: MAIN, targetKey: CHILD, changesSince: 0, text: noticeText(CHILD, 0), contextKey: expect.any(String) },
    ])
    expect(must(await recorded).sequence).toBe(1)
    expect(must(await later).sequence).toBe(2)
    expect(pairs(s.peek(MAIN))).toEqual([[CHILD, 1]])
    expect(s.peek(MAIN)[0]?.text).toBe(noticeText(CHILD, 1))
    expect(await rejection(s.drainAsync(''))).toBe('ERR_INVALID_ARG')
  })

  test('closeAsync waits for the calls made before, refuses later ones, and a reopened store has every record', async () => {
    const errors = errorSink()
    const place = stores.place(kind)
    const s = await stores.at(place, { onError: errors.onError })
    await s.watchAsync(MAIN, CHILD)
    const pending = Array.from({ length: 10 }, () => s.recordAsync(human(CHILD)))
    const closing = s.closeAsync()
    expect(s.closeAsync()).toBe(closing)
    expect(s.isClosed).toBe(true)
    const late = s.recordAsync(human(CHILD))
    expect(await rejection(s.unwatchAsync(MAIN, CHILD))).toBe('ERR_CLOSED')
    expect(await rejection(s.changesSinceAsync(CHILD, 0))).toBe('ERR_CLOSED')
    await closing
    expect((await Promise.all(pending)).map((e) => must(e).sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(await late).toBeNull()
    expect(errors.codes()).toEqual(['ERR_CLOSED'])
    const again = await stores.at(place)
    expect(await again.stateVersionsAsync([{ sessionKey: CHILD }])).toEqual([{ sessionKey: CHILD, agentId: 'main', stateVersion: 10 }])
    // The cursor survived the restart: the sweep of the new store re-queues its notice.
    expect(await again.sweepAsync()).toEqual({ notices: 1, prune: { eventsDeleted: 0, cursorsDeleted: 0 } })
    expect(pairs(await again.drainAsync(MAIN))).toEqual([[CHILD, 0]])
    expect(must(await again.recordAsync(human(CHILD))).sequence).toBe(11)
  })

  test('recordAsync: null plus exactly one onError, a failing record alone in its group, and strict rejections', async () => {
    const errors = errorSink()
    const s = await stores.open(kind, { onError: errors.onError })
    const bad = { sessionKey: CHILD, kind: 'human_direct_message', actorType: 'human' } as never
    expect(await s.recordAsync(bad)).toBeNull()
    expect(await s.recordAsync(human(CHILD, { kind: 'no_such_kind' }) as never)).toBeNull()
    expect(errors.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    const group = [human(CHILD), human(CHILD, { payload: { big: 'x'.repeat(5000) } }), human(CHILD)]
    const settled = await Promise.all(group.map((i) => s.recordAsync(i as never)))
    expect(settled.map((e) => e?.sequence ?? null)).toEqual([1, null, 2])
    expect(errors.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    const strict = await stores.open(kind, { strict: true })
    expect(await rejection(strict.recordAsync(bad))).toBe('ERR_INVALID_ARG')
    expect(await rejection(strict.adoptAsync(ADOPTED, { source: '' }))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.watchAsync('', CHILD))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.changesSinceAsync(CHILD, -1))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.acknowledgeAsync(MAIN, 'x' as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.deleteSessionAsync(''))).toBe('ERR_INVALID_ARG')
    // A sweep whose watcherExists throws is refused whole, and changes nothing.
    await s.watchAsync(MAIN, OTHER)
    await s.recordAsync(human(OTHER))
    const throwing = () => {
      throw new Error('no')
    }
    expect(await rejection(s.sweepAsync({ watcherExists: throwing }))).toBe('ERR_INVALID_ARG')
    expect(pairs(s.peek(MAIN))).toEqual([[OTHER, 0]])
  })

  test('seeding by a spawn, onlyIfWatched, and a watcher never notified of its own events', async () => {
    const s = await stores.open(kind, { strict: true })
    expect(must(await s.recordAsync(human(CHILD))).sequence).toBe(1)
    expect(must(await s.recordAsync(human(CHILD))).sequence).toBe(2)
    // Nobody watches OTHER: nothing is written, and no sequence is spent.
    expect(await s.recordAsync(human(OTHER, { onlyIfWatched: true }))).toBeNull()
    // The spawn seeds MAIN at the spawn's own sequence: the history before it never notifies.
    const spawned = must(await s.recordAsync(spawn(CHILD, MAIN)))
    expect(spawned.sequence).toBe(3)
    expect(must(await s.recordAsync(human(CHILD, { onlyIfWatched: true }))).sequence).toBe(4)
    expect(pairs(s.peek(MAIN))).toEqual([[CHILD, 3]])
    expect(pairs(await s.drainAsync(MAIN))).toEqual([[CHILD, 3]])
    expect(s.peek(MAIN)).toEqual([])
    // MAIN's own event into CHILD does not notify MAIN.
    await s.recordAsync({ ...human(CHILD), actorType: 'agent', actorId: MAIN })
    expect(s.peek(MAIN)).toEqual([])
    await s.recordAsync(human(CHILD))
    expect(pairs(s.peek(MAIN))).toEqual([[CHILD, 4]])
    expect((await s.changesSinceAsync(OTHER, 0)).stateVersion).toBe(0)
  })

  test('one notice and one wake per burst; a drain reopens once; acknowledge through withdraws it', async () => {
    const wakes = wakeSink()
    const s = await stores.open(kind, { wake: wakes.wake, wakeCoalesceMs: 0 })
    await s.watchAsync(MAIN, CHILD)
    await Promise.all(Array.from({ length: 20 }, () => s.recordAsync(human(CHILD))))
    expect(pairs(s.peek(MAIN))).toEqual([[CHILD, 0]])
    for (let i = 0; i < 200 && wakes.wakes.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
    expect(wakes.calls()).toEqual([[MAIN, `session-state:${CHILD}`]])
    // The notice was queued at the first record; the 19 after it reopen it exactly once.
    expect(pairs(await s.drainAsync(MAIN))).toEqual([[CHILD, 0]])
    expect(pairs(s.peek(MAIN))).toEqual([[CHILD, 1]])
    expect(pairs(await s.drainAsync(MAIN))).toEqual([[CHILD, 1]])
    expect(s.peek(MAIN)).toEqual([])
    await s.recordAsync(human(CHILD))
    await s.recordAsync(human(CHILD))
    // The watcher read the target through 22 before acknowledging: the notice is withdrawn.
    expect(await s.acknowledgeAsync(MAIN, [CHILD], { through: 22 })).toBe(1)
    expect(s.peek(MAIN)).toEqual([])
    await s.recordAsync(human(CHILD))
    expect(pairs(s.peek(MAIN))).toEqual([[CHILD, 22]])
    // Reset drops the watcher's cursors and notices; the history stays.
    await s.resetSessionAsync(MAIN)
    expect(s.peek(MAIN)).toEqual([])
    expect((await s.changesSinceAsync(CHILD, 0, { limit: 200 })).stateChanges.events).toHaveLength(23)
    await s.deleteSessionAsync(CHILD)
    expect(await s.changesSinceAsync(CHILD, 0)).toEqual({
      stateVersion: 0,
      stateChanges: { events: [], historyGap: false, truncated: false, earliestAvailableSequence: 0 },
    })
  })

  test('noteOwnUserMessageAsync and scanUpstreamAsync run in call order; the background monitor scans', async () => {
    const transcript = path.join(transcripts, `${kind}-monitor.jsonl`)
    fs.writeFileSync(transcript, typed('history'))
    const place = stores.place(kind)
    const s = await stores.at(place)
    expect(await s.adoptAsync(LOCAL, { source: 'claude', transcriptPath: transcript })).toMatchObject({ sequence: 1, kind: 'adopted' })
    if (kind === 'postgres') {
      // Without hostName, the host that scans it is the machine's hostname.
      const hosts = await stores.cluster().sql<{ h: string }>(`SELECT scan_host AS h FROM ${place.options.schema as string}.session_upstream_links`)
      expect(hosts).toEqual([{ h: os.hostname() }])
    }
    expect(await s.watchAsync(MAIN, LOCAL)).toBe(true)
    fs.appendFileSync(transcript, typed('echo me') + typed('typed by a human'))
    // Not awaited in between: the scan runs after the note, so the echo is known to it.
    const noted = s.noteOwnUserMessageAsync(LOCAL, 'echo me')
    const scanned = s.scanUpstreamAsync()
    expect(await noted).toBeUndefined()
    expect(await scanned).toEqual([expect.objectContaining({ sequence: 2, kind: 'human_direct_message', actorType: 'human', payload: { turns: 1 } })])
    expect(await s.scanUpstreamAsync()).toEqual([])
    expect(await rejection(s.noteOwnUserMessageAsync('', 'x'))).toBe('ERR_INVALID_ARG')

    s.startUpstreamMonitor({ intervalMs: 20 })
    fs.appendFileSync(transcript, typed('while the monitor runs'))
    const deadline = Date.now() + 20_000
    let version = 0
    while (version < 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20))
      version = (await s.changesSinceAsync(LOCAL, 0)).stateVersion
    }
    s.stopUpstreamMonitor()
    const { stateChanges } = await s.changesSinceAsync(LOCAL, 0)
    expect(stateChanges.events.map((e) => [e.sequence, e.kind])).toEqual([
      [1, 'adopted'],
      [2, 'human_direct_message'],
      [3, 'human_direct_message'],
    ])
  })
})

// A child process on a store of each kind: it exits by itself once its promises have settled,
// its store left open, and holds a referenced handle only while a promise waits.
const EXITS = `
const { SessionState } = require(process.argv[1])
const place = JSON.parse(process.argv[2])
;(async () => {
  const handles = () => process.getActiveResourcesInfo().filter((h) => h !== 'TTYWrap').join(',')
  const s = await SessionState.open(place.path, place.options)
  const seen = [handles()]
  await s.watchAsync('agent:main:main', 'agent:main:subagent:c')
  const all = []
  for (let i = 0; i < 50; i++) {
    all.push(s.recordAsync({ sessionKey: 'agent:main:subagent:c', kind: 'goal_changed', actorType: 'human', summary: 'g' }))
  }
  seen.push(handles())
  const last = (await Promise.all(all)).at(-1).sequence
  seen.push(handles())
  const drained = (await s.drainAsync('agent:main:main')).map((n) => n.changesSince)
  console.log(JSON.stringify({ last, drained, seen }))
})()
`

test('a record whose text holds U+0000 on PostgreSQL: ERR_INVALID_ARG, null plus one onError, a rejection with strict, nothing written', async () => {
  const errors = errorSink()
  const place = stores.place('postgres')
  const s = await stores.at(place, { onError: errors.onError })
  // SQLite keeps it; PostgreSQL's text cannot (docs/postgres.md#differences).
  expect(await s.recordAsync(human(CHILD, { summary: 'a\u0000b' }) as never)).toBeNull()
  expect(await s.recordAsync(human(CHILD, { runId: 'r\u0000' }) as never)).toBeNull()
  expect(errors.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
  // Alone in its group: the records around it are written.
  const group = [human(CHILD), human(CHILD, { dedupeKey: 'k\u0000' }), human(CHILD)]
  const settled = await Promise.all(group.map((i) => s.recordAsync(i as never)))
  expect(settled.map((e) => e?.sequence ?? null)).toEqual([1, null, 2])
  expect(errors.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
  // In a payload it is escaped in the JSON, and fine.
  expect(must(await s.recordAsync(human(CHILD, { payload: { t: 'a\u0000b' } }) as never)).sequence).toBe(3)
  const strict = await stores.at(place, { strict: true })
  expect(await rejection(strict.recordAsync(human(CHILD, { summary: '\u0000' }) as never))).toBe('ERR_INVALID_ARG')
  expect(await strict.stateVersionsAsync([{ sessionKey: CHILD }])).toEqual([{ sessionKey: CHILD, agentId: 'main', stateVersion: 3 }])
})

describe.each(KINDS)('a process with a store on %s', (kind) => {
  test('exits by itself once every promise has settled, its store left open; a handle only while one waits', () => {
    const place = stores.place(kind)
    const root = path.join(__dirname, '..', '..')
    const out = spawnSync(process.execPath, ['-e', EXITS, root, JSON.stringify(place)], {
      encoding: 'utf8',
      timeout: 60_000,
    })
    expect(out.stderr).toBe('')
    expect(out.status).toBe(0)
    expect(JSON.parse(out.stdout)).toEqual({ last: 50, drained: [0], seen: ['', 'Timeout', ''] })
  })
})
