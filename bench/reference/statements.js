'use strict';
// The SQL of the reference implementation (session-state.js): the schema of semantics.md#storage
// and every statement the class runs, each prepared once when a store opens.

const SCHEMA = `
CREATE TABLE IF NOT EXISTS session_state_events (
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  dedupe_key TEXT UNIQUE,
  session_key TEXT NOT NULL,
  session_id TEXT,
  agent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT,
  run_id TEXT,
  occurred_at INTEGER NOT NULL,
  summary TEXT NOT NULL,
  payload_json TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS session_state_events_session_idx
  ON session_state_events (session_key, sequence DESC);
CREATE INDEX IF NOT EXISTS session_state_events_occurred_idx
  ON session_state_events (occurred_at DESC, sequence DESC);
CREATE TABLE IF NOT EXISTS session_state_heads (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  last_sequence INTEGER NOT NULL,
  pruned_max_sequence INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_key, agent_id)
) STRICT;
CREATE TABLE IF NOT EXISTS session_watch_cursors (
  watcher_session_key TEXT NOT NULL,
  target_session_key TEXT NOT NULL,
  last_seen_sequence INTEGER NOT NULL,
  notified_sequence INTEGER NOT NULL,
  material_sequence INTEGER NOT NULL,
  provenance TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_session_key, target_session_key)
) STRICT;
CREATE INDEX IF NOT EXISTS session_watch_cursors_target_idx
  ON session_watch_cursors (target_session_key);
`;

const CURSOR_COLUMNS = `watcher_session_key AS watcher, target_session_key AS target,
  last_seen_sequence AS l, notified_sequence AS n, material_sequence AS m, provenance`;

/** Prepares every statement on `db`, by name. */
function prepareStatements(db) {
  const p = (sql) => db.prepare(sql);
  return {
    insertEvent: p(`INSERT INTO session_state_events (dedupe_key, session_key, session_id,
        agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedupe_key) DO NOTHING`),
    eventByDedupeKey: p('SELECT * FROM session_state_events WHERE dedupe_key = ?'),
    upsertHead: p(`INSERT INTO session_state_heads (session_key, agent_id, last_sequence,
        pruned_max_sequence, updated_at) VALUES (?, ?, ?, 0, ?)
      ON CONFLICT (session_key, agent_id) DO UPDATE SET
        last_sequence = max(last_sequence, excluded.last_sequence),
        updated_at = excluded.updated_at`),
    head: p(`SELECT last_sequence, pruned_max_sequence FROM session_state_heads
      WHERE session_key = ? AND agent_id = ?`),
    changes: p(`SELECT * FROM session_state_events
      WHERE session_key = ? AND agent_id = ? AND sequence > ? ORDER BY sequence ASC LIMIT ?`),
    earliest: p(`SELECT sequence FROM session_state_events
      WHERE session_key = ? AND agent_id = ? ORDER BY sequence ASC LIMIT 1`),
    deleteSessionEvents: p('DELETE FROM session_state_events WHERE session_key = ? AND agent_id = ?'),
    deleteHead: p('DELETE FROM session_state_heads WHERE session_key = ? AND agent_id = ?'),

    cursor: p(`SELECT ${CURSOR_COLUMNS} FROM session_watch_cursors
      WHERE watcher_session_key = ? AND target_session_key = ?`),
    cursorsOfTarget: p(`SELECT ${CURSOR_COLUMNS} FROM session_watch_cursors
      WHERE target_session_key = ?`),
    anyCursorOfTarget: p('SELECT 1 FROM session_watch_cursors WHERE target_session_key = ? LIMIT 1'),
    insertCursor: p(`INSERT INTO session_watch_cursors (watcher_session_key, target_session_key,
        last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`),
    seedCursor: p(`INSERT INTO session_watch_cursors (watcher_session_key, target_session_key,
        last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at)
      VALUES (@watcher, @target, @seq, @seq, @seq, 'explicit', @now)
      ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET
        last_seen_sequence = @seq, notified_sequence = @seq, material_sequence = @seq,
        updated_at = @now`),
    materialUpdate: p(`UPDATE session_watch_cursors
      SET notified_sequence = ?, material_sequence = ?, updated_at = ?
      WHERE watcher_session_key = ? AND target_session_key = ?`),
    acknowledgeCursor: p(`UPDATE session_watch_cursors
      SET last_seen_sequence = ?, notified_sequence = ?, updated_at = ?
      WHERE watcher_session_key = ? AND target_session_key = ?`),
    touchCursor: p(`UPDATE session_watch_cursors SET provenance = ?, updated_at = ?
      WHERE watcher_session_key = ? AND target_session_key = ?`),
    refreezeCursor: p(`UPDATE session_watch_cursors SET notified_sequence = material_sequence
      WHERE watcher_session_key = ? AND target_session_key = ?`),
    sweepCandidates: p(`SELECT ${CURSOR_COLUMNS} FROM session_watch_cursors
      WHERE material_sequence > last_seen_sequence
      ORDER BY material_sequence, watcher_session_key, target_session_key`),
    deleteCursor: p(`DELETE FROM session_watch_cursors
      WHERE watcher_session_key = ? AND target_session_key = ?`),
    deleteCursorsOfWatcher: p('DELETE FROM session_watch_cursors WHERE watcher_session_key = ?'),
    deleteCursorsOfSession: p(`DELETE FROM session_watch_cursors
      WHERE watcher_session_key = @key OR target_session_key = @key
      RETURNING watcher_session_key AS watcher, target_session_key AS target`),

    raiseWatermarksByAge: p(`UPDATE session_state_heads AS h
      SET pruned_max_sequence = max(h.pruned_max_sequence, x.max_sequence)
      FROM (SELECT session_key, agent_id, max(sequence) AS max_sequence
            FROM session_state_events WHERE occurred_at < ? GROUP BY session_key, agent_id) AS x
      WHERE h.session_key = x.session_key AND h.agent_id = x.agent_id`),
    deleteByAge: p('DELETE FROM session_state_events WHERE occurred_at < ?'),
    capCutoff: p(`SELECT sequence FROM session_state_events
      ORDER BY sequence DESC LIMIT 1 OFFSET ?`),
    raiseWatermarksBySequence: p(`UPDATE session_state_heads AS h
      SET pruned_max_sequence = max(h.pruned_max_sequence, x.max_sequence)
      FROM (SELECT session_key, agent_id, max(sequence) AS max_sequence
            FROM session_state_events WHERE sequence <= ? GROUP BY session_key, agent_id) AS x
      WHERE h.session_key = x.session_key AND h.agent_id = x.agent_id`),
    deleteBySequence: p('DELETE FROM session_state_events WHERE sequence <= ?'),
    expireCursors: p(`DELETE FROM session_watch_cursors WHERE updated_at < ?
      RETURNING watcher_session_key AS watcher, target_session_key AS target`),
  };
}

module.exports = { SCHEMA, prepareStatements };
