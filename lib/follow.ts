/**
 * Following a session live (semantics.md#follow): `state.follow(key, options)` returns an
 * async iterator of batches, first what is stored after `after`, then each batch as soon as
 * the store knows of it. A follower reads its rows with `changesSinceAsync` when its consumer
 * pulls, and holds nothing between pulls; the store's one follow signal per store (the addon's
 * weak threadsafe function) tells the hub here which followed sessions may have new rows, and
 * the hub wakes the followers of those sessions that wait.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import * as a from './args'
import { SessionStateError, failedIn, invalid } from './errors'
import type { Gate } from './gate'
import type { SessionState } from './session-state'
import type { ChangeEvent, ChangesSince } from './types'

/** Options of {@link SessionState.follow}. */
export interface FollowOptions {
  /** Replay what is stored after this sequence (a non-negative safe integer); default 0. */
  after?: number | null
  /** The session's agent, resolved as `changesSince` does (default: the key's own, else `main`). */
  agentId?: string | null
  /** The most events in one batch, floored and clamped into [1, 200]; default 200. */
  limit?: number | null
  /** Ends the follower when aborted: a pending `next()` resolves `done` at once. */
  signal?: AbortSignal | null
}

/** One batch of a follower: never empty. */
export interface FollowBatch {
  /** The session's state version when the batch was read. */
  stateVersion: number
  /** The next stored rows of the session, ascending, exactly as `changesSince` returns them. */
  events: ChangeEvent[]
  /**
   * True when rows the follower had not read were pruned before it read them: on the first
   * batch as `changesSince` says it, later once when a slow follower fell behind retention (it
   * goes on from the earliest row kept).
   */
  historyGap: boolean
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined })

/**
 * One followed session in the hub: how often it was touched, and its followers that wait.
 * @internal
 */
export interface Entry {
  /** How often the addon said the session was touched. */
  touches: number
  /** Its open followers. */
  followers: number
  /** Its followers waiting for a touch. */
  waiting: Set<Follower>
}

/** What a collected follower that never ended leaves to release. */
interface Held {
  hub: Hub
  agent: string
  key: string
}

// A follower dropped without `return()` (its loop abandoned) still counts as open in the
// addon until it is collected: then its registration goes.
const abandoned = new FinalizationRegistry<Held>((h) => h.hub.release(h.agent, h.key))

/**
 * The followers of one store and the store's follow signal.
 * @internal
 */
export class Hub {
  readonly #native: NativeSessionState
  readonly #sessions = new Map<string, Entry>()
  /** The followers with a `next()` pending: a close settles them. */
  readonly active = new Set<Follower>()
  #closed = false
  // Held while a `next()` is pending: like a socket read, it keeps Node alive.
  #alive: ReturnType<typeof setInterval> | undefined

  /**
   * @param native - the store
   * @param gate - the store's gate: its close ends every follower
   */
  constructor(native: NativeSessionState, gate: Gate) {
    this.#native = native
    // The addon holds this callback strongly and the hub weakly: the hub never keeps the
    // store alive, and the signal never keeps Node alive.
    const self = new WeakRef(this)
    native.followSignal(() => self.deref()?.touched())
    gate.closers.push(() => self.deref()?.close())
  }

  /** True once the store began closing. */
  get closed(): boolean {
    return this.#closed
  }

  /** Registers a follower of the session; returns its entry and the agent resolved. */
  register(sessionKey: string, agentId: string | undefined): { entry: Entry; agent: string } {
    let agent: string
    try {
      agent = this.#native.follow(sessionKey, agentId)
    } catch (e) {
      throw failedIn(e, 'follow')
    }
    const id = `${agent}\u0000${sessionKey}`
    let entry = this.#sessions.get(id)
    if (entry === undefined) {
      entry = { touches: 0, followers: 0, waiting: new Set() }
      this.#sessions.set(id, entry)
    }
    entry.followers++
    return { entry, agent }
  }

  /** A follower of the session ended. */
  release(agent: string, sessionKey: string): void {
    const id = `${agent}\u0000${sessionKey}`
    const entry = this.#sessions.get(id)
    if (entry === undefined) return
    this.#native.unfollow(sessionKey, agent)
    if (--entry.followers === 0) this.#sessions.delete(id)
  }

  /** The addon's signal: followed sessions may have new rows; their waiting followers read. */
  touched(): void {
    let list: string[]
    try {
      list = this.#native.takeFollowed()
    } catch {
      return
    }
    for (let i = 0; i + 1 < list.length; i += 2) {
      const entry = this.#sessions.get(`${list[i]}\u0000${list[i + 1]}`)
      if (entry === undefined) continue
      entry.touches++
      const waiting = [...entry.waiting]
      entry.waiting.clear()
      for (const f of waiting) f.wake()
    }
  }

  /**
   * A follower's `next()` is pending (`true`) or settled: while any is pending, Node stays
   * alive.
   */
  pending(f: Follower, on: boolean): void {
    if (on) this.active.add(f)
    else this.active.delete(f)
    if (this.active.size > 0) this.#alive ??= setInterval(() => {}, 1 << 30)
    else if (this.#alive !== undefined) {
      clearInterval(this.#alive)
      this.#alive = undefined
    }
  }

  /** The store is closing: every follower ends. */
  close(): void {
    this.#closed = true
    for (const f of [...this.active]) f.end()
  }
}

const hubs = new WeakMap<NativeSessionState, Hub>()

/**
 * A live follower of one session (semantics.md#follow): an async iterator of
 * {@link FollowBatch}es, for `for await`. `break`, `return()`, an aborted `signal` and the
 * store's `close()` or `closeAsync()` end it (`done`); a failing read rejects that `next()` and
 * ends it. A pending `next()` keeps Node alive, as a socket read does; nothing else does.
 */
export class Follower implements AsyncIterableIterator<FollowBatch> {
  readonly #state: SessionState
  readonly #hub: Hub
  readonly #entry: Entry
  readonly #key: string
  readonly #agent: string
  readonly #limit: number | undefined
  readonly #signal: AbortSignal | undefined
  readonly #onAbort = (): void => this.end()
  #after: number
  // The entry's touches when the last read began; -1: read before waiting.
  #seen = -1
  // The last read was truncated: read again before waiting.
  #more = false
  // A gap seen by a read that returned no event: it goes with the next batch.
  #gap = false
  #done = false
  // The pending `next()`'s resolver (an abort or a close settles it) and the wait's.
  #settle: ((r: IteratorResult<FollowBatch, undefined>) => void) | undefined
  #wakeUp: (() => void) | undefined
  // `next()` calls run one after the other.
  #queue: Promise<unknown> = Promise.resolve()

  /** @internal */
  constructor(state: SessionState, hub: Hub, sessionKey: string, after: number, agentId: string | undefined, limit: number | undefined, signal: AbortSignal | undefined) {
    this.#state = state
    this.#hub = hub
    this.#key = sessionKey
    this.#after = after
    this.#limit = limit
    const { entry, agent } = hub.register(sessionKey, agentId)
    this.#entry = entry
    this.#agent = agent
    abandoned.register(this, { hub, agent, key: sessionKey }, this)
    this.#signal = signal
    if (signal?.aborted) this.end()
    else signal?.addEventListener('abort', this.#onAbort, { once: true })
  }

  /** The next batch: waits until the session has rows after the last one handed out. */
  next(): Promise<IteratorResult<FollowBatch, undefined>> {
    const p = this.#queue.then(() => this.#pull())
    this.#queue = p.catch(() => undefined)
    return p
  }

  /** Ends the follower (what `break` calls). */
  return(): Promise<IteratorResult<FollowBatch, undefined>> {
    this.end()
    return Promise.resolve(DONE)
  }

  /** The follower itself: it is its own async iterator. */
  [Symbol.asyncIterator](): this {
    return this
  }

  /**
   * Ends the follower: a pending `next()` resolves `done`, its registration goes.
   * @internal
   */
  end(): void {
    if (this.#done) return
    this.#done = true
    this.#signal?.removeEventListener('abort', this.#onAbort)
    abandoned.unregister(this)
    this.#entry.waiting.delete(this)
    this.#hub.pending(this, false)
    this.#hub.release(this.#agent, this.#key)
    this.#wakeUp?.()
    const settle = this.#settle
    this.#settle = undefined
    settle?.(DONE)
  }

  /**
   * The session was touched: a waiting follower reads.
   * @internal
   */
  wake(): void {
    this.#wakeUp?.()
  }

  #pull(): Promise<IteratorResult<FollowBatch, undefined>> {
    return new Promise((resolve, reject) => {
      if (this.#done || this.#hub.closed) {
        this.end()
        resolve(DONE)
        return
      }
      this.#settle = resolve
      this.#hub.pending(this, true)
      this.#step().then(
        (r) => {
          this.#settle = undefined
          this.#hub.pending(this, false)
          resolve(r)
        },
        (e: unknown) => {
          this.#settle = undefined
          this.#hub.pending(this, false)
          // A read refused because the store is closing ends the follower like the close.
          const closing = this.#done || this.#hub.closed
          this.end()
          if (closing) resolve(DONE)
          else reject(failedIn(e, 'follow'))
        },
      )
    })
  }

  async #step(): Promise<IteratorResult<FollowBatch, undefined>> {
    for (;;) {
      if (this.#done) return DONE
      if (!this.#more && this.#entry.touches === this.#seen) {
        await new Promise<void>((resolve) => {
          this.#wakeUp = resolve
          this.#entry.waiting.add(this)
        })
        this.#wakeUp = undefined
        continue
      }
      this.#seen = this.#entry.touches
      const c: ChangesSince = await this.#state.changesSinceAsync(this.#key, this.#after, {
        agentId: this.#agent,
        limit: this.#limit,
      })
      if (this.#done) return DONE
      const s = c.stateChanges
      this.#more = s.truncated
      if (s.historyGap) this.#gap = true
      const last = s.events.at(-1)
      if (last === undefined) {
        // Every row it had not read was pruned and none is left: it goes on from the head,
        // and the gap goes with the next batch.
        if (s.historyGap) this.#after = Math.max(this.#after, s.earliestAvailableSequence - 1)
        continue
      }
      this.#after = last.sequence
      const historyGap = this.#gap
      this.#gap = false
      return { done: false, value: { stateVersion: c.stateVersion, events: s.events, historyGap } }
    }
  }
}

/**
 * `state.follow`: checks the arguments (`ERR_INVALID_ARG`) and that the store is open
 * (`ERR_CLOSED`), then registers the follower.
 * @internal
 */
export function follow(
  state: SessionState,
  native: NativeSessionState,
  gate: Gate,
  sessionKey: string,
  options: FollowOptions | null | undefined,
): Follower {
  a.str(sessionKey, 'sessionKey')
  if (sessionKey.trim() === '') throw invalid('sessionKey must not be blank')
  const o = a.opts(options, 'options', 'follow')
  const after = a.optNum(o?.after, 'after') ?? 0
  if (!Number.isSafeInteger(after) || after < 0) throw invalid('after must be a non-negative safe integer')
  const limit = a.optNum(o?.limit, 'limit')
  if (limit !== undefined && !Number.isFinite(limit)) throw invalid('limit must be a finite number')
  const agentId = a.optStr(o?.agentId, 'agentId')
  const raw = o?.signal ?? undefined
  if (raw !== undefined && !(raw instanceof AbortSignal)) throw invalid('signal must be an AbortSignal')
  const signal = raw as AbortSignal | undefined
  if (gate.closing || native.isClosed) throw new SessionStateError('ERR_CLOSED', 'the store is closed')
  let hub = hubs.get(native)
  if (hub === undefined) {
    hub = new Hub(native, gate)
    hubs.set(native, hub)
  }
  return new Follower(state, hub, sessionKey, after, agentId, limit, signal)
}
