'use strict';
// The benchmarked workloads. Each runs unchanged on the addon and on the reference: it only
// uses the public SessionState API. A workload has `setup(ctx)` (builds its fixtures, untimed)
// and `round(ctx)`, which returns one sample in nanoseconds (per operation, or per run for
// the one-shot workloads). bench/child.js runs them; bench/run.js interleaves the rounds of the
// two implementations so both see the same machine load.

const fs = require('node:fs');
const path = require('node:path');

const hr = () => process.hrtime.bigint();
const MAIN = 'agent:main:main';
const INPUT_NOTIFY = {
  kind: 'human_direct_message',
  actorType: 'human',
  actorId: 'telegram:42',
  summary: 'human message via telegram',
  payload: { channel: 'telegram' },
};
const INPUT_LOG = {
  kind: 'run_completed',
  actorType: 'agent',
  runId: 'run-1',
  summary: 'run completed',
  payload: { durationMs: 1200 },
};

/** Times `ops` calls of `fn` in one batch; nanoseconds per call. Rounds are kept short (tens of
 * milliseconds) so that the rounds of the two implementations, run back to back, see the same
 * share of a busy machine. */
function batch(ops, fn) {
  const start = hr();
  for (let i = 0; i < ops; i++) fn(i);
  return Number(hr() - start) / ops;
}

function mustRecord(store, input) {
  const e = store.record(input);
  if (e === null) throw new Error(`record returned null for ${input.sessionKey}`);
  return e;
}

function copyDb(from, to) {
  for (const suffix of ['-wal', '-shm', '']) fs.rmSync(to + suffix, { force: true });
  fs.copyFileSync(from, to);
  if (fs.existsSync(from + '-wal')) fs.copyFileSync(from + '-wal', to + '-wal');
}

function removeDb(file) {
  for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
}

// --- fixtures shared by several workloads -----------------------------------------------------

/** `targets` × `count` cursors, each with a pending notice: each target recorded once with
 * `count` producer-named watchers. */
function buildCursors(store, targets, count = 100) {
  const watchers = Array.from({ length: count }, (_, i) => `agent:w${i}:main`);
  for (let t = 0; t < targets; t++) {
    mustRecord(store, { ...INPUT_NOTIFY, sessionKey: `agent:main:subagent:t${t}`, watchers });
  }
}

/** 100,000 cursors, each with a pending notice. */
const buildHundredThousandCursors = (store) => buildCursors(store, 1000);

const PRUNE_SESSIONS = Array.from({ length: 600 }, (_, i) => `agent:main:subagent:p${i}`);

/** `n` events spread over 600 sessions: event i (sequence i + 1) belongs to session i % 600. */
function recordSpread(store, from, to) {
  for (let i = from; i < to; i++) {
    mustRecord(store, { ...INPUT_LOG, sessionKey: PRUNE_SESSIONS[i % PRUNE_SESSIONS.length] });
  }
}

/** The 50,000- and 60,000-event databases, built once per process. */
function eventTemplates(ctx) {
  if (ctx.shared.templates) return ctx.shared.templates;
  const t50 = path.join(ctx.dir, 'events-50k.sqlite');
  const t60 = path.join(ctx.dir, 'events-60k.sqlite');
  let s = ctx.open(t50, { maxEvents: 1e9 });
  recordSpread(s, 0, 50_000);
  s.close();
  copyDb(t50, t60);
  s = ctx.open(t60, { maxEvents: 1e9 });
  recordSpread(s, 50_000, 60_000);
  s.close();
  ctx.shared.templates = { t50, t60 };
  return ctx.shared.templates;
}

// --- the workloads ----------------------------------------------------------------------------

function recordWorkload(name, watcherCount, input, ops) {
  return {
    name,
    ops,
    setup(ctx) {
      const target = `agent:main:subagent:${name.replace(/\W+/g, '-')}`;
      ctx.store = ctx.open(path.join(ctx.dir, `${name.replace(/\W+/g, '-')}.sqlite`));
      for (let i = 0; i < watcherCount; i++) ctx.store.watch(`agent:w${i}:main`, target);
      ctx.input = { ...input, sessionKey: target };
      batch(ops, () => mustRecord(ctx.store, ctx.input)); // warm-up: also runs the first prune
    },
    round(ctx) {
      const { store, input } = ctx;
      return batch(ops, () => {
        if (store.record(input) === null) throw new Error('record failed');
      });
    },
  };
}

/** A restart's sweep of `targets` × `watchers` pending cursors; with `exists`, through a
 * `watcherExists` that answers true for every watcher. */
function sweepWorkload(name, targets, watchers = 100, exists = false) {
  return {
    name,
    ops: 1,
    oneShot: true,
    setup(ctx) {
      ctx.template = path.join(ctx.dir, `cursors-${targets}x${watchers}.sqlite`);
      const s = ctx.open(ctx.template);
      buildCursors(s, targets, watchers);
      s.close();
      ctx.file = path.join(ctx.dir, 'sweep.sqlite');
    },
    round(ctx) {
      copyDb(ctx.template, ctx.file);
      const s = ctx.open(ctx.file);
      const start = hr();
      const report = exists ? s.sweep({ watcherExists: () => true }) : s.sweep();
      const ns = Number(hr() - start);
      const pending = s.peek('agent:w7:main').length;
      s.close();
      if (report.notices !== targets * watchers || pending !== targets) {
        throw new Error(`sweep: ${report.notices} notices, ${pending} for one watcher`);
      }
      return ns;
    },
  };
}

const WORKLOADS = [
  recordWorkload('record notify, 1 watcher', 1, INPUT_NOTIFY, 300),
  recordWorkload('record notify, 100 watchers', 100, INPUT_NOTIFY, 100),
  recordWorkload('record log-only', 0, INPUT_LOG, 300),
  {
    name: 'changesSince of 200 events',
    ops: 50,
    setup(ctx) {
      ctx.store = ctx.open(path.join(ctx.dir, 'changes.sqlite'));
      ctx.key = 'agent:main:subagent:changes';
      for (let i = 0; i < 200; i++) mustRecord(ctx.store, { ...INPUT_LOG, sessionKey: ctx.key });
      const got = ctx.store.changesSince(ctx.key, 0).stateChanges.events.length;
      if (got !== 200) throw new Error(`changesSince returned ${got} events`);
    },
    round(ctx) {
      return batch(50, () => ctx.store.changesSince(ctx.key, 0));
    },
  },
  {
    name: 'stateVersions of 500 keys',
    ops: 50,
    setup(ctx) {
      ctx.store = ctx.open(path.join(ctx.dir, 'versions.sqlite'));
      ctx.refs = [];
      for (let i = 0; i < 500; i++) {
        const sessionKey = `agent:main:subagent:v${i}`;
        mustRecord(ctx.store, { ...INPUT_LOG, sessionKey });
        ctx.refs.push({ sessionKey });
      }
      const got = ctx.store.stateVersions(ctx.refs).length;
      if (got !== 500) throw new Error(`stateVersions returned ${got} versions`);
    },
    round(ctx) {
      return batch(50, () => ctx.store.stateVersions(ctx.refs));
    },
  },
  {
    // For the addon, each round also times the cheapest call into it (the isClosed getter),
    // right beside the drains, alternating which goes first: the baseline of "an empty napi
    // call" the empty drain is held to.
    name: 'drain, nothing pending',
    ops: 100_000,
    setup(ctx) {
      ctx.store = ctx.open(path.join(ctx.dir, 'drain-empty.sqlite'));
      ctx.store.watch(MAIN, 'agent:main:subagent:quiet');
      if (ctx.store.drain(MAIN).length !== 0) throw new Error('nothing should be pending');
      ctx.round = 0;
    },
    round(ctx) {
      const { store } = ctx;
      const drain = () => batch(100_000, () => store.drain(MAIN));
      if (store.isClosed === undefined) return drain();
      const noop = () => batch(100_000, () => store.isClosed);
      if (ctx.round++ % 2 === 0) {
        const ns = drain();
        return { ns, baseline: noop() };
      }
      const baseline = noop();
      return { ns: drain(), baseline };
    },
  },
  {
    name: 'drain of 1 pending notice',
    ops: 100,
    setup(ctx) {
      ctx.store = ctx.open(path.join(ctx.dir, 'drain-one.sqlite'));
      ctx.input = { ...INPUT_NOTIFY, sessionKey: 'agent:main:subagent:busy' };
      ctx.store.watch(MAIN, ctx.input.sessionKey);
      mustRecord(ctx.store, ctx.input);
      if (ctx.store.drain(MAIN).length !== 1) throw new Error('expected one notice');
    },
    round(ctx) {
      const { store, input } = ctx;
      let total = 0n;
      for (let i = 0; i < 100; i++) {
        mustRecord(store, input);
        const start = hr();
        const n = store.drain(MAIN).length;
        total += hr() - start;
        if (n !== 1) throw new Error(`drain returned ${n} notices`);
      }
      return Number(total) / 100;
    },
  },
  sweepWorkload('sweep over 10,000 cursors', 100),
  sweepWorkload('sweep over 20,000 cursors', 200),
  sweepWorkload('sweep over 100,000 cursors', 1000),
  sweepWorkload('sweep over 10,000 cursors of 1,000 watchers', 10, 1000),
  sweepWorkload('sweep over 10,000 cursors of 1,000 watchers, watcherExists', 10, 1000, true),
  {
    name: 'prune 60,000 -> 50,000 rows (total)',
    ops: 1,
    oneShot: true,
    setup(ctx) {
      ctx.t60 = eventTemplates(ctx).t60;
      ctx.file = path.join(ctx.dir, 'prune.sqlite');
    },
    round(ctx) {
      copyDb(ctx.t60, ctx.file);
      const s = ctx.open(ctx.file);
      const start = hr();
      const report = s.prune();
      const ns = Number(hr() - start);
      s.close();
      if (report.eventsDeleted !== 10_000) throw new Error(`prune deleted ${report.eventsDeleted}`);
      return ns;
    },
  },
  {
    name: 'prune 60,000 -> 50,000 rows (longest JS stall)',
    ops: 1,
    oneShot: true,
    setup(ctx) {
      ctx.t60 = eventTemplates(ctx).t60;
      ctx.file = path.join(ctx.dir, 'prune-stall.sqlite');
    },
    // The first record after opening prunes (semantics.md#recording): 60,001 rows down to 50,000, so
    // sequences 1..10,001 go. A setImmediate heartbeat measures the longest gap on the JS
    // thread (from the start of one tick to the start of the next, so the record itself counts)
    // from that record until sequence 10,001 is gone, polling every ~2 ms the session
    // that held it (a real gateway keeps calling the store meanwhile).
    round(ctx) {
      copyDb(ctx.t60, ctx.file);
      const s = ctx.open(ctx.file);
      const probe = PRUNE_SESSIONS[10_000 % PRUNE_SESSIONS.length];
      const gone = () => s.changesSince(probe, 0, { limit: 1 }).stateChanges.events[0].sequence > 10_001;
      return new Promise((resolve, reject) => {
        let last = hr();
        let lastPoll = last;
        let maxGap = 0n;
        let recorded = false;
        const tick = () => {
          try {
            const t = hr();
            if (t - last > maxGap) maxGap = t - last;
            last = t;
            if (!recorded) {
              recorded = true;
              mustRecord(s, { ...INPUT_LOG, sessionKey: 'agent:main:subagent:trigger' });
            } else if (t - lastPoll > 2_000_000n) {
              lastPoll = t;
              if (gone()) {
                s.close();
                resolve(Number(maxGap));
                return;
              }
            }
            setImmediate(tick);
          } catch (err) {
            reject(err);
          }
        };
        setImmediate(tick);
      });
    },
  },
  {
    name: 'open a database of 50,000 events',
    ops: 1,
    oneShot: true,
    setup(ctx) {
      ctx.t50 = eventTemplates(ctx).t50;
    },
    round(ctx) {
      const start = hr();
      const s = ctx.open(ctx.t50);
      const ns = Number(hr() - start);
      s.close();
      return ns;
    },
  },
];

module.exports = { WORKLOADS, buildHundredThousandCursors, removeDb };
