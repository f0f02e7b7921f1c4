/**
 * The JavaScript side of the Promise API (semantics.md#promise-api). Each `*Async` call
 * queues a job on the store's writer thread and gets a promise; the writer hands back every
 * batch of results in one call, in call order, and {@link Settler} settles the batch's
 * promises. {@link Lane} checks each call's arguments (a failure is a rejection, never a
 * throw) and queues it; `SessionState`'s `*Async` methods are its methods.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import * as a from './args'
import {
  acknowledgeArgs,
  adoptArgs,
  agentArgs,
  changesSinceArgs,
  checkUpstreamArgs,
  noteOwnUserMessageArgs,
  cursorRowOf,
  cursorRowsArgs,
  recordArgs,
  stored,
  unwatchArgs,
  watchArgs,
  watcherExists,
} from './call-args'
import { SessionStateError, failedIn, fromCode } from './errors'
import * as packed from './packed'
import * as versions from './versions'
import type { CursorRow as NativeCursorRow } from '../index.js'
import type {
  AcknowledgeOptions,
  AgentOptions,
  ChangesSince,
  ChangesSinceOptions,
  CursorRow,
  CursorRowFilter,
  Notice,
  PruneReport,
  RecordInput,
  RemoteCheckResult,
  SessionRef,
  SessionVersion,
  StateEvent,
  SweepOptions,
  SweepReport,
  UpstreamLink,
  WatchOptions,
} from './types'

/** How a store reports a best-effort failure (`onError`, or stderr). */
export type Report = (err: SessionStateError) => void

/** A failure as the writer hands it back. */
interface NativeFailure {
  code: string
  message: string
}

/** A promise waiting for its job. */
interface Waiting {
  resolve: (value: unknown) => void
  reject: (reason: unknown) => void
  decode: (value: unknown) => unknown
  /** A best-effort call: without `strict` a failure is reported and the promise gives null. */
  bestEffort: boolean
  /** The method called (`SessionStateError.during`). */
  method: string
}

// setInterval's longest delay: the keep-alive timer never fires in practice.
const NEVER = 2 ** 31 - 1
const noop = (): void => {}

/**
 * A rejection's stack taken again where the promise settles: the writer's batch callback has
 * no frame of the caller, while the reaction that settles the caller's promise has its
 * `await`s (V8's async stack traces), as node-postgres does.
 */
function callerFrames(err: unknown): never {
  if (typeof err === 'object' && err !== null) Error.captureStackTrace(err)
  throw err
}

/**
 * The promises of one store waiting for the writer, oldest first. It holds no reference to
 * the native store: the writer's threadsafe function holds this object's callback, which
 * must not keep the store alive.
 */
class Settler {
  readonly #report: Report
  readonly #strict: boolean
  readonly #afterBatch: (() => void) | undefined
  #waiting: (Waiting | undefined)[] = []
  #head = 0
  // Ref'd while a promise waits, so Node stays up for work in flight and no longer.
  #keepAlive: ReturnType<typeof setInterval> | undefined
  #closed = false

  constructor(report: Report, strict: boolean, afterBatch: (() => void) | undefined) {
    this.#report = report
    this.#strict = strict
    this.#afterBatch = afterBatch
  }

  /** Promises not settled yet. */
  get pending(): number {
    return this.#waiting.length - this.#head
  }

  /**
   * A promise for the job just queued. One that may reject takes its stack where it settles
   * ({@link callerFrames}); a best-effort call without `strict` never rejects and pays nothing.
   */
  wait(decode: (value: unknown) => unknown, bestEffort: boolean, method: string): Promise<unknown> {
    const p = new Promise((resolve, reject) => {
      if (this.pending === 0) {
        if (this.#keepAlive === undefined) this.#keepAlive = setInterval(noop, NEVER)
        else this.#keepAlive.ref()
      }
      this.#waiting.push({ resolve, reject, decode, bestEffort, method })
    })
    return bestEffort && !this.#strict ? p : p.catch(callerFrames)
  }

  /** A call refused before it was queued, settled as a failure of the job would be. */
  refused(e: unknown, bestEffort: boolean, method: string): Promise<never | null> {
    const err = failedIn(e, method)
    if (bestEffort && !this.#strict) {
      this.#report(err)
      return Promise.resolve(null)
    }
    return Promise.reject(err)
  }

  /** The writer's batch: one value per job, in call order, and the failures if any. */
  readonly onBatch = (values: unknown[], failures: (NativeFailure | null)[] | null): void => {
    // The notice listener hears of the batch's notices before any of its promises settles.
    this.#afterBatch?.()
    for (let i = 0; i < values.length; i++) {
      const w = this.#waiting[this.#head]
      this.#waiting[this.#head++] = undefined
      if (w === undefined) continue
      const f = failures?.[i]
      if (f) this.#fail(w, fromCode(f.code, f.message, w.method))
      else {
        try {
          w.resolve(w.decode(values[i]))
        } catch (e) {
          this.#fail(w, failedIn(e, w.method))
        }
      }
    }
    if (this.#head >= this.#waiting.length) {
      this.#waiting = []
      this.#head = 0
      this.#idle()
    }
  }

  /** The store is closed or closing: once nothing waits, the timer goes. */
  close(): void {
    this.#closed = true
    if (this.pending === 0) this.#idle()
  }

  #idle(): void {
    if (this.#closed) {
      clearInterval(this.#keepAlive)
      this.#keepAlive = undefined
    } else {
      this.#keepAlive?.unref()
    }
  }

  #fail(w: Waiting, err: SessionStateError): void {
    if (w.bestEffort && !this.#strict) {
      this.#report(err)
      w.resolve(null)
    } else {
      w.reject(err)
    }
  }
}

/** The Promise API's queue of one store: starts the writer on first use. */
export class Lane {
  readonly #native: NativeSessionState
  readonly #settler: Settler
  #started = false

  /**
   * @param native - the store's native half
   * @param report - where best-effort failures go
   * @param strict - best-effort calls reject instead of reporting
   * @param afterBatch - runs when a batch's results arrive, before its promises settle
   */
  constructor(
    native: NativeSessionState,
    report: Report,
    strict: boolean,
    afterBatch?: (() => void) | undefined,
  ) {
    this.#native = native
    this.#settler = new Settler(report, strict, afterBatch)
  }

  /** Promises of this store not settled yet. */
  get pending(): number {
    return this.#settler.pending
  }

  /**
   * Runs `submit` (argument checks, then one native `*Async` call that queues the job) and
   * returns the promise of its result, decoded by `decode`. Anything `submit` throws is a
   * rejection, never a throw.
   */
  run<T>(method: string, submit: () => void, decode: (value: unknown) => T): Promise<T> {
    return this.#queue(method, submit, decode, false) as Promise<T>
  }

  /** {@link Lane.run} for a best-effort call: failures are null plus one `onError` (unless strict). */
  runBestEffort<T>(method: string, submit: () => void, decode: (value: unknown) => T): Promise<T | null> {
    return this.#queue(method, submit, decode, true) as Promise<T | null>
  }

  /** Queues the close behind every job queued before; settles once the store is closed. */
  close(): Promise<void> {
    let closed: Promise<void>
    try {
      this.#start()
      if (this.#native.closeAsync()) {
        closed = this.#settler.wait(() => undefined, false, 'closeAsync') as Promise<void>
      } else {
        // The writer had already stopped: the store is closed (or closes now, at once).
        this.#native.close()
        closed = Promise.resolve()
      }
    } catch (e) {
      closed = this.#settler.refused(e, false, 'closeAsync') as Promise<never>
    }
    this.#settler.close()
    return closed
  }

  /** `close()` ran: the promises still waiting settle, then nothing of the store stays. */
  closed(): void {
    this.#settler.close()
  }

  /** `recordAsync`: best-effort. */
  record(input: RecordInput): Promise<StateEvent | null> {
    return this.runBestEffort('recordAsync', () => this.#native.recordAsync(...recordArgs(input)), eventOrNull)
  }

  /** `watchAsync`. */
  watch(watcherKey: string, targetKey: string, options?: WatchOptions | null): Promise<boolean> {
    return this.run('watchAsync', () => this.#native.watchAsync(...watchArgs(watcherKey, targetKey, options)), Boolean)
  }

  /** `unwatchAsync`. */
  unwatch(watcherKey: string, targetKey: string): Promise<boolean> {
    return this.run('unwatchAsync', () => this.#native.unwatchAsync(...unwatchArgs(watcherKey, targetKey)), Boolean)
  }

  /** `drainAsync`: the notices, acknowledged on the writer thread. */
  drain(watcherKey: string): Promise<Notice[]> {
    return this.run(
      'drainAsync', () => this.#native.drainAsync(a.str(watcherKey, 'watcherKey')),
      (v) => packed.notices(stored(watcherKey), v as packed.PackedRows),
    )
  }

  /** `acknowledgeAsync`. */
  acknowledge(watcherKey: string, targetKeys: string[], options?: AcknowledgeOptions | null): Promise<number> {
    return this.run('acknowledgeAsync', () => this.#native.acknowledgeAsync(...acknowledgeArgs(watcherKey, targetKeys, options)), Number)
  }

  /** `sweepAsync`: with `watcherExists`, the candidates are read, asked here, then swept. */
  async sweep(options?: SweepOptions | null): Promise<SweepReport> {
    let exists: ((watcherKey: string) => boolean) | undefined
    try {
      exists = watcherExists(options)
    } catch (e) {
      throw failedIn(e, 'sweepAsync')
    }
    let only: string[] | undefined
    if (exists !== undefined) {
      const candidates = await this.run('sweepAsync', () => this.#native.sweepCandidatesAsync(), (v) => v as string[])
      try {
        only = candidates.filter((w) => exists(w))
      } catch (e) {
        if (e instanceof SessionStateError) throw failedIn(e, 'sweepAsync')
        throw failedIn(a.invalidInput(`watcherExists failed: ${e instanceof Error ? e.message : String(e)}`), 'sweepAsync')
      }
    }
    return this.run('sweepAsync', () => this.#native.sweepAsync(only), (v) => v as SweepReport)
  }

  /** `pruneAsync`. */
  prune(): Promise<PruneReport> {
    return this.run('pruneAsync', () => this.#native.pruneAsync(), (v) => v as PruneReport)
  }

  /** `resetSessionAsync`. */
  resetSession(sessionKey: string): Promise<void> {
    return this.run('resetSessionAsync', () => this.#native.resetSessionAsync(a.str(sessionKey, 'sessionKey')), nothing)
  }

  /** `deleteSessionAsync`. */
  deleteSession(sessionKey: string, options?: AgentOptions | null): Promise<void> {
    return this.run('deleteSessionAsync', () => this.#native.deleteSessionAsync(...agentArgs(sessionKey, options)), nothing)
  }

  /** `adoptAsync`: best-effort. */
  adopt(sessionKey: string, link: UpstreamLink): Promise<StateEvent | null> {
    return this.runBestEffort('adoptAsync', () => this.#native.adoptAsync(...adoptArgs(sessionKey, link)), eventOrNull)
  }

  /** `checkUpstreamAsync`: best-effort. */
  checkUpstream(sessionKey: string, result: RemoteCheckResult): Promise<StateEvent | null> {
    return this.runBestEffort('checkUpstreamAsync', () => this.#native.checkUpstreamAsync(...checkUpstreamArgs(sessionKey, result)), eventOrNull)
  }

  /** `noteOwnUserMessageAsync`. */
  noteOwnUserMessage(sessionKey: string, text: string): Promise<void> {
    return this.run('noteOwnUserMessageAsync', () => this.#native.noteOwnUserMessageAsync(...noteOwnUserMessageArgs(sessionKey, text)), nothing)
  }

  /** `scanUpstreamAsync`: the events recorded. */
  scanUpstream(): Promise<StateEvent[]> {
    return this.run(
      'scanUpstreamAsync', () => this.#native.scanUpstreamAsync(),
      (v) => packed.events(v as packed.PackedRows) as StateEvent[],
    )
  }

  /** `changesSinceAsync`. */
  changesSince(sessionKey: string, after: number, options?: ChangesSinceOptions | null): Promise<ChangesSince> {
    return this.run(
      'changesSinceAsync', () => this.#native.changesSinceAsync(...changesSinceArgs(sessionKey, after, options)),
      (v) => {
        const c = v as packed.PackedChanges
        return { stateVersion: c.stateVersion, stateChanges: packed.stateChanges(c) }
      },
    )
  }

  /** `cursorRowsAsync`. */
  cursorRows(filter?: CursorRowFilter | null): Promise<CursorRow[]> {
    return this.run(
      'cursorRowsAsync', () => this.#native.cursorRowsAsync(...cursorRowsArgs(filter)),
      (v) => (v as NativeCursorRow[]).map(cursorRowOf),
    )
  }

  /** `stateVersionsAsync`. */
  stateVersions(refs: SessionRef[]): Promise<SessionVersion[]> {
    const keys: string[] = []
    return this.run(
      'stateVersionsAsync', () => this.#native.stateVersionsAsync(versions.packRefs(refs, keys)),
      (v) => versions.versionsOf(keys, v as packed.PackedRows),
    )
  }

  #start(): void {
    if (!this.#started) {
      this.#native.startWriter(this.#settler.onBatch)
      this.#started = true
    }
  }

  #queue(method: string, submit: () => void, decode: (value: unknown) => unknown, bestEffort: boolean): Promise<unknown> {
    try {
      this.#start()
      submit()
    } catch (e) {
      return this.#settler.refused(e, bestEffort, method)
    }
    return this.#settler.wait(decode, bestEffort, method)
  }
}

/** A packed event or null, as the writer hands it back. */
export function eventOrNull(v: unknown): StateEvent | null {
  return v === null || v === undefined ? null : packed.eventOf(v as packed.PackedEvent)
}

/** The settled value of a call that returns nothing. */
function nothing(): void {}
