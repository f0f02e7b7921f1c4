'use strict';
// Reference implementation of session-awareness (semantics.md#storage–semantics.md#retention) in plain JavaScript over
// better-sqlite3, written the way a gateway engineer would write it by hand. It is the
// baseline the native addon is benchmarked against; semantics.md#upstream (upstream) and semantics.md#processes (cross-process
// notice push) are out of scope.

const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const {
  DAY_MS,
  NOTIFY_KINDS,
  SPAWN_KIND,
  PROVENANCES,
  SessionStateError,
  invalidArg,
  toSessionError,
  parseKey,
  isNested,
  requireKey,
  requireString,
  resolveAgent,
  encodeNoticeContextKey,
  decodeNoticeContextKey,
  makeNotice,
  normaliseRecordInput,
  usableWatchers,
  rowToEvent,
  recordToEvent,
  readOptions,
  numberOption,
} = require('./rules');
const { SCHEMA, prepareStatements } = require('./statements');

const HOUR_MS = 60 * 60 * 1000;
const DEFAULT_RETENTION_MS = 30 * DAY_MS;
const DEFAULT_MAX_EVENTS = 50_000;
const DEFAULT_BUSY_TIMEOUT_MS = 30_000;
const DEFAULT_WAKE_COALESCE_MS = 250;
const CHANGES_LIMIT_MAX = 200;

function defaultOnError(err) {
  process.stderr.write(`session-state: ${err.code}: ${err.message}\n`);
}

// ---------------------------------------------------------------------------------------------

class ReferenceSessionState {
  constructor(filePath, options) {
    requireKey(filePath, 'path');
    const o = readOptions(options);
    this._retentionMs = numberOption(o.retentionMs, DEFAULT_RETENTION_MS, 'retentionMs', 1);
    this._maxEvents = numberOption(o.maxEvents, DEFAULT_MAX_EVENTS, 'maxEvents', 1);
    const busyTimeoutMs = numberOption(o.busyTimeoutMs, DEFAULT_BUSY_TIMEOUT_MS, 'busyTimeoutMs', 0);
    this._wakeCoalesceMs = numberOption(o.wakeCoalesceMs, DEFAULT_WAKE_COALESCE_MS, 'wakeCoalesceMs', 0);
    for (const name of ['wake', 'onError', 'clock']) {
      if (o[name] !== undefined && o[name] !== null && typeof o[name] !== 'function') {
        throw invalidArg(`${name} must be a function`);
      }
    }
    this._wake = o.wake ?? null;
    this._onError = o.onError ?? defaultOnError;
    this._clock = o.clock ?? Date.now;
    this._strict = o.strict === true;

    try {
      if (filePath !== ':memory:') {
        fs.mkdirSync(path.dirname(path.resolve(filePath)), { recursive: true, mode: 0o700 });
        // Create the file ourselves so a new DB is 0600 (SQLite would use 0644 minus umask).
        fs.closeSync(fs.openSync(filePath, 'a', 0o600));
      }
      this._db = new Database(filePath, { timeout: busyTimeoutMs });
    } catch (err) {
      throw toSessionError(err, 'ERR_DB');
    }
    try {
      this._db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      const mode = this._db.pragma('journal_mode = WAL', { simple: true });
      if (String(mode).toLowerCase() !== 'wal') this._db.pragma('journal_mode = DELETE');
      this._db.pragma('synchronous = NORMAL');
      this._db.exec(SCHEMA);
      this._prepare();
    } catch (err) {
      this._db.close();
      throw toSessionError(err, 'ERR_DB');
    }

    /** watcherKey → Map(targetKey → Notice), in queue order. */
    this._queue = new Map();
    /** watcherKey → pending coalesced wake timer. */
    this._wakeTimers = new Map();
    this._lastPruneAt = null;
    this._closed = false;
  }

  _prepare() {
    const db = this._db;
    this._stmt = prepareStatements(db);

    this._recordTx = db.transaction((rec, now) => this._recordInTx(rec, now));
    this._acknowledgeTx = db.transaction((w, targets, now) => this._acknowledgeInTx(w, targets, now));
    this._watchTx = db.transaction((w, t, provenance, targetAgent, now) =>
      this._watchInTx(w, t, provenance, targetAgent, now));
    this._sweepTx = db.transaction((exists) => this._sweepInTx(exists));
    this._pruneTx = db.transaction((now) => this._pruneInTx(now));
    this._writeTx = db.transaction((fn) => fn());
    this._readTx = db.transaction((fn) => fn());
  }

  // --- plumbing -------------------------------------------------------------------------------

  _ensureOpen() {
    if (this._closed) throw new SessionStateError('ERR_CLOSED', 'SessionState is closed');
  }

  _now() {
    return Math.floor(this._clock());
  }

  _report(err) {
    try {
      this._onError(err);
    } catch {
      // A failing error sink must not turn a best-effort path into a throwing one.
    }
  }

  _guard(fn) {
    this._ensureOpen();
    try {
      return fn();
    } catch (err) {
      throw toSessionError(err);
    }
  }

  _hasNotice(watcher, target) {
    const q = this._queue.get(watcher);
    return q !== undefined && q.has(target);
  }

  _dropNotice(watcher, target) {
    const q = this._queue.get(watcher);
    if (q === undefined) return;
    q.delete(target);
    if (q.size === 0) this._queue.delete(watcher);
  }

  _dropWatcher(watcher) {
    this._queue.delete(watcher);
    const timer = this._wakeTimers.get(watcher);
    if (timer !== undefined) {
      clearTimeout(timer);
      this._wakeTimers.delete(watcher);
    }
  }

  /** A notice enters the queue (at its end) and, for main-like explicit watchers, a wake is due. */
  _enqueue(watcher, target, since, provenance) {
    let q = this._queue.get(watcher);
    if (q === undefined) {
      q = new Map();
      this._queue.set(watcher, q);
    }
    q.delete(target);
    q.set(target, makeNotice(watcher, target, since));
    if (provenance === 'explicit') {
      const parsed = parseKey(watcher);
      if (parsed && !isNested(parsed)) this._scheduleWake(watcher, target);
    }
  }

  _scheduleWake(watcher, target) {
    if (this._wake === null || this._wakeTimers.has(watcher)) return;
    const timer = setTimeout(() => {
      this._wakeTimers.delete(watcher);
      try {
        this._wake({
          source: 'session-state',
          intent: 'immediate',
          reason: `session-state:${target}`,
          sessionKey: watcher,
        });
      } catch (err) {
        this._report(
          new SessionStateError('ERR_WAKE_CALLBACK', `wake callback threw: ${err && err.message}`, {
            cause: err,
          }),
        );
      }
    }, this._wakeCoalesceMs);
    timer.unref();
    this._wakeTimers.set(watcher, timer);
  }

  // --- record (semantics.md#recording) ----------------------------------------------------------------------------

  record(input) {
    let result;
    let now;
    try {
      this._ensureOpen();
      now = this._now();
      const rec = normaliseRecordInput(input, now);
      result = this._recordTx.immediate(rec, now);
    } catch (err) {
      const e = toSessionError(err, 'ERR_DB');
      if (this._strict) throw e;
      this._report(e);
      return null;
    }
    if (result === null) return null; // onlyIfWatched and nobody watches
    for (const [w, t] of result.dropped) this._dropNotice(w, t);
    for (const x of result.entered) this._enqueue(x.watcher, x.target, x.since, x.provenance);
    if (this._lastPruneAt === null || now - this._lastPruneAt > HOUR_MS) {
      try {
        this.prune();
      } catch (err) {
        this._report(toSessionError(err, 'ERR_DB'));
      }
    }
    return result.event;
  }

  _recordInTx(rec, now) {
    const s = this._stmt;
    const named = usableWatchers(rec);
    if (rec.onlyIfWatched) {
      if (!rec.target) return null;
      if (named.length === 0 && s.anyCursorOfTarget.get(rec.sessionKey) === undefined) return null;
    }
    const info = s.insertEvent.run(
      rec.dedupeKey ?? null,
      rec.sessionKey,
      rec.sessionId ?? null,
      rec.agentId,
      rec.kind,
      rec.actorType,
      rec.actorId ?? null,
      rec.runId ?? null,
      rec.occurredAt,
      rec.summary,
      rec.payloadJson,
    );
    if (info.changes === 0) {
      // Dedupe hit: the first row wins; no head bump, no notices.
      return { event: rowToEvent(s.eventByDedupeKey.get(rec.dedupeKey)), entered: [], dropped: [] };
    }
    const sequence = Number(info.lastInsertRowid);
    s.upsertHead.run(rec.sessionKey, rec.agentId, sequence, now);

    const entered = [];
    const dropped = [];
    if (rec.target) {
      if (rec.kind === SPAWN_KIND) {
        for (const w of named) {
          s.seedCursor.run({ watcher: w, target: rec.sessionKey, seq: sequence, now });
          dropped.push([w, rec.sessionKey]);
        }
      } else if (NOTIFY_KINDS.has(rec.kind)) {
        this._materialUpdate(rec, sequence, named, now, entered);
      }
    }
    return { event: recordToEvent(rec, sequence), entered, dropped };
  }

  _materialUpdate(rec, sequence, named, now, entered) {
    const s = this._stmt;
    const target = rec.sessionKey;
    const cursors = new Map();
    for (const c of s.cursorsOfTarget.all(target)) cursors.set(c.watcher, c);
    const watchers = new Set(named);
    for (const w of cursors.keys()) {
      if (w !== target && parseKey(w)) watchers.add(w);
    }
    for (const w of watchers) {
      if (rec.actorId === w) continue; // self-suppression
      const c = cursors.get(w);
      if (c === undefined) {
        // Producer-named watcher without a cursor: L = 0, N = M = S.
        s.insertCursor.run(w, target, 0, sequence, sequence, 'explicit', now);
        entered.push({ watcher: w, target, since: 0, provenance: 'explicit' });
        continue;
      }
      const pending = c.n !== c.l;
      s.materialUpdate.run(pending ? c.n : sequence, sequence, now, w, target);
      // Opens a notice, or re-queues one that is pending on disk but lost from memory.
      if (!pending || !this._hasNotice(w, target)) {
        entered.push({ watcher: w, target, since: c.l, provenance: c.provenance });
      }
    }
  }

  // --- watchers (semantics.md#cursors) --------------------------------------------------------------------------

  watch(watcherKey, targetKey, options) {
    return this._guard(() => {
      requireString(watcherKey, 'watcherKey');
      requireString(targetKey, 'targetKey');
      const provenance = readOptions(options).provenance ?? 'explicit';
      if (!PROVENANCES.has(provenance)) throw invalidArg(`unknown provenance ${String(provenance)}`);
      const target = parseKey(targetKey);
      if (watcherKey === targetKey || !target || !parseKey(watcherKey)) return false;
      this._watchTx.immediate(watcherKey, targetKey, provenance, target.agentId, this._now());
      return true;
    });
  }

  _watchInTx(w, t, provenance, targetAgent, now) {
    const s = this._stmt;
    const c = s.cursor.get(w, t);
    if (c !== undefined) {
      const kept = c.provenance === 'ambient-group' && provenance === 'explicit' ? 'explicit' : c.provenance;
      s.touchCursor.run(kept, now, w, t);
      return;
    }
    const head = s.head.get(t, targetAgent);
    const v = head === undefined ? 0 : head.last_sequence;
    s.insertCursor.run(w, t, v, v, v, provenance, now);
  }

  unwatch(watcherKey, targetKey) {
    return this._guard(() => {
      requireString(watcherKey, 'watcherKey');
      requireString(targetKey, 'targetKey');
      const info = this._writeTx.immediate(() => this._stmt.deleteCursor.run(watcherKey, targetKey));
      if (info.changes === 0) return false;
      this._dropNotice(watcherKey, targetKey);
      return true;
    });
  }

  drain(watcherKey) {
    requireString(watcherKey, 'watcherKey');
    this._ensureOpen();
    const q = this._queue.get(watcherKey);
    if (q === undefined || q.size === 0) return [];
    const notices = Array.from(q.values(), (n) => ({ ...n }));
    this._guard(() => this._acknowledge(watcherKey, Array.from(q.keys())));
    return notices;
  }

  peek(watcherKey) {
    requireString(watcherKey, 'watcherKey');
    this._ensureOpen();
    const q = this._queue.get(watcherKey);
    return q === undefined ? [] : Array.from(q.values(), (n) => ({ ...n }));
  }

  acknowledge(watcherKey, targetKeys) {
    return this._guard(() => {
      requireString(watcherKey, 'watcherKey');
      if (!Array.isArray(targetKeys)) throw invalidArg('targetKeys must be an array of strings');
      for (const t of targetKeys) requireString(t, 'targetKeys[]');
      const unique = Array.from(new Set(targetKeys));
      if (unique.length === 0) return 0;
      return this._acknowledge(watcherKey, unique);
    });
  }

  _acknowledge(watcher, targets) {
    const { count, reopened } = this._acknowledgeTx.immediate(watcher, targets, this._now());
    for (const t of targets) this._dropNotice(watcher, t);
    for (const r of reopened) this._enqueue(watcher, r.target, r.since, r.provenance);
    // A drain or acknowledge that leaves the watcher nothing queued withdraws its scheduled
    // wake (semantics.md#wake).
    const timer = this._wakeTimers.get(watcher);
    if (timer !== undefined && !this._queue.has(watcher)) {
      clearTimeout(timer);
      this._wakeTimers.delete(watcher);
    }
    return count;
  }

  _acknowledgeInTx(w, targets, now) {
    const s = this._stmt;
    let count = 0;
    const reopened = [];
    for (const t of targets) {
      const c = s.cursor.get(w, t);
      if (c === undefined || c.n === c.l) continue; // nothing pending: no-op
      const next = Math.max(c.m, c.n);
      s.acknowledgeCursor.run(c.n, next, now, w, t);
      count++;
      if (c.m > c.n) reopened.push({ target: t, since: c.n, provenance: c.provenance });
    }
    return { count, reopened };
  }

  sweep(options) {
    return this._guard(() => {
      const exists = readOptions(options).watcherExists ?? null;
      if (exists !== null && typeof exists !== 'function') {
        throw invalidArg('watcherExists must be a function');
      }
      const swept = this._sweepTx.immediate(exists);
      for (const c of swept) {
        if (!this._hasNotice(c.watcher, c.target)) this._enqueue(c.watcher, c.target, c.l, c.provenance);
      }
      return { notices: swept.length, prune: this.prune() };
    });
  }

  _sweepInTx(exists) {
    const s = this._stmt;
    const swept = [];
    for (const c of s.sweepCandidates.all()) {
      if (!parseKey(c.watcher) || !parseKey(c.target)) continue;
      if (exists !== null && !exists(c.watcher)) continue;
      if (c.n !== c.m) s.refreezeCursor.run(c.watcher, c.target);
      swept.push(c);
    }
    return swept;
  }

  // --- reading (semantics.md#reading) ---------------------------------------------------------------------------

  stateVersion(sessionKey, options) {
    const agentId = options == null ? undefined : options.agentId;
    return this._guard(() => {
      requireKey(sessionKey, 'sessionKey');
      const head = this._stmt.head.get(sessionKey, resolveAgent(sessionKey, agentId));
      return head === undefined ? 0 : head.last_sequence;
    });
  }

  stateVersions(refs) {
    return this._guard(() => {
      if (!Array.isArray(refs)) throw invalidArg('refs must be an array');
      const resolved = refs.map((ref) => {
        if (ref === null || typeof ref !== 'object') throw invalidArg('each ref must be an object');
        const sessionKey = requireKey(ref.sessionKey, 'sessionKey');
        return { sessionKey, agentId: resolveAgent(sessionKey, ref.agentId) };
      });
      return this._readTx(() => {
        const out = [];
        for (const r of resolved) {
          const head = this._stmt.head.get(r.sessionKey, r.agentId);
          if (head !== undefined && head.last_sequence > 0) {
            out.push({ sessionKey: r.sessionKey, agentId: r.agentId, stateVersion: head.last_sequence });
          }
        }
        return out;
      });
    });
  }

  changesSince(sessionKey, after, options) {
    return this._guard(() => {
      requireKey(sessionKey, 'sessionKey');
      if (!Number.isSafeInteger(after) || after < 0) {
        throw invalidArg('after must be a non-negative safe integer');
      }
      const o = readOptions(options);
      const agentId = resolveAgent(sessionKey, o.agentId);
      let limit = CHANGES_LIMIT_MAX;
      if (o.limit !== undefined && o.limit !== null) {
        if (typeof o.limit !== 'number' || !Number.isFinite(o.limit)) {
          throw invalidArg('limit must be a finite number');
        }
        limit = Math.min(CHANGES_LIMIT_MAX, Math.max(1, Math.floor(o.limit)));
      }
      const s = this._stmt;
      return this._readTx(() => {
        const head = s.head.get(sessionKey, agentId);
        const rows = s.changes.all(sessionKey, agentId, after, limit + 1);
        const truncated = rows.length > limit;
        if (truncated) rows.length = limit;
        const stateVersion = head === undefined ? 0 : head.last_sequence;
        const watermark = head === undefined ? 0 : head.pruned_max_sequence;
        const first = s.earliest.get(sessionKey, agentId);
        let earliestAvailableSequence = 0;
        if (first !== undefined) earliestAvailableSequence = first.sequence;
        else if (stateVersion > 0) earliestAvailableSequence = stateVersion + 1;
        return {
          stateVersion,
          stateChanges: {
            events: rows.map(rowToEvent),
            truncated,
            earliestAvailableSequence,
            historyGap: after < watermark,
          },
        };
      });
    });
  }

  // --- retention and lifecycle (semantics.md#retention) ----------------------------------------------------------

  prune() {
    return this._guard(() => {
      const now = this._now();
      const result = this._pruneTx.immediate(now);
      this._lastPruneAt = now;
      for (const c of result.expired) this._dropNotice(c.watcher, c.target);
      return { eventsDeleted: result.eventsDeleted, cursorsDeleted: result.expired.length };
    });
  }

  _pruneInTx(now) {
    const s = this._stmt;
    const cutoff = now - this._retentionMs;
    // Watermarks first, so a reader never sees a lost row without historyGap.
    s.raiseWatermarksByAge.run(cutoff);
    let eventsDeleted = s.deleteByAge.run(cutoff).changes;
    const cap = s.capCutoff.get(this._maxEvents);
    if (cap !== undefined) {
      s.raiseWatermarksBySequence.run(cap.sequence);
      eventsDeleted += s.deleteBySequence.run(cap.sequence).changes;
    }
    const expired = s.expireCursors.all(cutoff);
    return { eventsDeleted, expired };
  }

  resetSession(sessionKey) {
    this._guard(() => {
      requireKey(sessionKey, 'sessionKey');
      this._writeTx.immediate(() => this._stmt.deleteCursorsOfWatcher.run(sessionKey));
      this._dropWatcher(sessionKey);
    });
  }

  deleteSession(sessionKey, options) {
    const agentId = options == null ? undefined : options.agentId;
    this._guard(() => {
      requireKey(sessionKey, 'sessionKey');
      const parsed = parseKey(sessionKey);
      const agent = resolveAgent(sessionKey, agentId, parsed);
      const s = this._stmt;
      const removed = this._writeTx.immediate(() => {
        s.deleteSessionEvents.run(sessionKey, agent);
        s.deleteHead.run(sessionKey, agent);
        // Cursors carry no agent: only the key's own agent owns them.
        return parsed && parsed.agentId === agent ? s.deleteCursorsOfSession.all({ key: sessionKey }) : [];
      });
      for (const c of removed) this._dropNotice(c.watcher, c.target);
      if (removed.length > 0) this._dropWatcher(sessionKey);
    });
  }

  close() {
    if (this._closed) return;
    this._closed = true;
    for (const timer of this._wakeTimers.values()) clearTimeout(timer);
    this._wakeTimers.clear();
    this._queue.clear();
    this._db.close();
  }
}

module.exports = {
  ReferenceSessionState,
  SessionStateError,
  encodeNoticeContextKey,
  decodeNoticeContextKey,
};
