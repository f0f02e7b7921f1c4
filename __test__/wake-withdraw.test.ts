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
