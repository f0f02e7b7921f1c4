/**
 * The member names each call takes (semantics.md#api-arguments): one list per options object
 * and input object, so a misspelt name (`wakeCoalescMs`, `onlyIfWached`) is refused with
 * `ERR_INVALID_ARG` naming it instead of being ignored. A new option is added here and read
 * where its call reads the others.
 * @packageDocumentation
 */

/** The known member names, by the object that carries them. */
export const KNOWN_NAMES = {
  /** `new SessionState(path, options)` and `SessionState.open`. */
  store: [
    'retentionMs',
    'maxEvents',
    'busyTimeoutMs',
    'wake',
    'wakeCoalesceMs',
    'onError',
    'clock',
    'strict',
    'syncIntervalMs',
    'readCacheBytes',
    'serveWatchers',
    'notifyKinds',
    'seedResetsProvenance',
    'onNotice',
    'meterProvider',
    'schema',
    'connectTimeoutMs',
    'statementTimeoutMs',
    'reconnectWindowMs',
    'maxWaitingCalls',
    'hostName',
  ],
  /** `record(input)` and `recordAsync(input)`. */
  record: [
    'sessionKey',
    'agentId',
    'sessionId',
    'kind',
    'actorType',
    'actorId',
    'runId',
    'summary',
    'payload',
    'occurredAt',
    'dedupeKey',
    'watchers',
    'onlyIfWatched',
    'watcherScopes',
  ],
  /** `watch(watcher, target, options)`. */
  watch: ['provenance', 'scope', 'refresh'],
  /** `acknowledge(watcher, targets, options)`. */
  acknowledge: ['scope', 'through'],
  /** `changesSince(key, after, options)`. */
  changesSince: ['agentId', 'limit'],
  /** `follow(key, options)`. */
  follow: ['after', 'agentId', 'limit', 'signal'],
  /** `stateVersion(key, options)` and `deleteSession(key, options)`. */
  agent: ['agentId'],
  /** `sweep(options)`. */
  sweep: ['watcherExists'],
  /** `cursorRows(filter)`. */
  cursorRows: ['watcherKey', 'targetKey'],
  /** `startUpstreamMonitor(options)`. */
  upstreamMonitor: ['intervalMs'],
  /** `adopt(key, link)`. */
  link: ['source', 'transcriptPath', 'remoteId', 'agentId', 'hostId'],
  /** Each ref of `stateVersions(refs)`. */
  ref: ['sessionKey', 'agentId'],
  /** `readEvents(path, key, options)`. */
  readEvents: ['since', 'agentId', 'schema'],
  /** `inspectDatabase(path, options)`. */
  inspectDatabase: ['schema'],
} as const satisfies Record<string, readonly string[]>

/** The name of one list of {@link KNOWN_NAMES}. */
export type NamesOf = keyof typeof KNOWN_NAMES

const SETS = new Map<NamesOf, ReadonlySet<string>>(
  (Object.keys(KNOWN_NAMES) as NamesOf[]).map((k) => [k, new Set<string>(KNOWN_NAMES[k])]),
)

/** The first own enumerable member of `o` that list `names` does not know, if any. */
export function unknownName(o: object, names: NamesOf): string | undefined {
  const known = SETS.get(names) as ReadonlySet<string>
  for (const k in o) {
    if (Object.prototype.hasOwnProperty.call(o, k) && !known.has(k)) return k
  }
  return undefined
}
