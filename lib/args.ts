/**
 * Argument checks that cost nothing in JavaScript and keep the native signatures typed: a
 * value of the wrong type is an `ERR_INVALID_ARG` {@link SessionStateError}, and `null` for an
 * optional value or member means absent.
 * @packageDocumentation
 */
import { invalid } from './errors'
import { KNOWN_NAMES, unknownName, type NamesOf } from './names'

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
 * An optional callback that must answer a boolean (`watcherExists`), wrapped so that any
 * other answer throws `ERR_INVALID_ARG` naming it: a Promise (callbacks are called
 * synchronously, so an async one is refused, never taken as true), `undefined`, a number, ….
 */
export function optPredicate<A>(v: unknown, name: string): ((arg: A) => boolean) | undefined {
  const f = optFn<(arg: A) => unknown>(v, name)
  if (f === undefined) return undefined
  return (arg) => {
    const r = f(arg)
    if (typeof r === 'boolean') return r
    if (typeof (r as { then?: unknown } | null)?.then === 'function') {
      throw invalid(`${name} returned a Promise: it is called synchronously and must return true or false`)
    }
    throw invalid(`${name} must return a boolean, got ${r === null ? 'null' : typeof r}`)
  }
}

/**
 * An optional options object: undefined and null are absent; anything but a plain object
 * (an array, a string, a function, …) is refused, and so is a member that list `names` of
 * {@link KNOWN_NAMES} does not know (semantics.md#api-arguments).
 */
export function opts(v: unknown, name: string, names: NamesOf): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name} must be an object`)
  known(v, name, names)
  return v as Record<string, unknown>
}

/** Refuses a member of `o` (called `name` in messages) that list `names` does not know. */
export function known(o: object, name: string, names: NamesOf): void {
  const k = unknownName(o, names)
  if (k !== undefined) {
    throw invalid(`${name} has an unknown member ${JSON.stringify(k)}; the known ones are ${KNOWN_NAMES[names].join(', ')}`)
  }
}

/** An array of strings: each entry that is not one is named by its index (`watchers[1]`). */
export function strArray(v: unknown, name: string): string[] {
  if (!Array.isArray(v)) throw invalid(`${name} must be an array of strings`)
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== 'string') throw invalid(`${name}[${i}] must be a string`)
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
    if (typeof value !== 'string') throw invalid(`${name}[${JSON.stringify(k)}] must be a string`)
    out[k] = value
  }
  return out
}

/** An `ERR_INVALID_ARG` error with a message of its own. */
export { invalid as invalidInput } from './errors'
