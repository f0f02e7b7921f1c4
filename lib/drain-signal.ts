/**
 * The answer of an empty `drain` without the addon: the notice queue's signal words, which
 * the addon keeps current in memory both sides read (semantics.md#cursors; the benchmarks'
 * empty drain).
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import * as packed from './packed'

/**
 * One store's view of its queue's signal words: word 0 says whether anything is queued at
 * all, word 1 counts the watchers the addon has not served yet. A watcher the addon already
 * checked and served, with nothing queued anywhere and no such watcher since, has nothing to
 * drain.
 * @internal
 */
export class DrainSignal {
  readonly #native: NativeSessionState
  // The words over the addon's memory: undefined until first needed, null where the runtime
  // refuses them.
  #words: Int32Array | null | undefined = undefined
  // The value of word 1 when `#served` was filled.
  #unserved = 0
  // The watchers the addon has already checked and served.
  readonly #served = new Set<string>()

  /** @param native - the store whose queue's words it reads */
  constructor(native: NativeSessionState) {
    this.#native = native
  }

  /** The words (read from the addon the first time), or null where the runtime refuses them. */
  words(): Int32Array | null {
    if (this.#words === undefined) {
      const w = this.#native.drainSignal()
      this.#words = w
      if (w) this.#unserved = w[1] as number
    }
    return this.#words
  }

  /**
   * Nothing queued in the whole store, no Promise API call pending (`lanePending` 0), no
   * watcher unserved since `#served` was filled, and the addon already checked and served
   * this watcher: the addon would answer [] too.
   */
  nothingFor(watcherKey: string, lanePending: number): boolean {
    const words = this.#words
    return (
      !!words &&
      words[0] === packed.SIGNAL_EMPTY &&
      lanePending === 0 &&
      words[1] === this.#unserved &&
      this.#served.has(watcherKey)
    )
  }

  /** After the addon drained for `watcherKey`: it is checked and served. */
  servedNow(watcherKey: string): void {
    const w = this.words()
    if (w) {
      if (w[1] !== this.#unserved) {
        this.#served.clear()
        this.#unserved = w[1] as number
      }
      this.#served.add(watcherKey)
    }
  }
}
