//! Upstream monitoring (semantics.md#upstream): adopting sessions, the gateway's own messages, the local
//! transcript scan, remote checks, and the background task that scans. [`Monitor`] records
//! through the store's write path ([`LinkStore`]: SQLite's or PostgreSQL's); `Store` delegates
//! its upstream methods here.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use serde_json::{json, Map, Value};
use tokio::task::AbortHandle;

use super::classify::{classify_value, LineClass};
use super::link_store::{LinkStore, LinkWrite};
use super::links::Link;
use super::normalize::is_self_echo;
use super::scanner::LineScanner;
use crate::error::{Error, Result};
use crate::event::{RecordInput, StateEvent};
use crate::hooks::{Host, Task};
use crate::keys;
use crate::runtime;

/// New transcript bytes read per session and interval.
pub const SCAN_CAP_BYTES: u64 = 1024 * 1024;
/// Remote items classified per check.
pub const REMOTE_WINDOW: usize = 50;
/// Consecutive failed checks after which the upstream is declared missing.
pub const MISSING_AFTER_FAILURES: i64 = 3;
/// The default interval of the background scan.
pub const DEFAULT_INTERVAL_MS: u32 = 5_000;

/// What `adopt` links a session to.
#[derive(Debug, Clone, Default)]
pub struct AdoptInput {
    /// The catalog it came from (`claude`, …); non-empty.
    pub source: String,
    /// A local JSONL transcript to scan.
    pub transcript_path: Option<String>,
    /// A remote session id, checked through `check_upstream`.
    pub remote_id: Option<String>,
    /// The agent of the session; defaults to the key's own, else `main`.
    pub agent_id: Option<String>,
    /// Where the upstream session lives, in OpenClaw's terms (`gateway:local`, `node:<id>`);
    /// defaults to `gateway:local` for a transcript, `remote` otherwise.
    pub host_id: Option<String>,
}

/// A host's probe of a remote upstream.
#[derive(Debug, Clone)]
pub enum RemoteCheck {
    /// The session exists; its newest transcript rows, oldest first.
    Found(Vec<Value>),
    /// The session is gone: a failed check.
    Missing,
    /// The probe could not tell: neither a failure nor a success.
    Unknown,
}

/// Per-session scanning state kept between intervals: a line longer than the per-interval
/// cap progresses through the scanner without the durable offset moving past it.
#[derive(Default)]
struct MonitorState {
    // session key -> (file offset the scanner started at, scanner)
    scanners: HashMap<String, (u64, LineScanner)>,
    task: Option<MonitorTask>,
}

/// The running background scan.
struct MonitorTask {
    handle: AbortHandle,
    // Held for the whole of each scan and false once stopped: aborting the task does not stop
    // a scan already on a blocking thread, this does, and no scan starts after a stop.
    live: Arc<Mutex<bool>>,
}

impl MonitorTask {
    /// Stops the task; waits for a scan in progress. Call without the monitor lock held (a
    /// scan takes it).
    fn stop(self) {
        self.handle.abort();
        *self.live.lock() = false;
    }
}

/// A turn counted as human after the self-echo check: consumes the matching own message.
fn is_echo(own: &mut Vec<String>, text: &str, truncated: bool) -> bool {
    match own.iter().position(|m| is_self_echo(text, truncated, m)) {
        Some(i) => {
            own.remove(i);
            true
        }
        None => false,
    }
}

fn item_identity(item: &Value) -> String {
    if let Some(id) = item.get("uuid").and_then(Value::as_str) {
        return format!("uuid:{id}");
    }
    // FNV-1a over the compact JSON: stable across processes, unlike the std hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in item.to_string().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv:{h:016x}")
}

/// The upstream monitor of one store.
pub(crate) struct Monitor {
    links: Arc<dyn LinkStore>,
    host: Host,
    state: Mutex<MonitorState>,
}

impl Monitor {
    /// The monitor recording through `links`, reporting and reading the clock through `host`.
    pub(crate) fn new(links: Arc<dyn LinkStore>, host: Host) -> Self {
        Monitor {
            links,
            host,
            state: Mutex::new(MonitorState::default()),
        }
    }

    /// Adopts `session_key` (semantics.md#upstream): records `adopted` (log only) and stores a new link,
    /// replacing the earlier one of the same session and agent, in one transaction: a failure
    /// leaves neither. A local transcript is scanned from its current end: what it held before
    /// adoption is history, not a change behind the watcher's back.
    pub(crate) fn adopt(
        &self,
        session_key: &str,
        input: AdoptInput,
        now: i64,
    ) -> Result<Option<StateEvent>> {
        if input.source.is_empty() {
            return Err(Error::invalid("link.source must be a non-empty string"));
        }
        let agent_id = keys::resolve_agent(session_key, input.agent_id.as_deref())?;
        let transcript_path = input.transcript_path.filter(|p| !p.is_empty());
        let remote_id = input.remote_id.filter(|r| !r.is_empty());
        let host_id = input.host_id.filter(|h| !h.is_empty());
        let offset = transcript_path
            .as_deref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len() as i64);
        let mut payload = Map::new();
        payload.insert("source".into(), json!(input.source));
        if let Some(r) = &remote_id {
            payload.insert("remoteId".into(), json!(r));
        }
        let summary = format!("adopted from {}", input.source);
        let mut link = Link::new(
            session_key.to_owned(),
            agent_id.clone(),
            input.source,
            host_id,
            transcript_path,
            remote_id,
        );
        link.scan_offset = offset;
        let event = self.links.record_with(
            RecordInput {
                session_key: session_key.to_owned(),
                agent_id: Some(agent_id),
                kind: "adopted".into(),
                actor_type: "system".into(),
                summary,
                payload: Some(Value::Object(payload)),
                ..Default::default()
            },
            now,
            LinkWrite::Adopt(link),
        )?;
        self.state.lock().scanners.remove(session_key);
        Ok(event)
    }

    /// The link of an adopted session, if any.
    pub(crate) fn link(&self, session_key: &str) -> Result<Option<Link>> {
        self.links.link(session_key)
    }

    /// Remembers a user message the gateway itself sent into an adopted session, so its echo
    /// in the upstream transcript is not taken for a human (the last 10 are kept). Does
    /// nothing for a session without a link.
    pub(crate) fn note_own_user_message(
        &self,
        session_key: &str,
        text: &str,
        now: i64,
    ) -> Result<()> {
        keys::SessionKey::parse(session_key)?;
        self.links
            .update_link(session_key, now, &mut |link| link.note_own(text))
    }

    /// Records the outcome of a failed check; the third in a row records `upstream_missing`
    /// and drops the link, in one transaction.
    fn upstream_failed(&self, mut link: Link, now: i64) -> Result<Option<StateEvent>> {
        link.failure_count += 1;
        if link.failure_count < MISSING_AFTER_FAILURES {
            self.links.save_link(&link, now)?;
            return Ok(None);
        }
        let event = self.links.record_with(
            RecordInput {
                session_key: link.session_key.clone(),
                agent_id: Some(link.agent_id.clone()),
                kind: "upstream_missing".into(),
                actor_type: "system".into(),
                summary: format!("upstream missing via {}", link.source),
                payload: Some(json!({ "source": link.source, "failures": link.failure_count })),
                ..Default::default()
            },
            now,
            LinkWrite::Delete {
                session_key: link.session_key.clone(),
                agent_id: link.agent_id.clone(),
            },
        )?;
        self.state.lock().scanners.remove(&link.session_key);
        Ok(event)
    }

    /// Records the human turns of one check or scan and writes the link back, in one
    /// transaction.
    fn record_human_turns(
        &self,
        link: &Link,
        turns: usize,
        extra: Map<String, Value>,
        dedupe: Option<String>,
        now: i64,
    ) -> Result<Option<StateEvent>> {
        let mut payload = Map::new();
        payload.insert("turns".into(), json!(turns));
        payload.extend(extra);
        self.links.record_with(
            RecordInput {
                session_key: link.session_key.clone(),
                agent_id: Some(link.agent_id.clone()),
                kind: "human_direct_message".into(),
                actor_type: "human".into(),
                summary: format!("human message via {}", link.source),
                payload: Some(Value::Object(payload)),
                dedupe_key: dedupe,
                ..Default::default()
            },
            now,
            LinkWrite::Save(link.clone()),
        )
    }

    /// Takes the result of the host's probe of a remote upstream (semantics.md#upstream). Returns the event it
    /// recorded, if any; null for a session without a link. The first successful check sets
    /// the baseline; later ones classify the new items among the last 50, and say
    /// `windowOverflow: true` when more new items arrived than the window holds.
    pub(crate) fn check(
        &self,
        session_key: &str,
        check: RemoteCheck,
        now: i64,
    ) -> Result<Option<StateEvent>> {
        keys::SessionKey::parse(session_key)?;
        let Some(mut link) = self.link(session_key)? else {
            return Ok(None);
        };
        let items = match check {
            RemoteCheck::Unknown => return Ok(None),
            RemoteCheck::Missing => return self.upstream_failed(link, now),
            RemoteCheck::Found(items) => items,
        };
        let first_check = link.remote_cursor.is_none();
        let seen_at = link
            .remote_cursor
            .as_deref()
            .and_then(|c| items.iter().rposition(|i| item_identity(i) == c));
        let fresh = match seen_at {
            Some(i) => &items[i + 1..],
            None if first_check => &items[items.len()..],
            None => &items[..],
        };
        let overflow = !first_check && (seen_at.is_none() || fresh.len() > REMOTE_WINDOW);
        let window = &fresh[fresh.len().saturating_sub(REMOTE_WINDOW)..];
        let mut turns = 0;
        for item in window {
            if let LineClass::HumanTurn { text, truncated } = classify_value(item) {
                if !is_echo(&mut link.own_messages, &text, truncated) {
                    turns += 1;
                }
            }
        }
        link.failure_count = 0;
        link.last_scanned_at = Some(now);
        if let Some(last) = items.last() {
            link.remote_cursor = Some(item_identity(last));
        } else if first_check {
            link.remote_cursor = Some(String::new());
        }
        if turns > 0 {
            let mut extra = Map::new();
            if overflow {
                extra.insert("windowOverflow".into(), json!(true));
            }
            return self.record_human_turns(&link, turns, extra, None, now);
        }
        self.links.save_link(&link, now)?;
        Ok(None)
    }

    /// One scan of every watched adopted session with a local transcript (semantics.md#upstream): at most
    /// 1 MiB of new bytes each, from the durable offset; complete lines are classified, a
    /// partial last line waits; the non-echo human turns of the interval become one
    /// `human_direct_message`. Returns the events recorded.
    pub(crate) fn scan(&self, now: i64) -> Result<Vec<StateEvent>> {
        let watched = self.links.watched_local_links()?;
        let mut out = Vec::new();
        for link in watched {
            match self.scan_one(link, now) {
                Ok(Some(e)) => out.push(e),
                Ok(None) => {}
                Err(e @ (Error::Closed | Error::FileShared(_))) => return Err(e),
                Err(e) => self.host.report(e, Task::UpstreamMonitor),
            }
        }
        Ok(out)
    }

    fn scan_one(&self, mut link: Link, now: i64) -> Result<Option<StateEvent>> {
        let path = link.transcript_path.clone().unwrap_or_default();
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.upstream_failed(link, now)
            }
            Err(e) => return Err(e.into()),
        };
        let len = file.metadata()?.len();
        let durable = link.scan_offset.max(0) as u64;
        let (mut base, mut scanner) = self
            .state
            .lock()
            .scanners
            .remove(&link.session_key)
            .filter(|(base, s)| base + s.committed() == durable)
            .unwrap_or_else(|| (durable, LineScanner::default()));
        if len < base + scanner.consumed() {
            // The transcript shrank or was replaced: classify the new content from its start.
            base = 0;
            scanner.reset();
        }
        let from = base + scanner.consumed();
        let want = (len - from).min(SCAN_CAP_BYTES) as usize;
        let mut buf = vec![0u8; want];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut buf)?;
        let mut turns = 0;
        for line in scanner.feed(&buf) {
            match line.class {
                Ok(LineClass::HumanTurn { text, truncated }) => {
                    if !is_echo(&mut link.own_messages, &text, truncated) {
                        turns += 1;
                    }
                }
                Ok(_) => {}
                Err(e) => self.host.report(
                    Error::UpstreamParse(format!(
                        "{}: bytes {}..{} of {}: {e}",
                        keys::json_string(&link.session_key),
                        base + line.start,
                        base + line.end,
                        path
                    )),
                    Task::UpstreamMonitor,
                ),
            }
        }
        let committed = base + scanner.committed();
        let moved = committed as i64 != link.scan_offset;
        let changed = moved || link.failure_count != 0 || turns > 0;
        let from_offset = link.scan_offset;
        link.scan_offset = committed as i64;
        link.failure_count = 0;
        if changed {
            link.last_scanned_at = Some(now);
        }
        let event = if turns > 0 {
            // The event and the new offset commit together; the byte range still makes the
            // event idempotent where the offset moves back under the store (a copy of the file
            // restored from before the scan): the first row is returned, not a second one.
            let dedupe = format!(
                "upstream:{}:{}:{}-{}",
                link.session_key, link.agent_id, from_offset, committed
            );
            self.record_human_turns(&link, turns, Map::new(), Some(dedupe), now)?
        } else {
            if changed {
                self.links.save_link(&link, now)?;
            }
            None
        };
        // The scanner resumes next interval only if the durable offset is still where it left it.
        self.state
            .lock()
            .scanners
            .insert(link.session_key.clone(), (base, scanner));
        Ok(event)
    }

    /// Starts the background scan every `interval_ms` (restarting it if it runs). It never
    /// keeps the process alive and stops with [`Monitor::stop`] or the store's `close`.
    pub(crate) fn start(self: &Arc<Self>, interval_ms: u32) -> Result<()> {
        if interval_ms == 0 {
            return Err(Error::invalid("intervalMs must be a positive integer"));
        }
        self.links.check_open()?;
        self.stop();
        let monitor = Arc::clone(self);
        let live = Arc::new(Mutex::new(true));
        let scan_live = Arc::clone(&live);
        let period = Duration::from_millis(u64::from(interval_ms));
        let task = runtime::handle().spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let m = Arc::clone(&monitor);
                let live = Arc::clone(&scan_live);
                let done = tokio::task::spawn_blocking(move || {
                    let live = live.lock();
                    if !*live {
                        return Err(Error::Closed);
                    }
                    let now = m.host.now();
                    m.scan(now)
                })
                .await;
                match done {
                    Ok(Err(Error::Closed)) => break,
                    // A shared file is reported by the host's own calls, which it refuses.
                    Ok(Err(Error::FileShared(_))) => {}
                    Ok(Err(e)) => monitor.host.report(e, Task::UpstreamMonitor),
                    _ => {}
                }
            }
        });
        self.state.lock().task = Some(MonitorTask {
            handle: task.abort_handle(),
            live,
        });
        Ok(())
    }

    /// Stops the background scan: when it returns, no scan runs or starts. Idempotent.
    pub(crate) fn stop(&self) {
        let task = self.state.lock().task.take();
        if let Some(t) = task {
            t.stop();
        }
    }
}
