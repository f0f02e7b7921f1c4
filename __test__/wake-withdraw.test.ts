// Wakes for nothing (semantics.md#wake): a drain or acknowledge that leaves the watcher
// nothing queued withdraws its scheduled wake, sync and async; and no store calls `wake`,
// `onNotice` or `onError` after its close returned, over many close and reopen cycles.
import { delay, fixture, human, must, settle, spawn, waitFor, wakeSink, type SessionState } from './helpers'

const fx = fixture('withdraw')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'
const OTHER = 'agent:main:subagent:d'

/** Blocks the JS thread for `ms`: background threads run, nothing reaches JS meanwhile. */
function busy(ms: number): void {
  const until = Date.now() + ms
  while (Date.now() < until) {
    // spin
  }
}

describe('a drain or acknowledge that empties the watcher withdraws its wake', () => {
  test('record, drain at once: no wake (sync)', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 100 })
    must(s.record(spawn(CHILD, MAIN))) // 1
    must(s.record(human(CHILD))) // 2
    expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([1])
    await settle()
    expect(sink.wakes).toEqual([])
    // The same through acknowledge.
    must(s.record(human(CHILD))) // 3
    expect(s.acknowledge(MAIN, [CHILD])).toBe(1)
    await settle()
    expect(sink.wakes).toEqual([])
    // A wake due after the withdrawal is scheduled anew.
    must(s.record(human(CHILD))) // 4
    await waitFor(() => sink.wakes.length === 1, 'the next wake')
    expect(sink.calls()).toEqual([[MAIN, `session-state:${CHILD}`]])
  })

  test('record, drain at once: no wake (async)', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 100 })
    must(await s.recordAsync(spawn(CHILD, MAIN)))
    must(await s.recordAsync(human(CHILD)))
    expect((await s.drainAsync(MAIN)).map((n) => n.changesSince)).toEqual([1])
    must(await s.recordAsync(human(CHILD)))
    expect(await s.acknowledgeAsync(MAIN, [CHILD])).toBe(1)
    await settle()
    expect(sink.wakes).toEqual([])
  })

  test('the wake stays while another notice of the watcher is queued, or a drain reopens one', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 100 })
    must(s.record(spawn(CHILD, MAIN))) // 1
    must(s.record(spawn(OTHER, MAIN))) // 2
    must(s.record(human(CHILD))) // 3
    must(s.record(human(OTHER))) // 4
    expect(s.acknowledge(MAIN, [CHILD])).toBe(1)
    expect(s.peek(MAIN).map((n) => n.targetKey)).toEqual([OTHER])
    await waitFor(() => sink.wakes.length === 1, 'the wake for the notice left')
    expect(sink.calls()).toEqual([[MAIN, `session-state:${CHILD}`]])
  })
})

describe('no callback of a closed store', () => {
  test('50 cycles of open, record, close and reopen: no wake, onNotice or onError after close', async () => {
    const file = fx.file()
    const late: string[] = []
    for (let i = 0; i < 50; i++) {
      const box: { s?: SessionState } = {}
      const s = fx.open(file, {
        wakeCoalesceMs: i % 5,
        wake: () => {
          if (box.s?.isClosed) late.push(`wake ${i}`)
        },
        onNotice: () => {
          if (box.s?.isClosed) late.push(`notice ${i}`)
        },
        onError: (e) => {
          if (box.s?.isClosed) late.push(`error ${i} ${e.code}`)
        },
      })
      box.s = s
      s.watch(MAIN, CHILD)
      must(s.record(human(CHILD)))
      // The wake task fires on a background thread while the JS thread is busy: its call
      // reaches the JS thread only after the close below.
      busy(3 + (i % 4))
      if (i % 2 === 0) s.close()
      else await s.closeAsync()
      // Calls after close hand nothing to the listener either.
      expect(() => s.peek(MAIN)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
      await delay(i % 3)
    }
    await settle()
    expect(late).toEqual([])
  })
})

// semantics.md#wake, "checked where it arrives": the wake's timer fires on a background thread
// while the JS thread is busy, so its call waits there; the drain (or acknowledge, or unwatch)
// that runs first leaves the watcher nothing queued, and the call, when the JS thread reaches
// it, finds that and wakes nobody.
describe('a wake reaching the JS thread is checked there against the queue as it stands', () => {
  // undefined: the default (250 ms).
  const settings: Array<[string, number | undefined]> = [
    ['wakeCoalesceMs 0', 0],
    ['the default wakeCoalesceMs', undefined],
  ]

  test.each(settings)('sync, %s: record, a busy turn past the timer, drain (and the README pattern): no wake', async (_name, ms) => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, ...(ms === undefined ? {} : { wakeCoalesceMs: ms }) })
    const past = (ms ?? 250) + 50
    must(s.record(spawn(CHILD, MAIN)))
    for (let run = 0; run < 3; run++) {
      must(s.record(human(CHILD)))
      busy(past)
      expect(s.drain(MAIN)).toHaveLength(1)
      await settle(60)
    }
    // drain, changesSince, acknowledge({ through }) with a record between the drain and the read.
    must(s.record(human(CHILD)))
    busy(past)
    const [notice] = s.drain(MAIN)
    must(s.record(human(CHILD)))
    const read = s.changesSince(CHILD, notice.changesSince).stateChanges.events.at(-1)?.sequence
    expect(s.acknowledge(MAIN, [CHILD], { through: read })).toBe(1)
    busy(past)
    // An unwatch leaves the watcher nothing queued too.
    must(s.record(human(OTHER)))
    must(s.record(spawn(OTHER, MAIN)))
    must(s.record(human(OTHER)))
    busy(past)
    expect(s.unwatch(MAIN, OTHER)).toBe(true)
    await settle()
    expect(sink.wakes).toEqual([])
    expect(s.stats().wakesRequested).toBe(0)
    // A wake whose notice is still queued when it arrives goes out, and counts.
    must(s.record(human(CHILD)))
    await waitFor(() => sink.wakes.length === 1, 'the wake of a notice still queued')
    expect(sink.calls()).toEqual([[MAIN, `session-state:${CHILD}`]])
    expect(s.stats().wakesRequested).toBe(1)
  })

  test.each(settings)('Promise API, %s: the drain the writer ran while the JS thread was busy withdraws the wake waiting there', async (_name, ms) => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, ...(ms === undefined ? {} : { wakeCoalesceMs: ms }) })
    const past = (ms ?? 250) + 50
    must(await s.recordAsync(spawn(CHILD, MAIN)))
    for (let run = 0; run < 3; run++) {
      // The commit, its wake's timer and the drain all run while the JS thread is busy: the
      // wake's call reaches it after the drain emptied the queue.
      const recorded = s.recordAsync(human(CHILD))
      busy(past)
      const drained = s.drainAsync(MAIN)
      busy(50)
      must(await recorded)
      expect(await drained).toHaveLength(1)
      // The same through acknowledgeAsync.
      const again = s.recordAsync(human(CHILD))
      busy(past)
      const acked = s.acknowledgeAsync(MAIN, [CHILD])
      busy(50)
      must(await again)
      expect(await acked).toBe(1)
    }
    await settle()
    expect(sink.wakes).toEqual([])
    expect(s.stats().wakesRequested).toBe(0)
  })
})
