/**
 * A payload as the compact JSON text the addon takes. The rules about JavaScript values live
 * here: plain data only (objects, arrays, strings, finite numbers, booleans, null), members
 * that are `undefined` left out as `JSON.stringify` does, nesting up to 32 levels (which also
 * stops a cyclic value). The rules about the stored payload (a JSON object of at most 4096
 * UTF-8 bytes as compact JSON) live in the core.
 * @packageDocumentation
 */
import { invalid } from './errors'

/** Nesting deeper than this is refused; it also stops a cyclic payload. */
export const MAX_PAYLOAD_DEPTH = 32
/** A payload with more entries than this cannot fit in 4096 bytes anyway. */
export const MAX_PAYLOAD_ENTRIES = 4096

/** A JSON string literal of `s`, with lone surrogates replaced as the addon's strings are. */
function quote(s: string): string {
  return JSON.stringify(s.isWellFormed() ? s : s.toWellFormed())
}

function write(v: unknown, depth: number): string {
  if (depth > MAX_PAYLOAD_DEPTH) throw invalid('payload is nested too deeply (or is cyclic)')
  switch (typeof v) {
    case 'string':
      return quote(v)
    case 'number':
      if (!Number.isFinite(v)) throw invalid('payload numbers must be finite')
      return JSON.stringify(v)
    case 'boolean':
      return v ? 'true' : 'false'
    case 'undefined':
      return 'null'
    case 'symbol':
      throw invalid('payload cannot hold a Symbol value')
    case 'function':
      throw invalid('payload cannot hold a Function value')
    case 'bigint':
      throw invalid('payload cannot hold a BigInt value')
    default:
      break
  }
  if (v === null) return 'null'
  if (Array.isArray(v)) {
    if (v.length > MAX_PAYLOAD_ENTRIES) throw invalid('payload is too large')
    let out = '['
    for (let i = 0; i < v.length; i++) out += (i > 0 ? ',' : '') + write(v[i], depth + 1)
    return `${out}]`
  }
  const obj = v as Record<string, unknown>
  const keys = Object.keys(obj)
  if (keys.length > MAX_PAYLOAD_ENTRIES) throw invalid('payload is too large')
  let out = '{'
  let first = true
  for (const k of keys) {
    const item = obj[k]
    if (item === undefined) continue
    out += `${first ? '' : ','}${quote(k)}:${write(item, depth + 1)}`
    first = false
  }
  return `${out}}`
}

/** The payload's JSON text, or undefined when it is absent (undefined or null). */
export function payloadJson(payload: unknown): string | undefined {
  if (payload === undefined || payload === null) return undefined
  return write(payload, 0)
}
