// The workloads of bench/workloads.js, done through OpenClaw's published implementation. Each
// carries the name of the addon workload it is compared with, and does the same work: the same
// inputs, keys and row counts, checked in setup or in every round (sequences, versions, rows
// written, notices queued), so a timing never compares different work.
//
// Each workload's database is a file of its own, passed to OpenClaw as `{ path }`; the agents'
// session stores live in the process's state directory. Fixtures OpenClaw would take minutes to
// write one public call at a time (60,000 events, 100,000 cursors) are written by OpenClaw's own
// kernel function `recordSessionStateEventInDatabase`, many events per transaction: the same
// rows, written faster; only what a round times goes through the public API.

import { copyFileSync, existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { agentOf, ensureSession } from './api.mjs'

const hr = () => process.hrtime.bigint()
const MAIN = 'agent:main:main'
const INPUT_NOTIFY = {
  kind: 'human_direct_message',
  actorType: 'human',
  actorId: 'telegram:42',
  summary: 'human message via telegram',
  payload: { channel: 'telegram' },
}
const INPUT_LOG = {
  kind: 'run_completed',
  actorType: 'agent',
  runId: 'run-1',
  summary: 'run completed',
  payload: { durationMs: 1200 },
}

function batch(ops, fn) {
  const start = hr()
  for (let i = 0; i < ops; i++) fn(i)
  return Number(hr() - start) / ops
}

function check(cond, message) {
  if (!cond) throw new Error(`openclaw: ${message}`)
}

/** OpenClaw's record through its public function; it returns undefined where it failed. */
function mustRecord(ctx, input, options) {
  const e = ctx.oc.state.recordSessionStateEvent({ agentId: agentOf(input.sessionKey), ...input }, options)
  check(e !== undefined, `recordSessionStateEvent failed for ${input.sessionKey}`)
  return e
}

function copyDb(from, to) {
  for (const suffix of ['-wal', '-shm', '']) rmSync(to + suffix, { force: true })
  copyFileSync(from, to)
  if (existsSync(from + '-wal')) copyFileSync(from + '-wal', to + '-wal')
}

/** Closes every database handle OpenClaw caches (each checkpoints its file), so files can be
 * copied and replaced. */
const closeAll = (ctx) => ctx.oc.db.closeOpenClawStateDatabase()

/** Writes `inputs` with OpenClaw's kernel, `perTransaction` events per write transaction. */
function writeEvents(ctx, file, inputs, perTransaction) {
  const { oc } = ctx
  for (let i = 0; i < inputs.length; i += perTransaction) {
    oc.db.runOpenClawStateWriteTransaction(({ db }) => {
      for (const input of inputs.slice(i, i + perTransaction)) {
        oc.kernel.recordSessionStateEventInDatabase(db, input, Date.now())
      }
    }, { path: file })
  }
}

function rowCount(ctx, file, sql) {
  return ctx.oc.db.openOpenClawStateDatabase({ path: file }).db.prepare(sql).get().n
}

// --- the workloads ----------------------------------------------------------------------------

function recordWorkload(name, watcherCount, input, ops) {
  return {
    name,
    ops,
    setup(ctx) {
      const slug = name.replace(/\W+/g, '-')
      ctx.options = { path: join(ctx.dir, `${slug}.sqlite`) }
      const target = `agent:main:subagent:${slug}`
      for (let i = 0; i < watcherCount; i++) {
        const watcherSessionKey = `agent:w${i}:main`
        ensureSession(ctx.oc, watcherSessionKey)
        check(ctx.oc.state.registerSessionStateWatch({ watcherSessionKey, targetSessionKey: target }, ctx.options), 'watch refused')
      }
      ctx.input = { ...input, sessionKey: target, agentId: 'main' }
      // Warm-up (the process's first record also runs OpenClaw's hourly prune).
      const first = mustRecord(ctx, ctx.input, ctx.options).sequence
      for (let i = 1; i < 20; i++) check(mustRecord(ctx, ctx.input, ctx.options).sequence === first + i, 'sequences not consecutive')
      if (watcherCount > 0) {
        // The notice went out: one queued entry (repeats of the same text are deduplicated),
        // from the watcher's first unseen sequence, 0.
        const queued = ctx.oc.events.peekSystemEventEntries('agent:w0:main')
        check(queued.length === 1 && queued[0].text.endsWith(`"${target}" changesSince 0.`), `queued ${JSON.stringify(queued)}`)
      }
    },
    round(ctx) {
      const { oc, input, options } = ctx
      return batch(ops, () => check(oc.state.recordSessionStateEvent(input, options) !== undefined, 'record failed'))
    },
  }
}

function sweepWorkload(name, targets, rounds) {
  const cursors = targets * 100
  return {
    name,
    ops: 1,
    oneShot: true,
    rounds,
    setup(ctx) {
      const { oc } = ctx
      const watchers = Array.from({ length: 100 }, (_, i) => `agent:w${i}:main`)
      for (const w of watchers) ensureSession(oc, w)
      const watcherStorePaths = oc.sessions.captureSessionWatcherStorePaths(watchers)
      ctx.watchers = watchers
      ctx.template = join(ctx.dir, `cursors-${cursors}.sqlite`)
      const inputs = Array.from({ length: targets }, (_, t) => ({
        ...INPUT_NOTIFY,
        sessionKey: `agent:main:subagent:t${t}`,
        agentId: 'main',
        watcherSessionKeys: watchers,
        watcherStorePaths,
      }))
      writeEvents(ctx, ctx.template, inputs, 50)
      const pending = rowCount(ctx, ctx.template, 'SELECT count(*) AS n FROM session_watch_cursors WHERE material_sequence > last_seen_sequence AND watcher_store_path IS NOT NULL')
      check(pending === cursors, `${pending} pending cursors`)
      closeAll(ctx)
      ctx.file = join(ctx.dir, 'sweep.sqlite')
    },
    // A restart: the in-memory queue is empty, the file holds the pending cursors. The database
    // is opened before the clock starts, as the addon's round opens its store first.
    round(ctx) {
      const { oc, file } = ctx
      closeAll(ctx)
      for (const w of ctx.watchers) oc.events.drainSystemEventEntries(w)
      copyDb(ctx.template, file)
      oc.db.openOpenClawStateDatabase({ path: file })
      const now = Date.now() + 1
      const start = hr()
      oc.state.sweepSessionStateWatchNotices({ path: file, now })
      const ns = Number(hr() - start)
      // Every pending cursor was re-notified (written with the sweep's time), and each watcher's
      // queue holds OpenClaw's cap of 20 notices.
      const swept = rowCount(ctx, file, `SELECT count(*) AS n FROM session_watch_cursors WHERE updated_at = ${now}`)
      const queued = oc.events.peekSystemEventEntries('agent:w7:main').length
      check(swept === cursors && queued === Math.min(20, targets), `sweep: ${swept} cursors, ${queued} queued`)
      return ns
    },
  }
}

const PRUNE_SESSIONS = Array.from({ length: 600 }, (_, i) => `agent:main:subagent:p${i}`)

export const WORKLOADS = [
  recordWorkload('record notify, 1 watcher', 1, INPUT_NOTIFY, 100),
  recordWorkload('record log-only', 0, INPUT_LOG, 100),
  {
    name: 'changesSince of 200 events',
    ops: 20,
    setup(ctx) {
      ctx.options = { path: join(ctx.dir, 'changes.sqlite') }
      ctx.key = 'agent:main:subagent:changes'
      for (let i = 0; i < 200; i++) mustRecord(ctx, { ...INPUT_LOG, sessionKey: ctx.key }, ctx.options)
      const got = ctx.oc.state.listSessionStateEventsSince(ctx.key, 'main', 0, 200, ctx.options)
      check(got.events.length === 200 && !got.truncated && got.events[199].sequence === 200, 'changesSince: not the 200 events')
    },
    round(ctx) {
      const { oc, key, options } = ctx
      return batch(20, () => oc.state.listSessionStateEventsSince(key, 'main', 0, 200, options))
    },
  },
  {
    name: 'stateVersions of 500 keys',
    ops: 20,
    setup(ctx) {
      ctx.options = { path: join(ctx.dir, 'versions.sqlite') }
      ctx.refs = []
      for (let i = 0; i < 500; i++) {
        const sessionKey = `agent:main:subagent:v${i}`
        mustRecord(ctx, { ...INPUT_LOG, sessionKey }, ctx.options)
        ctx.refs.push({ sessionKey })
      }
      const got = ctx.oc.state.getSessionStateVersions(ctx.refs, ctx.options).main ?? {}
      check(Object.keys(got).length === 500 && got['agent:main:subagent:v499'] === 500, 'stateVersions: not the 500 versions')
    },
    round(ctx) {
      const { oc, refs, options } = ctx
      return batch(20, () => oc.state.getSessionStateVersions(refs, options))
    },
  },
  {
    // OpenClaw's reply path drains with a function it does not export: it takes the watcher's
    // queued system events, decodes their `session-state:` context keys and acknowledges those
    // targets. The same three calls are timed here.
    name: 'drain of 1 pending notice',
    ops: 50,
    setup(ctx) {
      ctx.options = { path: join(ctx.dir, 'drain-one.sqlite') }
      ctx.input = { ...INPUT_NOTIFY, sessionKey: 'agent:main:subagent:busy' }
      ensureSession(ctx.oc, MAIN)
      check(ctx.oc.state.registerSessionStateWatch({ watcherSessionKey: MAIN, targetSessionKey: ctx.input.sessionKey }, ctx.options), 'watch refused')
      ctx.last = mustRecord(ctx, ctx.input, ctx.options).sequence
      check(drainOne(ctx.oc, ctx.options).length === 1, 'expected one notice')
    },
    round(ctx) {
      const { oc, options, input } = ctx
      let total = 0n
      for (let i = 0; i < 50; i++) {
        const sequence = mustRecord(ctx, input, options).sequence
        const start = hr()
        const taken = drainOne(oc, options)
        total += hr() - start
        // The notice names the sequence acknowledged by the previous drain.
        check(taken.length === 1 && taken[0].text.endsWith(` changesSince ${ctx.last}.`), `drain took ${JSON.stringify(taken)}`)
        ctx.last = sequence
      }
      return Number(total) / 50
    },
  },
  sweepWorkload('sweep over 10,000 cursors', 100),
  // Over a minute a round here: OpenClaw takes part in the first three rounds only.
  sweepWorkload('sweep over 100,000 cursors', 1000, 3),
  {
    // OpenClaw prunes inside its sweep and, at most once an hour, after a record; both run
    // `pruneSessionStateEventsInDatabase` in one write transaction, which is what is timed.
    name: 'prune 60,000 -> 50,000 rows (total)',
    ops: 1,
    oneShot: true,
    setup(ctx) {
      ctx.template = join(ctx.dir, 'events-60k.sqlite')
      const inputs = Array.from({ length: 60_000 }, (_, i) => ({ ...INPUT_LOG, sessionKey: PRUNE_SESSIONS[i % 600], agentId: 'main' }))
      writeEvents(ctx, ctx.template, inputs, 1000)
      check(rowCount(ctx, ctx.template, 'SELECT count(*) AS n FROM session_state_events') === 60_000, 'not 60,000 events')
      closeAll(ctx)
      ctx.file = join(ctx.dir, 'prune.sqlite')
    },
    round(ctx) {
      const { oc, file } = ctx
      closeAll(ctx)
      copyDb(ctx.template, file)
      oc.db.openOpenClawStateDatabase({ path: file })
      const start = hr()
      oc.db.runOpenClawStateWriteTransaction(({ db }) => oc.kernel.pruneSessionStateEventsInDatabase(db, Date.now()), { path: file })
      const ns = Number(hr() - start)
      const left = rowCount(ctx, file, 'SELECT count(*) AS n FROM session_state_events')
      const first = rowCount(ctx, file, 'SELECT min(sequence) AS n FROM session_state_events')
      check(left === 50_000 && first === 10_001, `prune left ${left} rows from ${first}`)
      return ns
    },
  },
]

/** What OpenClaw's reply path does to drain one watcher: take its queued system events, then
 * acknowledge the session-state targets they name. Returns the events taken. */
function drainOne(oc, options) {
  const taken = oc.events.drainSystemEventEntries(MAIN)
  const targets = []
  for (const e of taken) {
    const target = e.contextKey && oc.state.decodeSessionStateNoticeContextKey(e.contextKey)
    if (target) targets.push(target)
  }
  if (targets.length > 0) oc.state.acknowledgeSessionStateNotices(MAIN, targets, options)
  return taken
}

export { INPUT_NOTIFY, INPUT_LOG }
