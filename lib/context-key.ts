/**
 * The context key of a target's notices, for hosts that dedupe on one.
 * @packageDocumentation
 */
import * as native from '../index.js'
import { str } from './args'

/**
 * `session-state:` followed by the lowercase hex of the target key's UTF-8 bytes: the context
 * key of the target's notices.
 */
export function encodeNoticeContextKey(targetKey: string): string {
  return native.encodeNoticeContextKey(str(targetKey, 'targetKey'))
}

/**
 * The target key of a notice context key, or null unless it is exactly what
 * {@link encodeNoticeContextKey} produces (prefix, non-empty even-length lowercase hex, valid
 * UTF-8; a leading U+FEFF is kept).
 */
export function decodeNoticeContextKey(contextKey: string): string | null {
  return native.decodeNoticeContextKey(str(contextKey, 'contextKey'))
}
