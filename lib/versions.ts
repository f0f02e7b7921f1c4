/**
 * `stateVersions` across the boundary (`src/versions.rs`): the refs go to the addon as one
 * string, and the rows that come back name a ref by its index instead of repeating its key.
 * Both layouts are defined there; a Jest test checks `REF_SLOTS` and `VERSION_STRIDE` against
 * the addon's own (`packedLayout()`).
 * @packageDocumentation
 */
import * as a from './args'
import { ABSENT, SAME, VERSION_STRIDE, type PackedRows } from './packed'
import type { SessionVersion } from './types'

/** UTF-16 units before each ref's strings in the refs string. */
export const REF_SLOTS = 4

// The heads of refs without an agent, for every key length the addon accepts: building each
// with `String.fromCharCode` would cost about as much as the rest of the packing.
const HEADS: readonly string[] = Array.from({ length: 1025 }, (_, k) => String.fromCharCode(0, k, 0, 0))

/**
 * Checks `refs` as `stateVersions` takes them and writes them as one string: per ref, the
 * key's length (high 16 bits, low 16 bits), 0 or the agent's length + 1 (high, low), the key,
 * the agent. The keys are pushed to `keys`, in order.
 */
export function packRefs(refs: unknown, keys: string[]): string {
  if (!Array.isArray(refs)) throw a.invalidInput('refs must be an array')
  let s = ''
  for (let i = 0; i < refs.length; i++) {
    const o = a.opts(refs[i], `refs[${i}]`, 'ref')
    if (o === undefined) throw a.invalidInput(`refs[${i}] must be an object`)
    const key = a.reqStr(o.sessionKey, `refs[${i}].sessionKey`)
    const agent = a.optStr(o.agentId, `refs[${i}].agentId`)
    keys.push(key)
    const k = key.length
    if (agent === undefined) {
      s += (k < HEADS.length ? HEADS[k] : String.fromCharCode(k >>> 16, k & 0xffff, 0, 0)) + key
    } else {
      const t = agent.length + 1
      s += String.fromCharCode(k >>> 16, k & 0xffff, t >>> 16, t & 0xffff) + key + agent
    }
  }
  return s
}

/** The entries of `stateVersions` rows, given the keys of the refs in order. */
export function versionsOf(keys: readonly string[], rows: PackedRows): SessionVersion[] {
  const { text, numbers: m } = rows
  const out: SessionVersion[] = []
  let at = 0
  let len: number
  let agentId = ''
  for (let j = 0; j < m.length; j += VERSION_STRIDE) {
    let sessionKey = keys[m[j] as number] as string
    len = m[j + 1] as number
    if (len !== ABSENT) {
      sessionKey = text.slice(at, at + len)
      at += len
    }
    len = m[j + 2] as number
    if (len !== SAME) {
      agentId = text.slice(at, at + len)
      at += len
    }
    out.push({ sessionKey, agentId, stateVersion: m[j + 3] as number })
  }
  return out
}
