// What OpenClaw's published code reports for the state database it has open: every session's
// events and version through its own read functions, its upstream links through its own link
// functions, and the raw rows of the four tables of the feature.

/** The tables of the feature, in OpenClaw's names. */
export const TABLES = ['session_state_events', 'session_state_heads', 'session_watch_cursors', 'session_upstream_links']

/**
 * Builds the report with the functions `loadOpenClaw` returned.
 * @param {Awaited<ReturnType<import('./load.mjs').loadOpenClaw>>} oc
 */
export async function openClawReport(oc) {
  const s = oc.sessionState
  const { db } = oc.stateDb.openOpenClawStateDatabase()
  const all = (sql) => db.prepare(sql).all().map((r) => ({ ...r }))
  const heads = all('SELECT session_key, agent_id FROM session_state_heads ORDER BY session_key, agent_id')
  const links = all('SELECT session_key, agent_id FROM session_upstream_links ORDER BY session_key, agent_id')
  const watchers = all('SELECT DISTINCT watcher_session_key FROM session_watch_cursors ORDER BY 1')
  const list = TABLES.map((t) => `'${t}'`).join(', ')
  return {
    openclaw: oc.version,
    userVersion: db.prepare('PRAGMA user_version').get().user_version,
    ddl: Object.fromEntries(
      all(
        `SELECT name, sql FROM sqlite_master WHERE tbl_name IN (${list}) AND sql IS NOT NULL ORDER BY type DESC, name`,
      ).map((r) => [r.name, r.sql]),
    ),
    eventsSince: heads.map((h) => ({
      sessionKey: h.session_key,
      agentId: h.agent_id,
      version: s.getSessionStateVersion(h.session_key, h.agent_id),
      ...s.listSessionStateEventsSince(h.session_key, h.agent_id, 0, 200),
    })),
    versions: s.getSessionStateVersions(heads.map((h) => ({ sessionKey: h.session_key }))),
    ambientGroupTargets: Object.fromEntries(
      watchers.map((w) => [w.watcher_session_key, [...s.listAmbientGroupWatchTargets(w.watcher_session_key)]]),
    ),
    rows: Object.fromEntries(TABLES.map((t) => [t, all(`SELECT * FROM ${t} ORDER BY 1, 2`)])),
    upstreamLinks: links.map((l) => s.readSessionUpstreamLink(l.session_key, l.agent_id) ?? null),
    watchedUpstreamLinks: Object.fromEntries(await s.listWatchedSessionUpstreamLinks()),
  }
}
