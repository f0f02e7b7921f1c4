/**
 * The delivery of the `onNotice` listener (semantics.md#notices-listener): the addon keeps
 * every notice entering the queue in an outbox and raises the queue's third signal word; this
 * hands the outbox to the listener after each call, when the addon signals notices queued by
 * background work, and on a timer tick, in queue order.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import { SessionStateError } from './errors'
import type { QueuedNotice } from './types'

/** One store's listener, its outbox check and its timer. */
export class NoticeListener {
  readonly #native: NativeSessionState
  readonly #words: Int32Array | null
  readonly #listener: (notice: QueuedNotice) => void
  readonly #report: (err: SessionStateError) => void
  // A listener that calls back into the store does not start a second delivery: the one in
  // progress takes what those calls queue.
  #delivering = false
  // The store's close returned: no notice is handed to the listener any more.
  #closed = false
  #tick: ReturnType<typeof setInterval> | undefined

  /**
   * @param native - the store
   * @param words - the queue's signal words, or null where the runtime refuses them (every
   *   delivery then asks the addon)
   * @param listener - the host's `onNotice`
   * @param report - where a throwing listener is reported
   * @param everyMs - the period of the fallback timer for notices queued by background work
   */
  constructor(
    native: NativeSessionState,
    words: Int32Array | null,
    listener: (notice: QueuedNotice) => void,
    report: (err: SessionStateError) => void,
    everyMs: number,
  ) {
    this.#native = native
    this.#words = words
    this.#listener = listener
    this.#report = report
    // Background work (the PostgreSQL catch-up, the poll for other processes, the upstream
    // monitor's scans) queues notices off the JS thread; the addon's signal (signalNotices)
    // hands them over at once, the tick is the fallback. It reads one shared word when nothing
    // entered, never keeps Node alive, and holds the listener weakly: a store dropped without
    // close() can be collected.
    const self = new WeakRef(this)
    this.#tick = setInterval(() => self.deref()?.deliver(), everyMs)
    this.#tick.unref()
  }

  /** Hands the notices that entered the queue to the listener. Cheap when none did. */
  deliver(): void {
    const words = this.#words
    if (this.#delivering || this.#closed || (words && words[2] === 0)) return
    this.#delivering = true
    try {
      // Until the outbox is empty: a listener that calls back into the store may queue more.
      for (;;) {
        if (words && words[2] === 0) return
        let batch: ReturnType<NativeSessionState['takeNotices']>
        try {
          batch = this.#native.takeNotices()
        } catch {
          return
        }
        if (batch.length === 0) return
        for (const q of batch) {
          // A listener that closes the store stops the rest of the delivery.
          if (this.#closed) return
          this.#call(q)
        }
      }
    } finally {
      this.#delivering = false
    }
  }

  #call(q: ReturnType<NativeSessionState['takeNotices']>[number]): void {
    // Built in the documented key order, an absent scope left out.
    const n = {
      watcherKey: q.watcherKey,
      targetKey: q.targetKey,
      changesSince: q.changesSince,
      text: q.text,
      contextKey: q.contextKey,
    } as QueuedNotice
    if (typeof q.scope === 'string') n.scope = q.scope
    n.wake = q.wake
    n.queueOnly = q.queueOnly
    try {
      this.#listener(n)
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e)
      this.#report(new SessionStateError('ERR_NOTICE_CALLBACK', `the onNotice listener threw: ${why}`, 'task:onNotice'))
    }
  }

  /** Stops the timer (the store is closing). */
  stop(): void {
    if (this.#tick !== undefined) clearInterval(this.#tick)
    this.#tick = undefined
  }

  /** The store's close returned: stops the timer and every later delivery. */
  closed(): void {
    this.stop()
    this.#closed = true
  }
}
