#!/usr/bin/env node
// session-awareness: look inside a state database while debugging state-change notices,
// watch cursors or changesSince (read-only: the file is never changed), and import an
// OpenClaw state database into the store's own file (only the destination is written).
'use strict'

const fs = require('node:fs')
const { SessionState, inspectDatabase, readEvents } = require('..')
// The import is the addon's own function: it runs in this process, which opens no other
// handle on either file.
const { importStateDatabase } = require('../dist/import.js')

/** Source rows between two progress lines of `import`. */
const PROGRESS_EVERY = 10000

const USAGE = `Usage:
  session-awareness inspect <db | postgres URL> [--schema NAME] [--json]
      Sessions (stateVersion, pruned watermark), cursors (L/N/M, lag), pending notices,
      row counts and the oldest retained event.
  session-awareness events <db | postgres URL> <sessionKey> [--since N] [--agent ID] [--schema NAME] [--json]
      The session's retained events after sequence N (default 0), ascending.
  session-awareness events <db | postgres URL> <sessionKey> --follow [--since N] [--agent ID] [--schema NAME] [--json]
      Like tail -f: the retained events after N, then each new event as it lands, one line
      each (with --json one JSON object a line), until interrupted (Ctrl-C: exit status 0).
  session-awareness import <openclaw.sqlite | store.sqlite> <store.sqlite | postgres URL> [--schema NAME] [--json]
      Copies the session-state rows (events with their sequences, heads, cursors, upstream
      links) of OpenClaw's database or a store file into the store's file, creating it if
      needed, or into a PostgreSQL store (its tables created in the schema); a second run
      adds only what is new. Progress goes to stderr every ${PROGRESS_EVERY.toLocaleString('en-US')} rows.

inspect and events open the database read-only and never change it (events --follow opens
the store, which reads and writes nothing of the session; it needs an existing file); import only reads the
OpenClaw file, in one snapshot, and may run while a gateway has it open. On a PostgreSQL
store (postgres:// or postgresql:// URL) --schema names the store's schema (default
session_awareness); inspect and events need only SELECT on its tables, and no output
contains the URL's password.
Exit status: 0 success, 1 a database could not be read or written (or the two histories
diverged: ERR_IMPORT_DIVERGED, nothing written), 2 bad usage.`

/** A usage mistake: exit status 2. */
class UsageError extends Error {}

function parseArgs(argv) {
  const positional = []
  const flags = { json: false, help: false, version: false }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const [name, inline] = arg.startsWith('--') ? splitFlag(arg) : [null, null]
    const value = () => {
      if (inline !== null) return inline
      if (i + 1 >= argv.length) throw new UsageError(`${name} needs a value`)
      return argv[++i]
    }
    if (arg === '-h' || name === '--help') flags.help = true
    else if (name === '--version') flags.version = true
    else if (name === '--json') flags.json = true
    else if (name === '--follow') flags.follow = true
    else if (name === '--since') flags.since = value()
    else if (name === '--agent') flags.agent = value()
    else if (name === '--schema') flags.schema = value()
    else if (name === '--') {
      positional.push(...argv.slice(i + 1))
      break
    } else if (name !== null || (arg.startsWith('-') && arg.length > 1)) {
      throw new UsageError(`unknown option ${arg}`)
    } else positional.push(arg)
  }
  return { positional, flags }
}

function splitFlag(arg) {
  const eq = arg.indexOf('=')
  return eq === -1 ? [arg, null] : [arg.slice(0, eq), arg.slice(eq + 1)]
}

function parseSince(text) {
  if (text === undefined) return 0
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--since must be a non-negative integer, not ${JSON.stringify(text)}`)
  }
  return Number(text)
}

// ---- text formatting -------------------------------------------------------------------

/** A key as typed, or as a JSON string when it holds spaces, quotes or control characters. */
function key(k) {
  return /^[^\s"\\\p{Cc}]+$/u.test(k) ? k : JSON.stringify(k)
}

function time(ms) {
  return new Date(ms).toISOString()
}

function age(ms, now) {
  let s = Math.max(0, Math.floor((now - ms) / 1000))
  const parts = []
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60]]) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`)
      s %= size
    }
  }
  if (parts.length < 2) parts.push(`${s}s`)
  return `${parts.slice(0, 2).join(' ')} ago`
}

function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`
}

/** Left-aligned columns under a header, two spaces apart, indented by two. */
function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) =>
    `  ${cells.map((c, i) => (i === cells.length - 1 ? String(c) : String(c).padEnd(widths[i]))).join('  ')}`
  return [line(header), ...rows.map(line)].join('\n')
}

function eventLine(e) {
  const actor = e.actorId ? `${e.actorType} ${key(e.actorId)}` : e.actorType
  // Inspected rows and read events carry the API's names: `payload` (an object) or, for a
  // stored text that is not a JSON object, `payloadText`; a foreign read event names the
  // fields it differs in.
  const payload = e.payloadText ?? (e.payload === undefined ? undefined : JSON.stringify(e.payload))
  const foreign = e.foreign && `(foreign: ${e.foreign.join(', ')})`
  const extra = [e.runId && `run ${key(e.runId)}`, payload, foreign].filter(Boolean).join('  ')
  return [`#${e.sequence}`, time(e.occurredAt), e.kind, actor, JSON.stringify(e.summary), extra]
    .filter(Boolean)
    .join('  ')
}

function formatInspection(r, now, schema) {
  const out = []
  const { counts } = r
  out.push(`database   ${r.path}`)
  if (schema !== undefined) {
    out.push(`schema     ${schema}, ${r.fileBytes} bytes of tables on the server (read in one read-only snapshot)`)
  } else {
    out.push(
      `file       ${r.fileBytes} bytes, ${r.wal ? 'read through its -wal file (open elsewhere)' : 'no -wal file (read as a snapshot)'}`,
    )
  }
  if (r.missingTables.length === 4) {
    out.push(schema === undefined ? 'schema     no session-awareness tables in this file' : 'tables     none of the store\'s tables in this schema')
  } else if (r.missingTables.length > 0) {
    out.push(`schema     missing tables: ${r.missingTables.join(', ')}`)
  }
  out.push(
    `rows       ${plural(counts.events, 'event')}, ${plural(counts.heads, 'session head')}, ` +
      `${plural(counts.cursors, 'cursor')}, ${plural(counts.upstreamLinks, 'upstream link')}`,
  )
  out.push(`sequence   last given ${r.lastSequence}`)
  const oldest = r.oldestEvent
  out.push(
    oldest
      ? `oldest     #${oldest.sequence} of ${key(oldest.sessionKey)}, ${oldest.kind}, ` +
          `${time(oldest.occurredAt)} (${age(oldest.occurredAt, now)})`
      : 'oldest     no retained event',
  )

  out.push('', `Sessions (${r.sessions.length})`)
  out.push(
    r.sessions.length === 0
      ? '  none'
      : table(
          ['SESSION', 'AGENT', 'VERSION', 'PRUNED', 'EVENTS', 'EARLIEST', 'UPDATED'],
          r.sessions.map((s) => [
            key(s.sessionKey),
            s.agentId,
            s.stateVersion,
            s.prunedMaxSequence,
            s.retainedEvents,
            s.earliestRetainedSequence ?? '-',
            time(s.updatedAt),
          ]),
        ),
  )

  out.push('', `Cursors (${r.cursors.length})  L acknowledged, N notified, M latest material; lag = target events after L`)
  out.push(
    r.cursors.length === 0
      ? '  none'
      : table(
          ['WATCHER', 'TARGET', 'L', 'N', 'M', 'VERSION', 'LAG', 'PROVENANCE', 'PENDING', 'UPDATED'],
          r.cursors.map((c) => [
            key(c.watcherKey),
            key(c.targetKey),
            c.lastSeen,
            c.notified,
            c.material,
            c.targetVersion,
            c.lag,
            c.provenance,
            c.pending ? 'yes' : 'no',
            time(c.updatedAt),
          ]),
        ),
  )

  out.push('', `Pending notices (${r.pendingNotices.length})`)
  if (r.pendingNotices.length === 0) out.push('  none')
  for (const n of r.pendingNotices) {
    out.push(`  ${key(n.watcherKey)} <- ${key(n.targetKey)}  changesSince ${n.changesSince}`)
    out.push(`    ${n.text}`)
  }
  return out.join('\n')
}

function formatEvents(r, since) {
  const out = [
    `session    ${key(r.sessionKey)} (agent ${r.agentId})`,
    `version    ${r.stateVersion}, pruned watermark ${r.prunedMaxSequence}`,
  ]
  if (r.historyGap) {
    out.push(
      `history    gap: events up to #${r.prunedMaxSequence} were pruned, so --since ${since} misses some`,
    )
  }
  out.push(`events     ${plural(r.events.length, 'event')} after ${since}`)
  for (const e of r.events) out.push(`  ${eventLine(e)}`)
  return out.join('\n')
}

const IMPORT_TABLES = [
  ['events', 'session_state_events'],
  ['heads', 'session_state_heads'],
  ['cursors', 'session_watch_cursors'],
  ['upstreamLinks', 'session_upstream_links'],
]

function formatImport(r, source, dest) {
  const out = [
    `imported   ${source} -> ${dest}`,
    `source     ${r.sourceWal ? 'read through its -wal file (open elsewhere)' : 'no -wal file (read as a snapshot)'}, ` +
      `last sequence ${r.sourceLastSequence}`,
    '',
    table(
      ['TABLE', 'READ', 'INSERTED', 'UPDATED', 'PRESENT', 'SKIPPED'],
      IMPORT_TABLES.map(([field, name]) => {
        const t = r[field]
        return [name, t.read, t.inserted, t.updated, t.present, t.skipped]
      }),
    ),
  ]
  return out.join('\n')
}

/**
 * Progress lines on stderr for tables of at least PROGRESS_EVERY rows: one each time another
 * PROGRESS_EVERY rows are handled, and one at the end of the table. JSON lines with --json.
 */
function progressPrinter(json) {
  const printed = new Map()
  return (p) => {
    if (p.total < PROGRESS_EVERY) return
    const last = printed.get(p.table) ?? 0
    if (p.done < p.total && Math.floor(p.done / PROGRESS_EVERY) === Math.floor(last / PROGRESS_EVERY)) return
    if (p.done === last) return
    printed.set(p.table, p.done)
    console.error(
      json ? JSON.stringify({ progress: p }) : `import     ${p.table} ${p.done}/${p.total}`,
    )
  }
}

/** A PostgreSQL store's URL, as the store reads it. */
function isUrl(db) {
  return /^postgres(?:ql)?:\/\//i.test(db)
}

/** A URL without its password (userinfo or `password=`), for the import's summary line. */
function redacted(url) {
  return url.replace(/^([a-z]+:\/\/[^:/?@]*):[^@/?]*@/i, '$1:***@').replace(/(password=)[^&]*/gi, '$1***')
}

/** The schema to read: --schema or the default on a URL; --schema with a file is a usage error. */
function schemaOf(db, flags) {
  if (!isUrl(db)) {
    if (flags.schema !== undefined) throw new UsageError('--schema belongs to a postgres:// URL')
    return undefined
  }
  return flags.schema ?? 'session_awareness'
}

// ---- main ------------------------------------------------------------------------------

function run(argv) {
  const { positional, flags } = parseArgs(argv)
  if (flags.version) return console.log(require('../package.json').version)
  const [command, ...rest] = positional
  if (flags.help || command === 'help' || command === undefined) {
    if (command === undefined && !flags.help) throw new UsageError('a command is required')
    return console.log(USAGE)
  }
  const print = (value, text) => console.log(flags.json ? JSON.stringify(value, null, 2) : text())
  if (command === 'inspect') {
    if (rest.length !== 1) throw new UsageError('inspect takes exactly one <db>')
    if (flags.since !== undefined || flags.agent !== undefined || flags.follow) {
      throw new UsageError('--since, --agent and --follow belong to the events command')
    }
    const schema = schemaOf(rest[0], flags)
    const report = inspectDatabase(rest[0], { schema })
    return print(report, () => formatInspection(report, Date.now(), schema))
  }
  if (command === 'events') {
    if (rest.length !== 2) throw new UsageError('events takes <db> <sessionKey>')
    const since = parseSince(flags.since)
    if (flags.follow) return followEvents(rest[0], rest[1], since, flags)
    const result = readEvents(rest[0], rest[1], { since, agentId: flags.agent, schema: schemaOf(rest[0], flags) })
    return print(result, () => formatEvents(result, since))
  }
  if (command === 'import') {
    if (rest.length !== 2) throw new UsageError('import takes <openclaw.sqlite> <store.sqlite | postgres URL>')
    if (flags.since !== undefined || flags.agent !== undefined || flags.follow) {
      throw new UsageError('--since, --agent and --follow belong to the events command')
    }
    const schema = schemaOf(rest[1], flags)
    const summary = importStateDatabase(rest[0], rest[1], { onProgress: progressPrinter(flags.json), schema })
    return print(summary, () => formatImport(summary, rest[0], isUrl(rest[1]) ? redacted(rest[1]) : rest[1]))
  }
  throw new UsageError(`unknown command ${JSON.stringify(command)}`)
}

/**
 * `events --follow`: opens the store, follows the session from `since` and prints each event
 * as it lands, until SIGINT or SIGTERM (exit status 0). Resolves when the follower ended.
 */
async function followEvents(db, sessionKey, since, flags) {
  const schema = schemaOf(db, flags)
  if (!isUrl(db) && !fs.existsSync(db)) {
    throw Object.assign(new Error(`no database at ${db}`), { code: 'ERR_DB' })
  }
  const state = isUrl(db) ? await SessionState.open(db, { schema }) : new SessionState(db)
  const stop = new AbortController()
  const onSignal = () => stop.abort()
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  try {
    for await (const batch of state.follow(sessionKey, { after: since, agentId: flags.agent, signal: stop.signal })) {
      const lines = []
      if (batch.historyGap) {
        lines.push(
          flags.json
            ? JSON.stringify({ historyGap: true, nextSequence: batch.events[0].sequence })
            : `history    gap: events before #${batch.events[0].sequence} were pruned before they were read`,
        )
      }
      for (const e of batch.events) lines.push(flags.json ? JSON.stringify(e) : eventLine(e))
      process.stdout.write(`${lines.join('\n')}\n`)
    }
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    await state.closeAsync()
  }
}

function main() {
  const argv = process.argv.slice(2)
  const json = argv.includes('--json')
  try {
    const done = run(argv)
    if (done instanceof Promise) done.catch((err) => fail(err, json))
  } catch (err) {
    fail(err, json)
  }
}

/** Reports an error on stderr and sets the exit status: 2 for bad usage, 1 otherwise. */
function fail(err, json) {
  const usage = err instanceof UsageError || err.code === 'ERR_INVALID_ARG'
  const code = err instanceof UsageError ? 'ERR_USAGE' : err.code || 'ERR_UNEXPECTED'
  if (json) {
    console.error(JSON.stringify({ error: { code, message: err.message } }))
  } else {
    console.error(`session-awareness: ${err.message} (${code})`)
    if (err instanceof UsageError) console.error(`\n${USAGE}`)
  }
  process.exitCode = usage ? 2 : 1
}

main()
