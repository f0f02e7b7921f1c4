/**
 * The host services the OpenClaw adapter calls (OpenClaw imports them from its own modules),
 * their defaults for a process without OpenClaw, and the one store the adapter works on.
 * @packageDocumentation
 */
import { existsSync, realpathSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { SessionStateError } from '../errors'
import { SessionState } from '../session-state'
import type { SessionStateOptions } from '../session-state'
import type { Notice } from '../types'
import * as keys from './keys'

/** Options of {@link HostServices.enqueueSystemEvent}, as OpenClaw's system-event queue takes them. */
export interface SystemEventOptions {
  /** The watcher: the session whose queue receives the text. */
  sessionKey: string
  /** The watcher's session store the notice belongs to; null when its cursor has none. */
  sessionStorePath: string | null
  /** `session-state:` + the hex of the target key's UTF-8 bytes. */
  contextKey: string
  /** Set for an ambient-group cursor: the notice replaces the queued one of its context key. */
  replace?: true
}

/** A wake request, as OpenClaw's heartbeat takes it. */
export interface SessionEventWake {
  /** Always `session-state`. */
  source: 'session-state'
  /** Always `immediate`. */
  intent: 'immediate'
  /** `session-state:<target key>`. */
  reason: string
  /** The watcher to wake. */
  sessionKey: string
  /** The watcher's session store, or null. */
  sessionStorePath: string | null
  /** How long the heartbeat coalesces wakes of one watcher: 20,000 ms. */
  coalesceMs: number
}

/** Where a session's store lives: the session, optionally its agent, and the environment. */
export interface SessionStoreScope {
  /** The session. */
  sessionKey: string
  /** Its agent; default: the key's own. */
  agentId?: string
  /** The environment to read `OPENCLAW_STATE_DIR` from; default `process.env`. */
  env?: NodeJS.ProcessEnv
}

/**
 * The services OpenClaw's module imports from the rest of the gateway. Each one is optional;
 * the defaults work without OpenClaw (see {@link configureSessionState}).
 */
export interface HostServices {
  /** Queues a notice's text for the watcher's next turn. Default: none (the store's own queue keeps it). */
  enqueueSystemEvent?: (text: string, options: SystemEventOptions) => unknown
  /** Wakes a watcher. Default: none. */
  requestSessionEventWake?: (request: SessionEventWake) => unknown
  /** The physical path of a session's store. Default: `<stateDir>/agents/<agent>/agent/openclaw-agent.sqlite`. */
  resolvePhysicalSessionStorePath?: (scope: SessionStoreScope) => string
  /** The store paths of the named watchers. Default: {@link HostServices.resolvePhysicalSessionStorePath} of each agent-qualified key. */
  captureSessionWatcherStorePaths?: (keys: string[] | undefined, env?: NodeJS.ProcessEnv) => Record<string, string>
  /** True when `storePath` is the watcher's current store. Default: any non-null path is. */
  isSystemEventStoreCurrent?: (sessionKey: string, storePath: string | null) => boolean
  /** The watcher's session entry, for the sweep. Default: every watcher exists. */
  loadSessionEntryReadOnly?: (scope: { sessionKey: string; clone?: boolean; env?: NodeJS.ProcessEnv }) => unknown
  /** The kind of a session. Default: {@link keys.classifySessionKind}. */
  classifySessionKind?: (sessionKey: string, entry?: keys.SessionKindEntry | null) => string
  /** An agent's main key. Default: {@link keys.buildAgentMainSessionKey}. */
  buildAgentMainSessionKey?: (params: { agentId: string; mainKey?: string | null }) => string
  /** A key's agent. Default: {@link keys.resolveAgentIdFromSessionKey}. */
  resolveAgentIdFromSessionKey?: (sessionKey: string) => string
  /** True for a nested session, which is never woken. Default: {@link keys.isSubagentSessionKey}. */
  isSubagentSessionKey?: (sessionKey: string) => boolean
  /** Splits an agent-qualified key; null for any other. Default: {@link keys.parseAgentSessionKey}. */
  parseAgentSessionKey?: (sessionKey: string) => keys.ParsedAgentSessionKey | null
}

/** The argument of {@link configureSessionState}: one of `store` or `path`, and the host. */
export interface ConfigureSessionStateOptions {
  /**
   * A store opened by the caller with `...openClawStoreOptions()` among its options (without
   * them the adapter sees no notices and `options.now` does not reach it).
   */
  store?: SessionState | null
  /** The store's file; default `<OPENCLAW_STATE_DIR or ~/.openclaw>/state/session-state.sqlite`. */
  path?: string | null
  /** Options for the store the adapter opens at `path` (its clock and notice listener are the adapter's). */
  storeOptions?: Omit<SessionStateOptions, 'clock' | 'onNotice' | 'notifyKinds' | 'wake' | 'onError'> | null
  /** The host services; each one missing takes its default. */
  host?: HostServices | null
  /**
   * Receives every failure the adapter swallows, as OpenClaw's module logs and returns a
   * default: the store's best-effort reports (for a store the adapter opens) and the calls it
   * refused. Default: one line on stderr.
   */
  onError?: ((err: SessionStateError) => void) | null
}

/** Every host service, defaults filled in. */
export type ResolvedHost = Required<HostServices>

/** The state directory: `OPENCLAW_STATE_DIR`, else `~/.openclaw`. */
export function resolveStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env.OPENCLAW_STATE_DIR?.trim()
  if (!dir) return join(homedir(), '.openclaw')
  return dir === '~' || dir.startsWith('~/') ? join(homedir(), dir.slice(1)) : dir
}

/** The store's default file: `<state dir>/state/session-state.sqlite` (never OpenClaw's own database). */
export function defaultStatePath(env: NodeJS.ProcessEnv = process.env): string {
  return join(resolveStateDir(env), 'state', 'session-state.sqlite')
}

/** `path` with its longest existing ancestor's symbolic links resolved, as OpenClaw compares store paths. */
function viaExistingAncestor(path: string): string {
  let dir = path
  const tail: string[] = []
  while (!existsSync(dir)) {
    const parent = dirname(dir)
    if (parent === dir) return path
    tail.unshift(basename(dir))
    dir = parent
  }
  try {
    return join(realpathSync(dir), ...tail)
  } catch {
    return path
  }
}

function defaultStorePath(scope: SessionStoreScope): string {
  const agentId = scope.agentId ?? keys.resolveAgentIdFromSessionKey(scope.sessionKey)
  const file = join(resolveStateDir(scope.env), 'agents', keys.normalizeAgentId(agentId), 'agent', 'openclaw-agent.sqlite')
  return viaExistingAncestor(file)
}

/** Fills the missing services with the defaults. */
export function resolveHost(host: HostServices | null | undefined): ResolvedHost {
  const h = host ?? {}
  const resolvePhysicalSessionStorePath = h.resolvePhysicalSessionStorePath ?? defaultStorePath
  const parseAgentSessionKey = h.parseAgentSessionKey ?? keys.parseAgentSessionKey
  return {
    enqueueSystemEvent: h.enqueueSystemEvent ?? (() => false),
    requestSessionEventWake: h.requestSessionEventWake ?? (() => undefined),
    resolvePhysicalSessionStorePath,
    captureSessionWatcherStorePaths:
      h.captureSessionWatcherStorePaths ??
      ((list = [], env) =>
        Object.fromEntries(
          list
            .filter((key) => parseAgentSessionKey(key) != null)
            .map((sessionKey) => [sessionKey, resolvePhysicalSessionStorePath({ sessionKey, env })]),
        )),
    isSystemEventStoreCurrent: h.isSystemEventStoreCurrent ?? ((_key, storePath) => storePath !== null),
    loadSessionEntryReadOnly: h.loadSessionEntryReadOnly ?? (() => ({})),
    classifySessionKind: h.classifySessionKind ?? keys.classifySessionKind,
    buildAgentMainSessionKey: h.buildAgentMainSessionKey ?? keys.buildAgentMainSessionKey,
    resolveAgentIdFromSessionKey: h.resolveAgentIdFromSessionKey ?? ((k) => keys.resolveAgentIdFromSessionKey(k)),
    isSubagentSessionKey: h.isSubagentSessionKey ?? keys.isSubagentSessionKey,
    parseAgentSessionKey,
  }
}

/** A notice as the store hands it to its listener. */
export type ListenedNotice = Notice & { wake?: boolean; queueOnly?: boolean; scope?: string }

/** The adapter's state: the store, the host, the clock of the call in progress, the prune hour. */
export interface Adapter {
  /** The store. */
  store: SessionState
  /** The host services. */
  host: ResolvedHost
  /** True when the adapter opened the store and closes it on reconfiguration. */
  owned: boolean
  /** When the adapter last pruned, on the store's clock (OpenClaw prunes hourly behind a record). */
  lastPruneAt: number
}

let current: Adapter | undefined
let callNow: number | undefined

/** The wake coalescing OpenClaw asks its heartbeat for. */
const WAKE_COALESCE_MS = 20_000

/** The clock the adapter gives its store: the time of the call in progress, else the system clock. */
export function adapterClock(): number {
  return callNow ?? Date.now()
}

/** Runs `fn` with the store's clock reading `now`. */
export function atTime<T>(now: number, fn: () => T): T {
  const saved = callNow
  callNow = now
  try {
    return fn()
  } finally {
    callNow = saved
  }
}

/** Reports a failure through the store's `onError` (a host service that threw, a refused call). */
export function report(e: unknown): void {
  const err =
    e instanceof SessionStateError ? e : new SessionStateError('ERR_HOST_CALLBACK', e instanceof Error ? e.message : String(e))
  const sink = reportSink
  if (sink) {
    try {
      sink(err)
      return
    } catch {
      // A throwing onError must not make the adapter throw.
    }
  }
  process.stderr.write(`session-awareness: ${err.code}: ${err.message}\n`)
}

let reportSink: ((err: SessionStateError) => void) | undefined

/** Hands each notice entering the store's queue to the host, as OpenClaw's module enqueues it. */
function forward(notice: ListenedNotice): void {
  const a = current
  if (!a) return
  const storePath = notice.scope ?? null
  const queueOnly = notice.queueOnly === true
  try {
    a.host.enqueueSystemEvent(notice.text, {
      sessionKey: notice.watcherKey,
      sessionStorePath: storePath,
      contextKey: notice.contextKey,
      ...(queueOnly ? { replace: true as const } : {}),
    })
    if (queueOnly || a.host.isSubagentSessionKey(notice.watcherKey)) return
    a.host.requestSessionEventWake({
      source: 'session-state',
      intent: 'immediate',
      reason: `session-state:${notice.targetKey}`,
      sessionKey: notice.watcherKey,
      sessionStorePath: storePath,
      coalesceMs: WAKE_COALESCE_MS,
    })
  } catch (e) {
    report(e)
  }
}

/**
 * The options a store needs for the adapter: its clock (so `options.now` reaches it) and its
 * notice listener (which forwards notices to the host). Spread them into the options of a
 * store given to {@link configureSessionState} as `store`.
 */
export function openClawStoreOptions(): Pick<SessionStateOptions, 'clock'> & { onNotice: (n: ListenedNotice) => void } {
  return { clock: adapterClock, onNotice: forward }
}

/**
 * Points the adapter at a store and a host. With `path` (or neither), the adapter opens the
 * store itself; a store it opened earlier is closed. Throws what the store's constructor
 * throws (`ERR_INVALID_ARG`, `ERR_DB`, `ERR_FILE_SHARED`): configuration is not best-effort.
 */
export function configureSessionState(options: ConfigureSessionStateOptions = {}): SessionState {
  const host = resolveHost(options.host)
  const onError = options.onError ?? undefined
  let store = options.store ?? undefined
  const owned = store === undefined
  if (store === undefined) {
    store = new SessionState(options.path ?? defaultStatePath(), {
      ...(options.storeOptions ?? {}),
      ...openClawStoreOptions(),
      onError,
    } as SessionStateOptions)
  }
  closeSessionState()
  reportSink = onError ?? undefined
  current = { store, host, owned, lastPruneAt: 0 }
  return store
}

/** The adapter's store, opened at the default path with the default host on first use. */
export function adapter(): Adapter {
  if (!current) configureSessionState()
  return current as Adapter
}

/** The store the adapter works on (opening it with the defaults if nothing was configured). */
export function getSessionStateStore(): SessionState {
  return adapter().store
}

/** Closes the store the adapter opened (a store given as `store` is left open) and forgets the configuration. */
export function closeSessionState(): void {
  const a = current
  current = undefined
  reportSink = undefined
  if (a?.owned) a.store.close()
}
