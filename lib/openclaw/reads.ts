/**
 * Cursor rows as the adapter reads them, keyed by the other side of the pair.
 * @packageDocumentation
 */
import type { CursorRow } from '../types'
import type { Adapter } from './host'

/**
 * The rows of one watcher keyed by target, or of one target keyed by watcher. Throws what the
 * store throws (the callers report it).
 */
export function cursorRows(a: Adapter, of: { watcher: string } | { target: string }): Map<string, CursorRow> {
  const out = new Map<string, CursorRow>()
  if ('watcher' in of) {
    for (const r of a.store.cursorRows({ watcherKey: of.watcher })) out.set(r.targetKey, r)
  } else {
    for (const r of a.store.cursorRows({ targetKey: of.target })) out.set(r.watcherKey, r)
  }
  return out
}
