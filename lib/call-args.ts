/**
 * Arguments shaped the way the native calls take them, shared by the synchronous methods and
 * their Promise twins: each throws an `ERR_INVALID_ARG` {@link SessionStateError} for a value
 * of the wrong type.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import * as a from './args'
import { SessionStateError } from './errors'
import { payloadJson } from './payload'
import type { RecordInput } from './types'

/** The arguments of the native `record` and `recordAsync`, checked. */
export type RecordArgs = Parameters<NativeSessionState['record']>

/** Checks a record input and lays it out as the native calls take it. */
export function recordArgs(input: RecordInput): RecordArgs {
  if (input === undefined || input === null) throw a.invalidInput('record needs an input object')
  if (typeof input !== 'object' || Array.isArray(input)) throw a.invalidInput('input must be an object')
  a.known(input, 'input', 'record')
  const i = input as unknown as Record<string, unknown>
  return [
    a.reqStr(i.sessionKey, 'sessionKey'),
    a.optStr(i.agentId, 'agentId'),
    a.optStr(i.sessionId, 'sessionId'),
    a.reqStr(i.kind, 'kind'),
    a.reqStr(i.actorType, 'actorType'),
    a.optStr(i.actorId, 'actorId'),
    a.optStr(i.runId, 'runId'),
    a.reqStr(i.summary, 'summary'),
    payloadJson(i.payload),
    a.optNum(i.occurredAt, 'occurredAt'),
    a.optStr(i.dedupeKey, 'dedupeKey'),
    a.optStrArray(i.watchers, 'watchers'),
    a.optBool(i.onlyIfWatched, 'onlyIfWatched') ?? false,
    a.optStrRecord(i.watcherScopes, 'watcherScopes'),
  ]
}

/**
 * `sweep`'s `watcherExists`, checked and wrapped for the addon. The callback's own refusal
 * (an answer that is not a boolean) is kept by `refused`, so the caller throws it as it is
 * instead of the addon's wrapped report of a throwing callback.
 */
export function sweepPredicate(options: unknown): {
  exists: ((watcherKey: string) => boolean) | undefined
  refused: () => unknown
} {
  const given = a.optPredicate<string>(a.opts(options, 'options', 'sweep')?.watcherExists, 'watcherExists')
  let refused: unknown
  const exists =
    given &&
    ((w: string): boolean => {
      try {
        return given(w)
      } catch (e) {
        if (e instanceof SessionStateError) refused ??= e
        throw e
      }
    })
  return { exists, refused: () => refused }
}

/** `adopt`'s link, checked. */
export function upstreamLink(link: unknown): Parameters<NativeSessionState['adopt']>[1] {
  const l = a.opts(link, 'link', 'link')
  if (l === undefined) throw a.invalidInput('link must be an object')
  return {
    source: a.reqStr(l.source, 'source'),
    transcriptPath: a.optStr(l.transcriptPath, 'transcriptPath'),
    remoteId: a.optStr(l.remoteId, 'remoteId'),
    agentId: a.optStr(l.agentId, 'agentId'),
    hostId: a.optStr(l.hostId, 'hostId'),
  }
}

/** `checkUpstream`'s result as the addon takes it: `found` as a word, the items as JSON. */
export function remoteCheck(result: unknown): [string, string | undefined] {
  const bad = () =>
    a.invalidInput("result must be { found: true, items } | { found: false } | { found: 'unknown' }")
  if (typeof result !== 'object' || result === null) throw bad()
  const { found, items } = result as { found?: unknown; items?: unknown }
  if (found === false) return ['false', undefined]
  if (found === 'unknown') return ['unknown', undefined]
  if (found !== true || !Array.isArray(items)) throw bad()
  const json = items.map((item, n) => payloadJson(item, `items[${n}]`) ?? 'null')
  return ['true', `[${json.join(',')}]`]
}

/** A key as the addon stores it: a lone surrogate becomes U+FFFD, as in every string it takes. */
export function stored(key: string): string {
  return key.isWellFormed() ? key : key.toWellFormed()
}
