/**
 * Arguments shaped the way the native calls take them, shared by the synchronous methods and
 * their Promise twins: each throws an `ERR_INVALID_ARG` {@link SessionStateError} for a value
 * of the wrong type.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import type { CursorRow as NativeCursorRow } from '../index.js'
import * as a from './args'
import { SessionStateError } from './errors'
import { payloadJson } from './payload'
import type {
  AcknowledgeOptions,
  AgentOptions,
  ChangesSinceOptions,
  CursorRow,
  CursorRowFilter,
  RecordInput,
  RemoteCheckResult,
  UpstreamLink,
  WatchOptions,
} from './types'

/** The arguments of a native call, checked (the call's own name in `NativeSessionState`). */
type Args<K extends keyof NativeSessionState> = NativeSessionState[K] extends (...args: infer P) => unknown
  ? P
  : never

/** The arguments of `cursorRows` and `cursorRowsAsync`: the watcher and the target, each optional. */
export function cursorRowsArgs(filter: CursorRowFilter | null | undefined): Args<'cursorRows'> {
  const o = a.opts(filter, 'filter', 'cursorRows')
  return [a.optStr(o?.watcherKey, 'watcherKey'), a.optStr(o?.targetKey, 'targetKey')]
}

/** A native cursor row in the public shape: an absent scope is left out. */
export function cursorRowOf(r: NativeCursorRow): CursorRow {
  const { scope, ...rest } = r
  return scope === undefined || scope === null ? rest : { ...rest, scope }
}

/** The arguments of the native `record` and `recordAsync`, checked and packed. */
export type RecordArgs = Args<'record'>

/**
 * The record input's string fields in its packed text, in order (`src/packed.rs`, which a
 * test checks): `sessionKey`, `agentId`, `sessionId`, `kind`, `actorType`, `actorId`,
 * `runId`, `summary`, the payload's JSON text, `dedupeKey`.
 */
export const RECORD_STRINGS = 10

/** A string field's tag in the packed record text: 0 when absent, else its length + 1. */
function tag(s: string | undefined): number {
  return s === undefined ? 0 : s.length + 1
}

/**
 * Checks a record input and lays it out as the native calls take it: the string fields as
 * one packed text (per field its two header units, then the fields present, back to back;
 * `src/calls.rs` reads it), then `occurredAt`, `onlyIfWatched`, `watchers`, `watcherScopes`.
 */
export function recordArgs(input: RecordInput): RecordArgs {
  if (input === undefined || input === null) throw a.invalidInput('record needs an input object')
  if (typeof input !== 'object' || Array.isArray(input)) throw a.invalidInput('input must be an object')
  a.known(input, 'input', 'record')
  const i = input as unknown as Record<string, unknown>
  const sessionKey = a.reqStr(i.sessionKey, 'sessionKey')
  const agentId = a.optStr(i.agentId, 'agentId')
  const sessionId = a.optStr(i.sessionId, 'sessionId')
  const kind = a.reqStr(i.kind, 'kind')
  const actorType = a.reqStr(i.actorType, 'actorType')
  const actorId = a.optStr(i.actorId, 'actorId')
  const runId = a.optStr(i.runId, 'runId')
  const summary = a.reqStr(i.summary, 'summary')
  const payload = payloadJson(i.payload)
  const occurredAt = a.optNum(i.occurredAt, 'occurredAt')
  const dedupeKey = a.optStr(i.dedupeKey, 'dedupeKey')
  const watchers = a.optStrArray(i.watchers, 'watchers')
  const onlyIfWatched = a.optBool(i.onlyIfWatched, 'onlyIfWatched') ?? false
  const watcherScopes = a.optStrRecord(i.watcherScopes, 'watcherScopes')
  // Each tag as two UTF-16 units, high 16 bits then low, in one call: the cheapest way to
  // build the header.
  const t0 = tag(sessionKey)
  const t1 = tag(agentId)
  const t2 = tag(sessionId)
  const t3 = tag(kind)
  const t4 = tag(actorType)
  const t5 = tag(actorId)
  const t6 = tag(runId)
  const t7 = tag(summary)
  const t8 = tag(payload)
  const t9 = tag(dedupeKey)
  const text =
    String.fromCharCode(
      t0 >>> 16, t0 & 0xffff, t1 >>> 16, t1 & 0xffff, t2 >>> 16, t2 & 0xffff, t3 >>> 16, t3 & 0xffff,
      t4 >>> 16, t4 & 0xffff, t5 >>> 16, t5 & 0xffff, t6 >>> 16, t6 & 0xffff, t7 >>> 16, t7 & 0xffff,
      t8 >>> 16, t8 & 0xffff, t9 >>> 16, t9 & 0xffff,
    ) +
    sessionKey +
    (agentId ?? '') +
    (sessionId ?? '') +
    kind +
    actorType +
    (actorId ?? '') +
    (runId ?? '') +
    summary +
    (payload ?? '') +
    (dedupeKey ?? '')
  return [text, occurredAt, onlyIfWatched, watchers, watcherScopes]
}

// The argument specifications of the calls that have a Promise twin: `SessionState`'s method
// and `Lane`'s twin both check their arguments here, in this order, and pass the result on to
// the native call and its `*Async` twin, which take the same arguments.

/** `watch` and `watchAsync`. */
export function watchArgs(watcherKey: string, targetKey: string, options: WatchOptions | null | undefined): Args<'watch'> {
  a.str(watcherKey, 'watcherKey')
  a.str(targetKey, 'targetKey')
  const o = a.opts(options, 'options', 'watch')
  return [
    watcherKey,
    targetKey,
    a.optStr(o?.provenance, 'provenance'),
    a.optStr(o?.scope, 'scope'),
    a.optBool(o?.refresh, 'refresh'),
  ]
}

/** `unwatch` and `unwatchAsync`. */
export function unwatchArgs(watcherKey: string, targetKey: string): Args<'unwatch'> {
  return [a.str(watcherKey, 'watcherKey'), a.str(targetKey, 'targetKey')]
}

/** `acknowledge` and `acknowledgeAsync`. */
export function acknowledgeArgs(
  watcherKey: string,
  targetKeys: string[],
  options: AcknowledgeOptions | null | undefined,
): Args<'acknowledge'> {
  a.str(watcherKey, 'watcherKey')
  a.strArray(targetKeys, 'targetKeys')
  const o = a.opts(options, 'options', 'acknowledge')
  return [watcherKey, targetKeys, a.optStr(o?.scope, 'scope'), a.optNum(o?.through, 'through')]
}

/** `changesSince` and `changesSinceAsync`. */
export function changesSinceArgs(
  sessionKey: string,
  after: number,
  options: ChangesSinceOptions | null | undefined,
): Args<'changesSince'> {
  a.str(sessionKey, 'sessionKey')
  a.num(after, 'after')
  const o = a.opts(options, 'options', 'changesSince')
  return [sessionKey, after, a.optStr(o?.agentId, 'agentId'), a.optNum(o?.limit, 'limit')]
}

/** A session key and its agent: `stateVersion`, `deleteSession` and `deleteSessionAsync`. */
export function agentArgs(sessionKey: string, options: AgentOptions | null | undefined): [string, string | undefined] {
  a.str(sessionKey, 'sessionKey')
  return [sessionKey, a.optStr(a.opts(options, 'options', 'agent')?.agentId, 'agentId')]
}

/** `adopt` and `adoptAsync`. */
export function adoptArgs(sessionKey: string, link: UpstreamLink): Args<'adopt'> {
  a.str(sessionKey, 'sessionKey')
  return [sessionKey, upstreamLink(link)]
}

/** `noteOwnUserMessage` and `noteOwnUserMessageAsync`. */
export function noteOwnUserMessageArgs(sessionKey: string, text: string): Args<'noteOwnUserMessage'> {
  a.str(sessionKey, 'sessionKey')
  a.str(text, 'text')
  return [sessionKey, text]
}

/** `checkUpstream` and `checkUpstreamAsync`. */
export function checkUpstreamArgs(sessionKey: string, result: RemoteCheckResult): Args<'checkUpstream'> {
  a.str(sessionKey, 'sessionKey')
  const [found, items] = remoteCheck(result)
  return [sessionKey, found, items]
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
  const given = watcherExists(options)
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

/** `sweep`'s and `sweepAsync`'s `watcherExists`, checked: undefined when absent. */
export function watcherExists(options: unknown): ((watcherKey: string) => boolean) | undefined {
  return a.optPredicate<string>(a.opts(options, 'options', 'sweep')?.watcherExists, 'watcherExists')
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
  const json = items.map((item, n) => payloadJson(item, `items[${n}]`, Infinity) ?? 'null')
  return ['true', `[${json.join(',')}]`]
}

/** A key as the addon stores it: a lone surrogate becomes U+FFFD, as in every string it takes. */
export function stored(key: string): string {
  return key.isWellFormed() ? key : key.toWellFormed()
}
