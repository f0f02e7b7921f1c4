/**
 * A payload as the compact JSON text the addon takes, stored exactly as it will read back
 * (semantics.md#recording-validation). The rules about JavaScript values live here: plain
 * data only (plain objects, arrays, strings, finite numbers, booleans, null), members that
 * are `undefined` left out as `JSON.stringify` does, a valid `Date` written as its ISO string
 * (what `JSON.stringify` writes), nesting up to 32 levels (which also stops a cyclic value).
 * Anything JSON cannot carry faithfully (a Map, a Set, a class instance, a typed array, a
 * RegExp, an invalid Date, …) is `ERR_INVALID_ARG` naming its path (`payload.m`). The rules
 * about the stored payload (a JSON object of at most 4096 UTF-8 bytes as compact JSON) live
 * in the core; the writer only stops as soon as the text is sure to exceed that limit, so an
 * oversize payload is refused after reading at most about 4096 characters of it, whatever
 * its size (semantics.md#recording-validation).
 * @packageDocumentation
 */
import { invalid } from './errors'

/** Nesting deeper than this is refused; it also stops a cyclic payload. */
export const MAX_PAYLOAD_DEPTH = 32
/** A payload with more entries than this cannot fit in 4096 bytes anyway. */
export const MAX_PAYLOAD_ENTRIES = 4096
/** The stored payload's limit, in UTF-8 bytes as compact JSON (the core's `PAYLOAD_MAX_BYTES`). */
export const MAX_PAYLOAD_BYTES = 4096

/**
 * The refusal of a payload whose JSON text already has more than {@link MAX_PAYLOAD_BYTES}
 * UTF-16 units: each is at least one UTF-8 byte, so the stored text could only be longer.
 */
function tooLarge(): never {
  throw invalid(`payload is more than ${MAX_PAYLOAD_BYTES} bytes as compact JSON; the limit is ${MAX_PAYLOAD_BYTES}`)
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/

/** A JSON string literal of `s`, with lone surrogates replaced as the addon's strings are. */
function quote(s: string): string {
  return JSON.stringify(s.isWellFormed() ? s : s.toWellFormed())
}

/** The path of member `k` of the value at `path`, as a caller would write it. */
function member(path: string, k: string): string {
  return IDENTIFIER.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`
}

/** What a value that is not plain data is, for the refusal. */
function what(v: object): string {
  if (v instanceof Map) return 'a Map'
  if (v instanceof Set) return 'a Set'
  if (v instanceof RegExp) return 'a RegExp'
  if (v instanceof Date) return 'an invalid Date'
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return `a binary buffer (${v.constructor.name})`
  if (typeof (v as { then?: unknown }).then === 'function') return 'a Promise'
  const name = (v.constructor as { name?: unknown } | undefined)?.name
  return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an object that is not plain'
}

/** True for an object made by `{}` or `Object.create(null)`, in any realm. */
function isPlainObject(v: object): boolean {
  const proto = Object.getPrototypeOf(v)
  return proto === null || Object.getPrototypeOf(proto) === null
}

/**
 * The JSON text of `v`, to be appended to `used` units already written: refused as soon as
 * the whole is sure to exceed the limit.
 */
function write(v: unknown, path: string, depth: number, used: number, limit: number): string {
  if (depth > MAX_PAYLOAD_DEPTH) throw invalid(`${path}: payload is nested too deeply (or is cyclic)`)
  switch (typeof v) {
    case 'string':
      // Its JSON text is at least its length plus the quotes: measured before it is copied.
      if (used + v.length + 2 > limit) tooLarge()
      return quote(v)
    case 'number':
      if (!Number.isFinite(v)) throw invalid(`${path} must be a finite number, got ${String(v)}`)
      return JSON.stringify(v)
    case 'boolean':
      return v ? 'true' : 'false'
    case 'undefined':
      return 'null'
    case 'symbol':
      throw invalid(`${path} is a Symbol, which JSON cannot hold`)
    case 'function':
      throw invalid(`${path} is a Function, which JSON cannot hold`)
    case 'bigint':
      throw invalid(`${path} is a BigInt, which JSON cannot hold`)
    default:
      break
  }
  if (v === null) return 'null'
  if (Array.isArray(v)) {
    if (v.length > MAX_PAYLOAD_ENTRIES) throw invalid('payload is too large')
    let out = '['
    for (let i = 0; i < v.length; i++) {
      out += (i > 0 ? ',' : '') + write(v[i], `${path}[${i}]`, depth + 1, used + out.length + (i > 0 ? 1 : 0), limit)
      if (used + out.length > limit) tooLarge()
    }
    return `${out}]`
  }
  const obj = v as Record<string, unknown>
  if (obj instanceof Date && Number.isFinite(obj.getTime())) return quote(obj.toISOString())
  if (!isPlainObject(obj)) {
    throw invalid(`${path} is ${what(obj)}: a payload holds plain data only (objects, arrays, strings, finite numbers, booleans, null)`)
  }
  const keys = Object.keys(obj)
  if (keys.length > MAX_PAYLOAD_ENTRIES) throw invalid('payload is too large')
  let out = '{'
  let first = true
  for (const k of keys) {
    const item = obj[k]
    if (item === undefined) continue
    if (used + out.length + k.length + 3 > limit) tooLarge()
    out += `${first ? '' : ','}${quote(k)}:`
    out += write(item, member(path, k), depth + 1, used + out.length, limit)
    if (used + out.length > limit) tooLarge()
    first = false
  }
  return `${out}}`
}

/**
 * The payload's JSON text, or undefined when it is absent (undefined or null). `name` is
 * the value's path in refusals; a text sure to exceed `limit` UTF-8 bytes is refused as soon
 * as that is known (a transcript row of `checkUpstream` has no limit here).
 */
export function payloadJson(payload: unknown, name = 'payload', limit = MAX_PAYLOAD_BYTES): string | undefined {
  if (payload === undefined || payload === null) return undefined
  return write(payload, name, 0, 0, limit)
}
