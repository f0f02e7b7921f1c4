/**
 * Argument checks that cost nothing in JavaScript and keep the native signatures typed: a
 * value of the wrong type is an `ERR_INVALID_ARG` {@link SessionStateError}, and `null` for an
 * optional value or member means absent.
 * @packageDocumentation
 */
import { invalid } from './errors'

/** A required string. */
export function str(v: unknown, name: string): string {
  if (typeof v !== 'string') throw invalid(`${name} must be a string`)
  return v
}

/** An optional string: undefined and null are absent. */
export function optStr(v: unknown, name: string): string | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw invalid(`${name} must be a string`)
  return v
}

/** A required string member: absent is `… is required`. */
export function reqStr(v: unknown, name: string): string {
  const s = optStr(v, name)
  if (s === undefined) throw invalid(`${name} is required`)
  return s
}

/** A required number (range rules belong to the core). */
export function num(v: unknown, name: string): number {
  if (typeof v !== 'number') throw invalid(`${name} must be a number`)
  return v
}

/** An optional number. */
export function optNum(v: unknown, name: string): number | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number') throw invalid(`${name} must be a number`)
  return v
}

/** An optional boolean. */
export function optBool(v: unknown, name: string): boolean | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'boolean') throw invalid(`${name} must be a boolean`)
  return v
}

/** An optional function. */
export function optFn<F>(v: unknown, name: string): F | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'function') throw invalid(`${name} must be a function`)
  return v as F
}

/**
 * An optional options object: undefined and null are absent; anything but a plain object
 * (an array, a string, a function, …) is refused.
 */
export function opts(v: unknown, name = 'options'): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name} must be an object`)
  return v as Record<string, unknown>
}

/** An array of strings. */
export function strArray(v: unknown, name: string): string[] {
  if (typeof v !== 'object' || v === null) throw invalid(`${name} must be an object`)
  if (!Array.isArray(v)) throw invalid(`${name} must be an array of strings`)
  for (const item of v) {
    if (typeof item !== 'string') throw invalid(`${name} must be a string`)
  }
  return v as string[]
}

/** An optional array of strings. */
export function optStrArray(v: unknown, name: string): string[] | undefined {
  if (v === undefined || v === null) return undefined
  return strArray(v, name)
}

/**
 * An optional map of strings: a plain object whose own enumerable values are all strings,
 * copied (each value read once) into a fresh object.
 */
export function optStrRecord(v: unknown, name: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name} must be an object`)
  const out: Record<string, string> = {}
  for (const [k, value] of Object.entries(v)) {
    if (typeof value !== 'string') throw invalid(`${name} must map keys to strings`)
    out[k] = value
  }
  return out
}

/** An `ERR_INVALID_ARG` error with a message of its own. */
export { invalid as invalidInput } from './errors'
