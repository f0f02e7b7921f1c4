//! Results that cross the boundary many at a time (`changesSince`'s events, `stateVersions`,
//! `drain`/`peek`'s notices) or on every turn (`record`), packed for the TypeScript layer.
//!
//! Objects made through Node-API grow one property at a time, which costs about as much per
//! event as reading it from SQLite; object literals in JavaScript cost a fraction of that. So
//! the rows go out as one string plus one `Float64Array` (lengths in UTF-16 units, numbers,
//! flags) and `lib/packed.ts` builds the objects. The layout is defined by the constants below
//! and mirrored by `lib/packed.ts`; `packedLayout()` hands these values to the Jest test that
//! checks the two agree.

use napi::bindgen_prelude::{Either, Latin1String, Utf16String};
use napi_derive::napi;
use session_awareness_core::QueueSignal;
use session_awareness_core::{
    ChangeEvent, ChangesRef, EventRef, ForeignEvent, ForeignPayload, Notice, StateEvent,
};

use crate::numbers::Numbers;

/// Numbers per event row of [`PackedRows`].
pub const EVENT_STRIDE: u32 = 12;
/// Numbers per `stateVersions` row (`src/versions.rs`).
pub const VERSION_STRIDE: u32 = 4;
/// The record input's string fields in its packed text (`src/calls.rs`), in order:
/// `sessionKey`, `agentId`, `sessionId`, `kind`, `actorType`, `actorId`, `runId`, `summary`,
/// the payload's JSON text and `dedupeKey`.
pub const RECORD_STRINGS: u32 = 10;
/// UTF-16 units before each ref's strings in the refs string of `stateVersions`
/// (`src/versions.rs`).
pub const REF_SLOTS: u32 = 4;
/// Numbers per notice row.
pub const NOTICE_STRIDE: u32 = 5;
/// A length slot of a row: the field is absent.
pub const ABSENT: i32 = -1;
/// A length slot of a row: the same value as the row before (nothing in the text).
pub const SAME: i32 = -2;
/// Length slots at the head of a packed single event.
pub const EVENT_SLOTS: u32 = 11;
/// A length slot of a packed single event: the field is absent.
pub const EVENT_SLOT_ABSENT: u32 = 0xffff;

/// The packed layout's constants, for the test that checks `lib/packed.ts` against them.
#[napi(object, object_from_js = false)]
pub struct PackedLayout {
    /// [`EVENT_STRIDE`].
    pub event_stride: u32,
    /// [`VERSION_STRIDE`].
    pub version_stride: u32,
    /// [`NOTICE_STRIDE`].
    pub notice_stride: u32,
    /// [`ABSENT`].
    pub absent: i32,
    /// [`SAME`].
    pub same: i32,
    /// [`EVENT_SLOTS`].
    pub event_slots: u32,
    /// [`EVENT_SLOT_ABSENT`].
    pub event_slot_absent: u32,
    /// The order in which a packed single event's fields follow its slots, as slot indexes.
    pub event_field_order: Vec<u32>,
    /// The first signal word when nothing is queued ([`QueueSignal::EMPTY`]).
    pub signal_empty: i32,
    /// UTF-16 units before each ref of a packed `stateVersions` input
    /// ([`REF_SLOTS`]).
    pub ref_slots: u32,
    /// The string fields of a packed record input ([`RECORD_STRINGS`]).
    pub record_strings: u32,
}

/// The slots of a packed single event: session key, agent, kind, actor type, actor id, run
/// id, session id, summary, the digits of `sequence`, of `occurredAt`, the payload JSON.
/// The numbers come first in the text so the built object keeps its documented key order.
const EVENT_FIELD_ORDER: [usize; 11] = [8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 10];

/// The constants of the packed layout.
#[napi]
pub fn packed_layout() -> PackedLayout {
    PackedLayout {
        event_stride: EVENT_STRIDE,
        version_stride: VERSION_STRIDE,
        notice_stride: NOTICE_STRIDE,
        absent: ABSENT,
        same: SAME,
        event_slots: EVENT_SLOTS,
        event_slot_absent: EVENT_SLOT_ABSENT,
        event_field_order: EVENT_FIELD_ORDER.iter().map(|&i| i as u32).collect(),
        signal_empty: QueueSignal::EMPTY,
        ref_slots: REF_SLOTS,
        record_strings: RECORD_STRINGS,
    }
}

/// Rows packed as text and numbers; what each row holds depends on the call.
#[napi(object, object_from_js = false)]
pub struct PackedRows {
    /// The rows' strings, back to back.
    #[napi(ts_type = "string")]
    pub text: Either<Latin1String, String>,
    /// The rows' numbers and string lengths (memory V8 owns: `src/numbers.rs`).
    #[napi(ts_type = "Float64Array")]
    pub numbers: Numbers,
    /// Event rows only: every present payload (an object, or a foreign row's payload text as a
    /// JSON string), as one JSON array text; null when none.
    pub payloads: Option<String>,
}

/// The packed result of `changesSince`.
#[napi(object, object_from_js = false)]
pub struct PackedChanges {
    /// The event rows.
    pub rows: PackedRows,
    /// The session's state version.
    pub state_version: i64,
    /// More events exist past `limit`.
    pub truncated: bool,
    /// The smallest retained sequence (see `StateChanges`).
    pub earliest_available_sequence: i64,
    /// `after` predates retained history.
    pub history_gap: bool,
}

/// One event, packed: a string for the usual event, rows for one with a string too long for
/// a slot.
pub type PackedEvent = Either<Utf16String, PackedRows>;

/// Collects the text and numbers of rows.
pub(crate) struct Packer {
    text: String,
    m: Vec<f64>,
}

impl Packer {
    pub(crate) fn with_capacity(numbers: usize) -> Self {
        Packer {
            text: String::with_capacity(numbers * 16),
            m: Vec::with_capacity(numbers),
        }
    }

    pub(crate) fn num(&mut self, v: f64) {
        self.m.push(v);
    }

    /// Appends `s` and records its length in UTF-16 units (what `String.prototype.slice`
    /// counts).
    pub(crate) fn text(&mut self, s: &str) {
        self.text.push_str(s);
        let units = if s.is_ascii() {
            s.len()
        } else {
            s.encode_utf16().count()
        };
        self.m.push(units as f64);
    }

    pub(crate) fn finish(self, payloads: Option<String>) -> PackedRows {
        // ASCII is Latin-1 too, and V8 copies Latin-1 without decoding it.
        let text = if self.text.is_ascii() {
            Either::A(Latin1String::from(self.text))
        } else {
            Either::B(self.text)
        };
        PackedRows {
            text,
            numbers: Numbers(self.m),
            payloads,
        }
    }
}

/// What a payload slot of an event row says.
const PAYLOAD_NONE: f64 = 0.0;
/// The next entry of `payloads` is the row's `payload`.
const PAYLOAD_OBJECT: f64 = 1.0;
/// The next entry of `payloads` is a JSON string: the row's `payloadText`.
const PAYLOAD_TEXT: f64 = 2.0;

/// The fields of one event row, borrowed from a stored or a foreign event.
struct RowView<'a> {
    sequence: i64,
    occurred_at: i64,
    strings: [&'a str; 4],
    ids: [Option<&'a str>; 3],
    summary: &'a str,
    payload: Payload<'a>,
    foreign: u16,
}

enum Payload<'a> {
    None,
    Object(&'a str),
    Text(&'a str),
}

impl<'a> RowView<'a> {
    fn stored(e: &'a StateEvent) -> Self {
        RowView {
            sequence: e.sequence,
            occurred_at: e.occurred_at,
            strings: [
                &e.session_key,
                &e.agent_id,
                e.kind.as_str(),
                e.actor_type.as_str(),
            ],
            ids: [
                e.actor_id.as_deref(),
                e.run_id.as_deref(),
                e.session_id.as_deref(),
            ],
            summary: &e.summary,
            payload: payload_json(e).map_or(Payload::None, Payload::Object),
            foreign: 0,
        }
    }

    fn of(e: &'a ChangeEvent) -> Self {
        match e {
            ChangeEvent::Stored(e) => Self::stored(e),
            ChangeEvent::Foreign(f) => Self::foreign(f),
        }
    }

    fn lent(e: EventRef<'a>) -> Self {
        match e {
            EventRef::Stored(e) => Self::stored(e),
            EventRef::Foreign(f) => Self::foreign(f),
        }
    }

    fn foreign(f: &'a ForeignEvent) -> Self {
        RowView {
            sequence: f.sequence,
            occurred_at: f.occurred_at,
            strings: [&f.session_key, &f.agent_id, &f.kind, &f.actor_type],
            ids: [
                f.actor_id.as_deref(),
                f.run_id.as_deref(),
                f.session_id.as_deref(),
            ],
            summary: &f.summary,
            payload: match &f.payload {
                ForeignPayload::None => Payload::None,
                ForeignPayload::Object(json) => Payload::Object(json),
                ForeignPayload::Text(text) => Payload::Text(text),
            },
            foreign: f.foreign.bits(),
        }
    }
}

/// Event rows: [`EVENT_STRIDE`] numbers per event (sequence, occurredAt, the lengths of
/// session key, agent, kind, actor type ([`SAME`] when equal to the row before), of actor id,
/// run id, session id ([`ABSENT`] when absent), of the summary, then what follows in
/// `payloads` (0 nothing, 1 the payload object, 2 a foreign row's payload text as a JSON
/// string), then the mask of the row's foreign fields (0 for a row the store wrote)).
pub fn events(events: &[ChangeEvent]) -> PackedRows {
    rows(events.iter().map(RowView::of), events.len())
}

/// Event rows of events the store wrote (a scan's records), as [`events`] packs them.
pub fn stored_events(events: &[StateEvent]) -> PackedRows {
    rows(events.iter().map(RowView::stored), events.len())
}

fn rows<'a>(views: impl Iterator<Item = RowView<'a>>, len: usize) -> PackedRows {
    let mut p = Packer::with_capacity(len * EVENT_STRIDE as usize);
    let mut payloads = String::from("[");
    let mut prev: Option<[&str; 4]> = None;
    for e in views {
        p.num(e.sequence as f64);
        p.num(e.occurred_at as f64);
        for (i, s) in e.strings.into_iter().enumerate() {
            if prev.is_some_and(|x| x[i] == s) {
                p.num(f64::from(SAME));
            } else {
                p.text(s);
            }
        }
        for v in e.ids {
            match v {
                Some(v) => p.text(v),
                None => p.num(f64::from(ABSENT)),
            }
        }
        p.text(e.summary);
        let mut push = |json: &str| {
            if payloads.len() > 1 {
                payloads.push(',');
            }
            payloads.push_str(json);
        };
        match e.payload {
            Payload::None => p.num(PAYLOAD_NONE),
            Payload::Object(json) => {
                push(json);
                p.num(PAYLOAD_OBJECT);
            }
            Payload::Text(text) => {
                push(&serde_json::to_string(text).unwrap_or_default());
                p.num(PAYLOAD_TEXT);
            }
        }
        p.num(f64::from(e.foreign));
        prev = Some(e.strings);
    }
    payloads.push(']');
    p.finish((payloads.len() > 2).then_some(payloads))
}

/// One event as a string: [`EVENT_SLOTS`] UTF-16 length slots ([`EVENT_SLOT_ABSENT`] for an
/// absent field), then the fields in [`EVENT_FIELD_ORDER`]. An event with a field too long for
/// a slot goes out as one event row instead.
pub fn event(e: &StateEvent) -> PackedEvent {
    let sequence = e.sequence.to_string();
    let occurred_at = e.occurred_at.to_string();
    let fields = [
        Some(e.session_key.as_str()),
        Some(e.agent_id.as_str()),
        Some(e.kind.as_str()),
        Some(e.actor_type.as_str()),
        e.actor_id.as_deref(),
        e.run_id.as_deref(),
        e.session_id.as_deref(),
        Some(e.summary.as_str()),
        Some(sequence.as_str()),
        Some(occurred_at.as_str()),
        payload_json(e),
    ];
    let slots = EVENT_SLOTS as usize;
    let mut text: Vec<u16> = Vec::with_capacity(slots + 160);
    text.resize(slots, EVENT_SLOT_ABSENT as u16);
    for i in EVENT_FIELD_ORDER {
        if let Some(f) = fields[i] {
            let start = text.len();
            text.extend(f.encode_utf16());
            match u16::try_from(text.len() - start) {
                Ok(len) if u32::from(len) < EVENT_SLOT_ABSENT => text[i] = len,
                _ => return Either::B(rows(std::iter::once(RowView::stored(e)), 1)),
            }
        }
    }
    Either::A(Utf16String::from(text))
}

/// The `changesSince` result, from the answer lent by the store (the events the read cache
/// holds are packed where they are, not copied first).
pub fn changes(c: &ChangesRef<'_>) -> PackedChanges {
    PackedChanges {
        rows: rows(c.events().map(RowView::lent), c.len()),
        state_version: c.state_version,
        truncated: c.truncated,
        earliest_available_sequence: c.earliest_available_sequence,
        history_gap: c.history_gap,
    }
}

/// Notice rows of one watcher: the lengths of the target key, then `changesSince`, the
/// lengths of the text, the context key and the scope ([`ABSENT`] without one).
pub fn notices(notices: &[Notice]) -> PackedRows {
    let mut p = Packer::with_capacity(notices.len() * NOTICE_STRIDE as usize);
    for n in notices {
        p.text(&n.target_key);
        p.num(n.changes_since as f64);
        p.text(&n.text);
        p.text(&n.context_key);
        match &n.scope {
            Some(s) => p.text(s),
            None => p.num(f64::from(ABSENT)),
        }
    }
    p.finish(None)
}

/// The stored payload if it is JSON, else `None` (only another writer could store such a row;
/// it was always left out). Checked without building it.
fn payload_json(e: &StateEvent) -> Option<&str> {
    let json = e.payload_json.as_deref()?;
    serde_json::from_str::<&serde_json::value::RawValue>(json)
        .ok()
        .map(|_| json)
}
