/**
 * The one error class of the package, and the mapping of native failures onto it.
 * @packageDocumentation
 */

/**
 * Every stable code a {@link SessionStateError} can carry. Match on these, never on the
 * message text, which is for people and may change.
 */
export type ErrorCode =
  /** An argument broke a documented rule: a wrong type, a bad key, an unknown kind, an oversized payload, a bad option. */
  | 'ERR_INVALID_ARG'
  /** The store was closed; nothing was done. */
  | 'ERR_CLOSED'
  /**
   * A synchronous method that needs the database was called on a PostgreSQL store, which
   * serves it only through the Promise API (its `…Async` twin, or `SessionState.open` for the
   * constructor); nothing was done.
   */
  | 'ERR_ASYNC_ONLY'
  /**
   * The database failed: SQLite or the file system (busy beyond the busy timeout, a read-only
   * or full disk, a corrupt file), or PostgreSQL (the server unreachable or lost, a statement
   * timeout, a refused statement).
   */
  | 'ERR_DB'
  /**
   * PostgreSQL: a record's group was sent with its `COMMIT` and the connection was lost before
   * the answer, and the server did not come back within `reconnectWindowMs` to say whether it
   * committed. The event may be stored or not: a retry without a `dedupeKey` may store it
   * twice. Best-effort as ever: the record resolves `null` and reports this code.
   */
  | 'ERR_OUTCOME_UNKNOWN'
  /**
   * Another SQLite library (or other code) of this process has the database file, its `-wal`,
   * `-shm` or `-journal` open: the two would break each other's locks and lose events. Give the
   * store its own file, or open the shared one from another process. Nothing was done.
   */
  | 'ERR_FILE_SHARED'
  /** A table of the store's name in the file has a shape no known generation wrote; the file was left as it was. */
  | 'ERR_FOREIGN_SCHEMA'
  /** A file given to the constructor, `SessionState.open`, `inspectDatabase`, `readEvents` or the import is not a SQLite database; it was left as it was. */
  | 'ERR_NOT_SQLITE'
  /** The import's destination holds a history that disagrees with the source's; nothing was written. */
  | 'ERR_IMPORT_DIVERGED'
  /**
   * `SessionState.open` on a PostgreSQL URL that goes through a pooler in transaction or
   * statement mode (PgBouncer's `pool_mode = transaction`, Supabase's port 6543, Neon's
   * `-pooler` host), which keeps neither LISTEN nor prepared statements: use session mode or
   * a direct connection. The message names the mode. Nothing was written.
   */
  | 'ERR_POOLER_MODE'
  /** The import's `onProgress` callback threw; reported once the import has finished. */
  | 'ERR_PROGRESS_CALLBACK'
  /** A line of an upstream transcript could not be classified; the scan goes on. */
  | 'ERR_UPSTREAM_PARSE'
  /** The `wake` callback threw; reported through `onError`, never fatal. */
  | 'ERR_WAKE_CALLBACK'
  /** The `onNotice` listener threw; reported through `onError`, never thrown into the caller. */
  | 'ERR_NOTICE_CALLBACK'
  /** A host service given to the OpenClaw adapter threw; the call returned OpenClaw's default. */
  | 'ERR_HOST_CALLBACK'
  /** The command line was misused (an unknown command or option, a missing argument): the CLI's `--json` report, exit code 2. */
  | 'ERR_USAGE'
  /** The CLI failed in a way no other code describes (a fault of the CLI): its `--json` report. */
  | 'ERR_UNEXPECTED'

/**
 * The codes the TypeScript layer gives itself (`ERR_ASYNC_ONLY`: `SessionState` refuses a
 * synchronous call on a PostgreSQL store before it reaches the addon; `ERR_USAGE` and
 * `ERR_UNEXPECTED`: the CLI's `--json` reports): every other code of {@link ErrorCode} comes
 * from the addon (its `nativeErrorCodes()`: the core's, then the binding's). A test checks
 * that the two lists together are exactly the union.
 * @internal
 */
export const LAYER_CODES = ['ERR_NOTICE_CALLBACK', 'ERR_HOST_CALLBACK', 'ERR_ASYNC_ONLY', 'ERR_USAGE', 'ERR_UNEXPECTED'] as const satisfies readonly ErrorCode[]

/**
 * Every code of {@link ErrorCode}, once each.
 * @internal
 */
export const ERROR_CODES = [
  'ERR_INVALID_ARG',
  'ERR_CLOSED',
  'ERR_ASYNC_ONLY',
  'ERR_DB',
  'ERR_OUTCOME_UNKNOWN',
  'ERR_FILE_SHARED',
  'ERR_FOREIGN_SCHEMA',
  'ERR_NOT_SQLITE',
  'ERR_IMPORT_DIVERGED',
  'ERR_POOLER_MODE',
  'ERR_PROGRESS_CALLBACK',
  'ERR_UPSTREAM_PARSE',
  'ERR_WAKE_CALLBACK',
  'ERR_NOTICE_CALLBACK',
  'ERR_HOST_CALLBACK',
  'ERR_USAGE',
  'ERR_UNEXPECTED',
] as const satisfies readonly ErrorCode[]

// Every member of the union is listed: a code added to the union and not here fails to compile.
type Unlisted = Exclude<ErrorCode, (typeof ERROR_CODES)[number]>
const everyCodeListed: [Unlisted] extends [never] ? true : Unlisted = true

/** The codes of {@link ErrorCode}, for checking a native code at run time. */
const CODES: ReadonlySet<string> = everyCodeListed && new Set<string>(ERROR_CODES)

/**
 * The background tasks of a store, as {@link SessionStateError.during} names them
 * (`task:<name>`): work no call waited for.
 */
export type BackgroundTask =
  /** The automatic prune. */
  | 'prune'
  /** The background WAL checkpoint of a SQLite store. */
  | 'checkpoint'
  /** The poll for notices of other processes on the same SQLite file. */
  | 'poll'
  /** The upstream monitor's scans. */
  | 'upstream-monitor'
  /** A PostgreSQL store's listener and its catch-up (a lost connection, a failed reconnect). */
  | 'catch-up'
  /** The store restored its locks after another library's handle on its file closed (`ERR_FILE_SHARED`). */
  | 'file-guard'
  /** The `wake` callback threw (`ERR_WAKE_CALLBACK`). */
  | 'wake'
  /** The `onNotice` listener threw (`ERR_NOTICE_CALLBACK`). */
  | 'onNotice'

/** The error thrown by every call of the package and passed to every `onError`. */
export class SessionStateError extends Error {
  /** The stable machine code. */
  readonly code: ErrorCode
  /**
   * Which call or background task failed: the name of the method the host called
   * (`'record'`, `'recordAsync'`, `'changesSince'`, `'new SessionState'`, `'SessionState.open'`,
   * …), or `task:<name>` ({@link BackgroundTask}) for work no call waited for, such as
   * `'task:catch-up'` when a PostgreSQL store's listener loses its connection. Undefined only
   * for the functions outside a store (`inspectDatabase`, `readEvents`, the import).
   */
  readonly during: string | undefined

  /**
   * @param code - the stable machine code
   * @param message - a description for people
   * @param during - the call or background task that failed
   */
  constructor(code: ErrorCode, message: string, during?: string) {
    super(message)
    this.code = code
    this.during = during
  }

  /** The class name, also in stack traces. */
  override get name(): string {
    return 'SessionStateError'
  }
}

/** True when `code` is one of {@link ErrorCode}. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && CODES.has(code)
}

/**
 * Builds a {@link SessionStateError} from a code and message given by the addon. A code
 * outside {@link ErrorCode} can only be one of napi's own statuses for an argument it could
 * not convert, which is an argument error to the caller. `during`: the call or task that failed.
 */
export function fromCode(code: string, message: string, during?: string): SessionStateError {
  return new SessionStateError(isErrorCode(code) ? code : 'ERR_INVALID_ARG', message, during)
}

/**
 * `e` as a {@link SessionStateError} of `during` (the call or task that failed): the same
 * object when it already names one.
 */
export function failedIn(e: unknown, during: string): SessionStateError {
  const err = fromNative(e)
  if (err.during === undefined) (err as { during: string | undefined }).during = during
  return err
}

/** Turns whatever a native call threw into a {@link SessionStateError}. */
export function fromNative(e: unknown): SessionStateError {
  if (e instanceof SessionStateError) return e
  // Not `instanceof Error`: the addon's errors come from the realm it was loaded in.
  if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string') {
    const { code, message } = e as { code?: unknown; message: string }
    return fromCode(String(code), message)
  }
  return new SessionStateError('ERR_INVALID_ARG', String(e))
}

/** An `ERR_INVALID_ARG` error with the core's message prefix. */
export function invalid(message: string): SessionStateError {
  return new SessionStateError('ERR_INVALID_ARG', `invalid argument: ${message}`)
}

/**
 * The refusal of a synchronous call on a PostgreSQL store (`ERR_ASYNC_ONLY`), naming what to
 * call instead (null: the call has no Promise twin yet). Nothing was done.
 */
export function asyncOnly(method: string, instead: string | null): SessionStateError {
  const what = instead === null ? 'it has no Promise twin yet' : `use ${instead}`
  return new SessionStateError(
    'ERR_ASYNC_ONLY',
    `${method} needs the database and a PostgreSQL store serves it only through the Promise API: ${what}`,
    method,
  )
}
