//! The LISTEN/NOTIFY hint (docs/postgres.md#notices): after a data transaction commits, the
//! store sends one notification naming the watchers whose notices it opened or consumed, on a
//! channel of its schema; every host listens on a connection of its own and catches those
//! watchers up from their cursor rows. A notification is only a hint: it is lost while a
//! listener is disconnected, and the rows stay the truth ([`super::catchup`]).
//!
//! **Decision:** the channel is the schema's name (a plain identifier of at most 63 bytes,
//! so it needs no quoting and is never truncated), and the payload is JSON,
//! `{"i":"<instance>","w":["<watcher>",…]}`; one that would not fit PostgreSQL's 8,000 bytes
//! is sent as `{"i":"<instance>","w":"*"}`: catch up every served watcher. Followers add a
//! member (`"s"`, the sessions written that another host follows) and a payload of their own
//! (`"f"`, the sessions a host follows), both read in [`super::follow`].

use std::future::poll_fn;

use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, Connection};

use super::cursors::db;
use crate::error::Result;

/// PostgreSQL refuses a payload of 8,000 bytes or more.
pub(crate) const MAX_PAYLOAD: usize = 7999;

/// What a notification asks of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hint {
    /// Catch these watchers up.
    Watchers(Vec<String>),
    /// Catch every served watcher up.
    All,
}

/// The payload naming `watchers`, sent by `instance`: the catch-everything hint when it
/// would be too long.
pub(crate) fn payload(instance: &str, watchers: &[&str]) -> String {
    let text = serde_json::json!({ "i": instance, "w": watchers }).to_string();
    if text.len() <= MAX_PAYLOAD {
        text
    } else {
        serde_json::json!({ "i": instance, "w": "*" }).to_string()
    }
}

/// Reads a payload: who sent it and what it asks. Anything unreadable asks for everything.
pub(crate) fn parse(payload: &str) -> (Option<String>, Hint) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(payload) else {
        return (None, Hint::All);
    };
    let from = v.get("i").and_then(|i| i.as_str()).map(str::to_owned);
    let hint = match v.get("w").and_then(|w| w.as_array()) {
        Some(list) => {
            let named: Option<Vec<String>> =
                list.iter().map(|w| w.as_str().map(str::to_owned)).collect();
            named.map_or(Hint::All, Hint::Watchers)
        }
        None => Hint::All,
    };
    (from, hint)
}

/// Drives a listener's connection until it ends (it failed, or its client was dropped),
/// handing the payloads of its notifications to `hints`. Queries on its client keep working
/// meanwhile: polling for messages also runs them. Spawned on the core runtime.
pub(crate) async fn forward<S, T>(mut conn: Connection<S, T>, hints: mpsc::UnboundedSender<String>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    loop {
        match poll_fn(|cx| conn.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notification(n))) => {
                if hints.send(n.payload().to_owned()).is_err() {
                    return;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return,
        }
    }
}

/// The `application_name` of a store's listener connection: the store's own (the URL's, or
/// `session-awareness`) followed by ` listener`, so an operator can tell it in
/// `pg_stat_activity`.
pub(crate) fn application_name(own: Option<&str>) -> String {
    format!("{} listener", own.unwrap_or("session-awareness"))
}

/// Starts listening on `channel` on the listener's client.
pub(crate) async fn listen(c: &Client, channel: &str) -> Result<()> {
    c.batch_execute(&format!("LISTEN {channel}"))
        .await
        .map_err(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_watchers_or_everything() {
        let p = payload("i1", &["agent:main:main", "agent:x:main"]);
        assert_eq!(p, r#"{"i":"i1","w":["agent:main:main","agent:x:main"]}"#);
        assert_eq!(
            parse(&p),
            (
                Some("i1".into()),
                Hint::Watchers(vec!["agent:main:main".into(), "agent:x:main".into()])
            )
        );
        let long: Vec<String> = (0..500).map(|i| format!("agent:w{i:04}:main")).collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        let p = payload("i1", &refs);
        assert!(p.len() < 8000);
        assert_eq!(parse(&p), (Some("i1".into()), Hint::All));
        assert_eq!(parse("not json"), (None, Hint::All));
        assert_eq!(parse(r#"{"w":[1]}"#), (None, Hint::All));
    }
}
