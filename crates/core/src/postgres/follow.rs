//! Followers on PostgreSQL (semantics.md#follow, docs/postgres.md#follow): the listener's task
//! reads the heads of the sessions followed on this host after each hint from another host
//! and at each periodic catch-up, and touches those that moved (one statement for every
//! followed session). So that a record on another host sends a hint even when it opens no
//! notice, each host announces the sessions followed on it on the schema's channel
//! (`{"i":"<instance>","f":[…]}`, when they change, every third of a lease length, and when a
//! host that (re)connects asks, `{"i":"<instance>","q":"f"}`); a host that writes one of them
//! names it in its commit's hint (`"s":[…]`). An announcement is a hint too: a host that has
//! not heard it sends no hint for those sessions, and the periodic catch-up still brings their
//! rows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use parking_lot::Mutex;

use super::cursors::{db, Cached};
use super::listen::{self, Hint, MAX_PAYLOAD};
use super::tail::notify;
use crate::error::{Error, Result};
use crate::follow::Follows;

const HEADS: &str = "SELECT t.a, t.k, h.last_sequence FROM unnest($1::text[], $2::text[]) \
     AS t(a, k) JOIN __SCHEMA__.session_state_heads h \
     ON h.session_key = t.k AND h.agent_id = t.a";

/// The followers' part of a turn of the listener's task: the announcement when due, then the
/// heads of the sessions followed here, whose followers are told of those that moved. `at`:
/// this store's instance and lease length. Returns a failed announcement (best effort).
pub(crate) async fn turn(
    c: &mut Cached<'_>,
    follows: &Follows,
    elsewhere: &Elsewhere,
    (instance, lease_ms): (&str, i64),
) -> Result<Option<Error>> {
    if !follows.any() {
        return Ok(None);
    }
    let sessions = follows.sessions();
    let mut keys: Vec<String> = sessions.iter().map(|s| s.1.clone()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut failed = None;
    if elsewhere.announce_due(&keys, crate::lease::now(), lease_ms / 3) {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let payload = announcement(instance, &refs, lease_ms);
        let schema = c.schema();
        failed = notify(c, schema.as_str(), &payload).await.err();
    }
    let heads = heads(c, &sessions).await?;
    follows.heads(&heads);
    follows.tell();
    Ok(failed)
}

/// What the listener does with a followers' payload: `Some(None)` for an announcement (kept
/// for a lease length, `here`: this store's instance and lease length; its own ignored),
/// `Some(Some(hint))` for another host's question when sessions are followed here (the turn
/// it asks for announces them), `None` for any other payload.
pub(crate) fn hint_of(
    payload: &str,
    follows: &Follows,
    elsewhere: &Elsewhere,
    (instance, lease_ms): (&str, i64),
) -> Option<Option<Hint>> {
    if let Some((from, a, valid_ms)) = announced(payload) {
        if from.as_deref() != Some(instance) {
            // Kept for the announcer's lease length: it announces again every third of it,
            // however short this host's own is.
            elsewhere.heard(a, crate::lease::now() + valid_ms.unwrap_or(lease_ms));
        }
        return Some(None);
    }
    let from = asked(payload)?;
    if from.as_deref() == Some(instance) || !follows.any() {
        return Some(None);
    }
    elsewhere.ask();
    Some(Some(Hint::Watchers(Vec::new())))
}

/// The heads of `sessions` (agent, key), (agent, key, head); sessions without one left out.
pub(crate) async fn heads(
    c: &mut Cached<'_>,
    sessions: &[(String, String)],
) -> Result<Vec<(String, String, i64)>> {
    if sessions.is_empty() {
        return Ok(Vec::new());
    }
    let agents: Vec<&str> = sessions.iter().map(|s| s.0.as_str()).collect();
    let keys: Vec<&str> = sessions.iter().map(|s| s.1.as_str()).collect();
    let st = c.prepare(HEADS).await?;
    let rows = c.client.query(&st, &[&agents, &keys]).await.map_err(db)?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect())
}

/// What an announcement names: the sessions followed on its host, or every session (its list
/// would not fit a notification).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Announced {
    /// These session keys.
    Keys(Vec<String>),
    /// Every session.
    All,
}

/// The announcement of the sessions followed on `instance`'s host:
/// `{"i":"<instance>","f":["<session key>",…]}`, or `"f":"*"` when it would not fit.
pub(crate) fn announcement(instance: &str, keys: &[&str], lease_ms: i64) -> String {
    let text = serde_json::json!({ "i": instance, "f": keys, "l": lease_ms }).to_string();
    if text.len() <= MAX_PAYLOAD {
        text
    } else {
        serde_json::json!({ "i": instance, "f": "*", "l": lease_ms }).to_string()
    }
}

/// The announcement a payload carries, with its sender and how long it holds (its sender's
/// lease length; absent from a host that did not say), or `None` for any other payload.
pub(crate) fn announced(payload: &str) -> Option<(Option<String>, Announced, Option<i64>)> {
    let v = serde_json::from_str::<serde_json::Value>(payload).ok()?;
    let f = v.get("f")?;
    let from = v.get("i").and_then(|i| i.as_str()).map(str::to_owned);
    let keys: Option<Vec<String>> = f
        .as_array()
        .and_then(|l| l.iter().map(|k| k.as_str().map(str::to_owned)).collect());
    let valid_ms = v
        .get("l")
        .and_then(serde_json::Value::as_i64)
        .filter(|l| *l > 0);
    Some((from, keys.map_or(Announced::All, Announced::Keys), valid_ms))
}

/// The question a listener asks when it (re)connects: every host that follows sessions
/// announces them at once (`{"i":"<instance>","q":"f"}`), so a host that connects later does
/// not wait for the next announcement.
pub(crate) fn question(instance: &str) -> String {
    serde_json::json!({ "i": instance, "q": "f" }).to_string()
}

/// The sender of a [`question`], or `None` for any other payload.
pub(crate) fn asked(payload: &str) -> Option<Option<String>> {
    let v = serde_json::from_str::<serde_json::Value>(payload).ok()?;
    if v.get("q")?.as_str()? != "f" {
        return None;
    }
    Some(v.get("i").and_then(|i| i.as_str()).map(str::to_owned))
}

/// A commit's hint naming the watchers of the notices it opened and the sessions it wrote
/// that another host follows (`"s"`, left out when none); `"w":"*"` when it would not fit.
pub(crate) fn hint_payload(instance: &str, watchers: &[&str], sessions: &[&str]) -> String {
    if sessions.is_empty() {
        return listen::payload(instance, watchers);
    }
    let text = serde_json::json!({ "i": instance, "w": watchers, "s": sessions }).to_string();
    if text.len() <= MAX_PAYLOAD {
        text
    } else {
        serde_json::json!({ "i": instance, "w": "*" }).to_string()
    }
}

/// The sessions other hosts follow, as their announcements said, each until its announcement
/// expires (one lease length: a host that stops announcing is forgotten), and what this host
/// announced last.
#[derive(Default)]
pub(crate) struct Elsewhere {
    keys: Mutex<HashMap<String, i64>>,
    all_until: AtomicI64,
    // The keys announced last, sorted, and when.
    announced: Mutex<(Vec<String>, i64)>,
    // Another host asked: announce at the next turn, due or not.
    asked: AtomicBool,
}

impl Elsewhere {
    /// An announcement from another host, valid until `until`.
    pub(crate) fn heard(&self, a: Announced, until: i64) {
        match a {
            Announced::All => {
                self.all_until.fetch_max(until, Ordering::AcqRel);
            }
            Announced::Keys(keys) => {
                let mut m = self.keys.lock();
                for k in keys {
                    m.insert(k, until);
                }
            }
        }
    }

    /// Another host asked who follows what ([`question`]).
    pub(crate) fn ask(&self) {
        self.asked.store(true, Ordering::Release);
    }

    /// The sessions of `written` that another host follows at `now`. Cheap when nobody
    /// announced: one load and one lock.
    pub(crate) fn named<'a>(&self, written: &[&'a str], now: i64) -> Vec<&'a str> {
        if written.is_empty() {
            return Vec::new();
        }
        if self.all_until.load(Ordering::Acquire) > now {
            let mut all = written.to_vec();
            all.sort_unstable();
            all.dedup();
            return all;
        }
        let mut m = self.keys.lock();
        if m.is_empty() {
            return Vec::new();
        }
        m.retain(|_, until| *until > now);
        let mut out: Vec<&str> = written
            .iter()
            .copied()
            .filter(|k| m.contains_key(*k))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// True when this host should announce `keys` (sorted, deduplicated) at `now`: they
    /// changed since the last announcement, or `every` ms passed.
    pub(crate) fn announce_due(&self, keys: &[String], now: i64, every: i64) -> bool {
        let asked = self.asked.swap(false, Ordering::AcqRel);
        let mut a = self.announced.lock();
        if !asked && a.0 == keys && now - a.1 < every {
            return false;
        }
        *a = (keys.to_vec(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_and_hints_name_sessions() {
        let a = announcement("i1", &["agent:main:x"], 180_000);
        assert_eq!(a, r#"{"i":"i1","f":["agent:main:x"],"l":180000}"#);
        assert_eq!(
            announced(&a),
            Some((
                Some("i1".into()),
                Announced::Keys(vec!["agent:main:x".into()]),
                Some(180_000)
            ))
        );
        assert_eq!(
            announced(r#"{"i":"i1","f":["k"]}"#),
            Some((Some("i1".into()), Announced::Keys(vec!["k".into()]), None))
        );
        assert_eq!(announced(r#"{"i":"i1","w":[]}"#), None);
        let long: Vec<String> = (0..500).map(|i| format!("agent:main:s{i:04}")).collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        assert_eq!(
            announced(&announcement("i1", &refs, 3_000)),
            Some((Some("i1".into()), Announced::All, Some(3_000)))
        );
        assert_eq!(
            hint_payload("i1", &["w"], &[]),
            listen::payload("i1", &["w"])
        );
        let h = hint_payload("i1", &[], &["agent:main:x"]);
        assert_eq!(h, r#"{"i":"i1","w":[],"s":["agent:main:x"]}"#);
        assert_eq!(listen::parse(&h).1, listen::Hint::Watchers(Vec::new()));
    }

    #[test]
    fn sessions_followed_elsewhere_expire_and_announcements_repeat_when_due() {
        let e = Elsewhere::default();
        assert!(e.named(&["a", "b"], 10).is_empty());
        e.heard(Announced::Keys(vec!["b".into()]), 100);
        assert_eq!(e.named(&["a", "b", "b"], 50), vec!["b"]);
        assert!(e.named(&["b"], 100).is_empty());
        e.heard(Announced::All, 200);
        assert_eq!(e.named(&["c", "a"], 150), vec!["a", "c"]);
        assert!(e.named(&["c"], 200).is_empty());
        let keys = vec!["k".to_owned()];
        assert!(e.announce_due(&keys, 0, 300));
        assert!(!e.announce_due(&keys, 299, 300));
        assert!(e.announce_due(&keys, 300, 300));
        assert!(e.announce_due(&["k".to_owned(), "l".to_owned()], 301, 300));
        assert!(!e.announce_due(&["k".to_owned(), "l".to_owned()], 302, 300));
        e.ask();
        assert!(e.announce_due(&["k".to_owned(), "l".to_owned()], 303, 300));
        assert_eq!(asked(&question("i2")), Some(Some("i2".into())));
        assert_eq!(asked(r#"{"i":"i2","w":[]}"#), None);
        assert_eq!(listen::parse(&question("i2")).1, listen::Hint::All);
    }

    #[test]
    fn an_announcement_is_kept_for_its_senders_lease_not_the_hearers() {
        // The hearer polls every 200 ms (a lease of 1 s), the follower's host every minute (it
        // announces again every 60 s): what it announced must hold until then.
        let (follows, e) = (Follows::default(), Elsewhere::default());
        let here = ("hearer", 1_000);
        let said = announcement("follower", &["agent:main:x"], 180_000);
        assert_eq!(hint_of(&said, &follows, &e, here), Some(None));
        let now = crate::lease::now();
        assert_eq!(
            e.named(&["agent:main:x"], now + 59_000),
            vec!["agent:main:x"]
        );
        assert!(e.named(&["agent:main:x"], now + 181_000).is_empty());
        // A host that does not say how long: the hearer's own lease.
        let e = Elsewhere::default();
        let old = r#"{"i":"follower","f":["agent:main:x"]}"#;
        assert_eq!(hint_of(old, &follows, &e, here), Some(None));
        assert!(e
            .named(&["agent:main:x"], crate::lease::now() + 2_000)
            .is_empty());
    }
}
