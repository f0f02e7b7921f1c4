/**
 * The gate of a store's background callbacks (semantics.md#wake): what the callbacks the
 * addon calls from background work ask before they call the host's.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'

/**
 * Whether the host has begun closing the store, and the store itself, held weakly (the addon
 * holds the callbacks strongly, which must not keep the store alive). A wake or a report that
 * a background thread handed over just before the close reaches the JS thread after it; it is
 * dropped there, so no store calls `wake` or `onError` once `close()` or `closeAsync()` was
 * called.
 */
export interface Gate {
  /** The store, once constructed. */
  native: WeakRef<NativeSessionState> | undefined
  /** `close()` or `closeAsync()` was called. Setting it true runs {@link Gate.closers} once. */
  closing: boolean
  /** What ends with the store (its followers, semantics.md#follow), run when closing begins. */
  closers: (() => void)[]
}

/** A gate for a store not constructed yet. */
export function gate(): Gate {
  let closing = false
  const g: Gate = {
    native: undefined,
    closers: [],
    get closing(): boolean {
      return closing
    },
    set closing(v: boolean) {
      const began = v && !closing
      closing = v
      if (began) for (const f of g.closers.splice(0)) f()
    },
  }
  return g
}

/** True while the gate's store is open and not closing. */
export function isOpen(g: Gate): boolean {
  const n = g.closing ? undefined : g.native?.deref()
  return n !== undefined && !n.isClosed
}

/**
 * True when a wake for `watcherKey` that reached the JS thread should go to the host: the
 * store is open and the watcher still has queued notices as the queue stands now (a drain or
 * acknowledge that ran meanwhile withdrew it; semantics.md#wake).
 */
export function wakeDue(g: Gate, watcherKey: string): boolean {
  const n = g.closing ? undefined : g.native?.deref()
  return n !== undefined && !n.isClosed && n.wakeDue(watcherKey)
}
