'use strict';
// The PostgreSQL baseline: a plain node-postgres (`pg`) implementation of the store's
// statements, against which the PostgreSQL store will be measured (issue: at least 3× its
// throughput at 64 records in flight, no slower at 1). Run against a throwaway cluster of its
// own (scripts/pg/cluster.js, fsync on), with the store's schema
// (crates/core/src/postgres/schema.sql).
//
// Per record, one transaction on a client of a pool of 10, as prepared statements:
//   BEGIN; lock the session's head (INSERT … ON CONFLICT DO UPDATE SET last_sequence =
//   last_sequence); insert the event (RETURNING its sequence); move the head; create the
//   producer-named watcher's cursor if missing; the material update of the target's cursors
//   (N, M, updated_at, RETURNING the pending ones); COMMIT.
// changesSince reads the head and up to `limit` events above a sequence (two statements on one
// client), parsing each payload; stateVersions reads 500 heads in one statement (unnest).
//
// Rounds: 2,000 records each at 1, 8 and 64 in flight (each resolution issues the next), on
// one session (as bench/async.js) and spread over 64 sessions; then 200 changesSince of 200
// events and 200 stateVersions of 500 keys. The figures are medians of 5 rounds.
//
//   node bench/postgres/baseline.js [--rounds 5] [--records 2000] [--no-fsync]
//
// --no-fsync starts the cluster with fsync off, which takes the disk's flush out of every
// commit: what is left is the protocol and the server's CPU.

const os = require('node:os');
const { Pool } = require('pg');

const { startCluster } = require('../../scripts/pg/cluster');
const { applySchema } = require('../../scripts/pg/schema');
const { humanMessage } = require('../messages');

const SCHEMA = 'session_awareness';
const WATCHER = 'agent:main:main';
const IN_FLIGHT = [1, 8, 64];

/** The agent id of a session key (`agent:<id>:…`), as the store derives it. */
const agentOf = (key) => (key.startsWith('agent:') ? key.split(':')[1] : 'main');

/** The statements of one implementation over `pool`, in schema `s`. */
function baseline(pool, s = SCHEMA) {
  const q = {
    lockHead: {
      name: 'lock-head',
      text: `INSERT INTO ${s}.session_state_heads (session_key, agent_id, last_sequence, updated_at)
             VALUES ($1, $2, 0, $3) ON CONFLICT (session_key, agent_id)
             DO UPDATE SET last_sequence = session_state_heads.last_sequence`,
    },
    insertEvent: {
      name: 'insert-event',
      text: `INSERT INTO ${s}.session_state_events (dedupe_key, session_key, session_id, agent_id, kind,
               actor_type, actor_id, run_id, occurred_at, summary, payload_json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING sequence`,
    },
    moveHead: {
      name: 'move-head',
      text: `UPDATE ${s}.session_state_heads SET last_sequence = $3, updated_at = $4
             WHERE session_key = $1 AND agent_id = $2`,
    },
    insertCursor: {
      name: 'insert-cursor',
      text: `INSERT INTO ${s}.session_watch_cursors (watcher_session_key, target_session_key,
               last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at)
             VALUES ($1, $2, 0, $3, $3, 'explicit', $4)
             ON CONFLICT (watcher_session_key, target_session_key) DO NOTHING`,
    },
    materialUpdate: {
      name: 'material-update',
      text: `UPDATE ${s}.session_watch_cursors SET
               notified_sequence = CASE WHEN notified_sequence = last_seen_sequence THEN $2 ELSE notified_sequence END,
               material_sequence = $2, updated_at = $4
             WHERE target_session_key = $1 AND watcher_session_key IS DISTINCT FROM $3
               AND last_seen_sequence <= $2 - 1
             RETURNING watcher_session_key, last_seen_sequence, notified_sequence, provenance, watcher_store_path`,
    },
    head: {
      name: 'head',
      text: `SELECT last_sequence, pruned_max_sequence FROM ${s}.session_state_heads
             WHERE session_key = $1 AND agent_id = $2`,
    },
    events: {
      name: 'events',
      text: `SELECT sequence, session_key, session_id, agent_id, kind, actor_type, actor_id, run_id,
               occurred_at, summary, payload_json
             FROM ${s}.session_state_events
             WHERE session_key = $1 AND agent_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4`,
    },
    versions: {
      name: 'versions',
      text: `SELECT h.session_key, h.last_sequence FROM unnest($1::text[], $2::text[]) AS k(session_key, agent_id)
             JOIN ${s}.session_state_heads h USING (session_key, agent_id)`,
    },
  };
  const run = (client, stmt, values) => client.query({ ...stmt, values });

  return {
    /** Records one event; resolves to `{ sequence, pending }` (the watchers now pending). */
    async record(input) {
      const client = await pool.connect();
      try {
        const now = Date.now();
        const agent = agentOf(input.sessionKey);
        await client.query('BEGIN');
        await run(client, q.lockHead, [input.sessionKey, agent, now]);
        const ev = await run(client, q.insertEvent, [
          input.dedupeKey ?? null,
          input.sessionKey,
          input.sessionId ?? null,
          agent,
          input.kind,
          input.actorType,
          input.actorId ?? null,
          input.runId ?? null,
          now,
          input.summary,
          input.payload === undefined ? null : JSON.stringify(input.payload),
        ]);
        const sequence = Number(ev.rows[0].sequence);
        await run(client, q.moveHead, [input.sessionKey, agent, sequence, now]);
        for (const w of input.watchers ?? []) await run(client, q.insertCursor, [w, input.sessionKey, sequence, now]);
        const pending = await run(client, q.materialUpdate, [input.sessionKey, sequence, input.actorId ?? null, now]);
        await client.query('COMMIT');
        return { sequence, pending: pending.rows.filter((r) => r.notified_sequence !== r.last_seen_sequence).length };
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      } finally {
        client.release();
      }
    },
    /** The head and up to `limit` events of `key` above `after`, payloads parsed. */
    async changesSince(key, after, limit = 200) {
      const client = await pool.connect();
      try {
        const agent = agentOf(key);
        const head = await run(client, q.head, [key, agent]);
        const rows = await run(client, q.events, [key, agent, after, limit]);
        return {
          stateVersion: head.rows.length ? Number(head.rows[0].last_sequence) : 0,
          earliestAvailableSequence: head.rows.length ? Number(head.rows[0].pruned_max_sequence) + 1 : 1,
          events: rows.rows.map((r) => ({
            sequence: Number(r.sequence),
            sessionKey: r.session_key,
            kind: r.kind,
            actorType: r.actor_type,
            actorId: r.actor_id ?? undefined,
            runId: r.run_id ?? undefined,
            occurredAt: Number(r.occurred_at),
            summary: r.summary,
            payload: r.payload_json === null ? undefined : JSON.parse(r.payload_json),
          })),
        };
      } finally {
        client.release();
      }
    },
    /** The state version of each of `keys` that has a head. */
    async stateVersions(keys) {
      const r = await pool.query({ ...q.versions, values: [keys, keys.map(agentOf)] });
      return r.rows.map((row) => ({ sessionKey: row.session_key, stateVersion: Number(row.last_sequence) }));
    },
  };
}

const input = (sessionKey, n) => humanMessage(sessionKey, n, [WATCHER]);

/** Keeps `k` records in flight until `count` have resolved; resolves to records per second. */
async function inFlight(impl, count, k, sessions, tag) {
  const t0 = process.hrtime.bigint();
  let issued = 0;
  const lane = async () => {
    while (issued < count) {
      const n = issued++;
      await impl.record(input(`agent:main:subagent:${tag}-${n % sessions}`, n));
    }
  };
  await Promise.all(Array.from({ length: Math.min(k, count) }, lane));
  return (count * 1e9) / Number(process.hrtime.bigint() - t0);
}

/** Nanoseconds per call of `fn` over `ops` calls, one at a time. */
async function perCall(ops, fn) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) await fn();
  return Number(process.hrtime.bigint() - t0) / ops;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main() {
  const rounds = arg('--rounds', 5);
  const records = arg('--records', 2000);
  const load0 = os.loadavg();
  const durable = !process.argv.includes('--no-fsync');
  const cluster = await startCluster({ name: 'bench', durable });
  const pool = new Pool({ connectionString: cluster.url, max: 10, application_name: 'sa-bench-baseline' });
  // An idle client's backend ended by the server's shutdown at the end is not a failure.
  pool.on('error', () => {});
  try {
    const setup = await pool.connect();
    await applySchema(setup);
    setup.release();
    const impl = baseline(pool);

    // Fixtures of the reads: 200 events in one session, 500 sessions with a head each.
    const changesKey = 'agent:main:subagent:changes';
    for (let i = 0; i < 200; i++) await impl.record({ ...input(changesKey, i), watchers: [] });
    const keys = Array.from({ length: 500 }, (_, i) => `agent:main:subagent:v${i}`);
    for (const k of keys) await impl.record({ ...input(k, 0), watchers: [] });
    const got = await impl.changesSince(changesKey, 0);
    if (got.events.length !== 200) throw new Error(`changesSince returned ${got.events.length} events`);
    if ((await impl.stateVersions(keys)).length !== 500) throw new Error('stateVersions did not return 500');

    const samples = {};
    const put = (name, v) => (samples[name] ??= []).push(v);
    for (let r = 0; r < rounds; r++) {
      for (const [label, sessions] of [['one session', 1], ['64 sessions', 64]]) {
        // Alternate the order of the levels between rounds, so that none always runs first.
        const levels = r % 2 ? [...IN_FLIGHT].reverse() : IN_FLIGHT;
        for (const k of levels) put(`record, ${k} in flight, ${label}`, await inFlight(impl, records, k, sessions, `r${r}k${k}s${sessions}`));
      }
      put('changesSince of 200 events', await perCall(200, () => impl.changesSince(changesKey, 0)));
      put('stateVersions of 500 keys', await perCall(200, () => impl.stateVersions(keys)));
      process.stderr.write(`round ${r + 1}/${rounds} done\n`);
    }
    const version = (await pool.query('SHOW server_version')).rows[0].server_version;
    console.log(
      `PostgreSQL ${version} (throwaway cluster, fsync ${durable ? 'on' : 'off'}), node-postgres ${require('pg/package.json').version}, ` +
        `Node ${process.version}, pool of 10; ${rounds} rounds, ${records} records per throughput round; ` +
        `cluster start ${Math.round(cluster.timing.initdbMs + cluster.timing.startMs)} ms; ` +
        `load average ${load0.map((x) => x.toFixed(2)).join(' ')} at the start, ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} at the end`,
    );
    console.log('\n| Measurement | median | rounds |\n| --- | --- | --- |');
    for (const [name, xs] of Object.entries(samples)) {
      const rate = name.startsWith('record');
      const fmt = (v) => (rate ? `${Math.round(v).toLocaleString('en-US')}/s` : `${(v / 1000).toFixed(0)} µs`);
      console.log(`| ${name} | ${fmt(median(xs))} | ${xs.map(fmt).join(', ')} |`);
    }
  } finally {
    await pool.end();
    await cluster.stop();
  }
}

module.exports = { baseline, agentOf };

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
