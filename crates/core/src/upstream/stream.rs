//! Incremental classification of one transcript row of any length in bounded memory.
//!
//! [`StreamClassifier`] is a byte-at-a-time JSON state machine that validates the whole row
//! exactly as `serde_json` would (strict UTF-8, escapes and surrogate pairs, number grammar
//! and range, a nesting limit of 127) while remembering only what the rules in
//! `classify.rs` look at: the top-level `type`, `isMeta`, `isSidechain`, `message.role`,
//! the shape of `message.content`, and at most `text_cap` bytes of human text. Its memory is
//! `text_cap` bytes of text plus a 127-entry nesting stack, whatever the row's length.

use super::classify::{
    cap_text, decide, BlockKind, ContentShape, LineClass, MalformedLine, RowShape, RowType, Verdict,
};
use super::token::{NumEvent, NumScanner, SmallStr, StrDecoder, StrEvent};

/// Deepest nesting `serde_json` accepts: its recursion limit fails on the 128th level.
const MAX_DEPTH: usize = 127;

/// What a container is, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Root,
    Message,
    Content,
    Block,
    OtherObject,
    OtherArray,
}

impl Frame {
    fn is_object(self) -> bool {
        !matches!(self, Frame::Content | Frame::OtherArray)
    }
}

/// The role of the value about to be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Top,
    Ignore,
    Type,
    IsMeta,
    IsSidechain,
    Message,
    Role,
    Content,
    Block,
    BlockType,
    BlockText,
}

/// Where the characters of the current string go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Nowhere,
    Small,
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Before the top-level value.
    Start,
    /// A value must come (after `:`, or after `,` in an array).
    Value,
    /// After `[`.
    ValueOrClose,
    /// After `{`.
    KeyOrClose,
    /// After `,` in an object.
    Key,
    Colon,
    /// After a value inside a container.
    CommaOrClose,
    /// After the top-level value: only whitespace may follow.
    Done,
    Str {
        key: bool,
        sink: Sink,
        decoder: StrDecoder,
    },
    Num(NumScanner),
    Literal {
        word: &'static [u8],
        at: u8,
    },
    Failed,
}

/// The content block being parsed.
#[derive(Debug, Clone, Copy, Default)]
struct BlockState {
    kind: BlockKind,
    text_is_string: bool,
    /// Length of the joined text before this block.
    mark: usize,
    /// Whether this block's text (with its separator) did not fit.
    overflow: bool,
}

/// Classifies one row fed in pieces. Push every byte of the line (without its `'\n'`), then
/// call `finish`; the classifier is then ready for the next line.
#[derive(Debug)]
pub(crate) struct StreamClassifier {
    text_cap: usize,
    lex: Lex,
    stack: Vec<Frame>,
    slot: Slot,
    small: SmallStr,
    top_is_object: bool,
    shape: RowShape,
    /// Candidate human text: the content string, or the text blocks joined so far.
    text: String,
    /// Whether `text` has lost bytes to the cap.
    text_truncated: bool,
    /// Whether the string being captured into `text` has hit the cap.
    capture_overflow: bool,
    block: BlockState,
}

impl StreamClassifier {
    pub(crate) fn new(text_cap: usize) -> Self {
        StreamClassifier {
            text_cap,
            lex: Lex::Start,
            stack: Vec::new(),
            slot: Slot::Top,
            small: SmallStr::default(),
            top_is_object: false,
            shape: RowShape::default(),
            text: String::new(),
            text_truncated: false,
            capture_overflow: false,
            block: BlockState::default(),
        }
    }

    /// Bytes of heap memory held.
    pub(crate) fn heap_capacity(&self) -> usize {
        self.text.capacity() + self.stack.capacity() * std::mem::size_of::<Frame>()
    }

    /// Forgets the line in progress, keeping allocations.
    pub(crate) fn reset(&mut self) {
        self.lex = Lex::Start;
        self.stack.clear();
        self.slot = Slot::Top;
        self.top_is_object = false;
        self.shape = RowShape::default();
        self.text.clear();
        self.text_truncated = false;
        self.capture_overflow = false;
        self.block = BlockState::default();
    }

    /// Feeds the next bytes of the line.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while let Some((&b, rest)) = bytes.split_first() {
            match self.lex {
                Lex::Failed => return,
                Lex::Str { key, sink, decoder } => {
                    let used = self.string_bytes(key, sink, decoder, bytes);
                    bytes = &bytes[used..];
                }
                _ => {
                    self.step(b);
                    bytes = rest;
                }
            }
        }
    }

    /// Consumes string bytes up to and including the closing quote, or all of `bytes`;
    /// returns how many were consumed. Runs of plain characters are taken whole.
    fn string_bytes(
        &mut self,
        key: bool,
        sink: Sink,
        mut decoder: StrDecoder,
        bytes: &[u8],
    ) -> usize {
        let mut at = 0;
        while at < bytes.len() {
            if decoder.is_between_chars() {
                let tail = &bytes[at..];
                let run = tail
                    .iter()
                    .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                    .unwrap_or(tail.len());
                let valid = match std::str::from_utf8(&tail[..run]) {
                    Ok(s) => s,
                    Err(e) => std::str::from_utf8(&tail[..e.valid_up_to()]).unwrap_or_default(),
                };
                if !valid.is_empty() {
                    self.sink_str(sink, valid);
                    at += valid.len();
                    continue;
                }
            }
            let b = bytes[at];
            at += 1;
            match decoder.step(b) {
                StrEvent::Pending => {}
                StrEvent::Char(c) => {
                    let mut buf = [0u8; 4];
                    self.sink_str(sink, c.encode_utf8(&mut buf));
                }
                StrEvent::End => {
                    self.end_string(key);
                    return at;
                }
                StrEvent::Invalid => {
                    self.fail();
                    return at;
                }
            }
        }
        self.lex = Lex::Str { key, sink, decoder };
        at
    }

    /// Ends the line and gives its class, then gets ready for the next line.
    pub(crate) fn finish(&mut self) -> Result<LineClass, MalformedLine> {
        if let Lex::Num(n) = self.lex {
            if n.complete_in_range() {
                self.value_done();
            } else {
                self.lex = Lex::Failed;
            }
        }
        let result = match self.lex {
            Lex::Start => Ok(LineClass::Blank),
            Lex::Done if self.top_is_object => Ok(match decide(&self.shape) {
                Verdict::Passed(class) => class,
                Verdict::Human => LineClass::HumanTurn {
                    text: std::mem::take(&mut self.text),
                    truncated: self.text_truncated,
                },
            }),
            Lex::Done => Err(MalformedLine::NotAnObject),
            _ => Err(MalformedLine::InvalidJson),
        };
        self.reset();
        result
    }

    fn fail(&mut self) {
        self.lex = Lex::Failed;
    }

    fn step(&mut self, b: u8) {
        match self.lex {
            Lex::Failed => {}
            Lex::Start | Lex::Value => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => self.begin_value(b),
            },
            Lex::ValueOrClose => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b']' => self.close(b),
                _ => self.begin_value(b),
            },
            Lex::KeyOrClose | Lex::Key => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'"' => self.begin_string(true, Sink::Small),
                b'}' if self.lex == Lex::KeyOrClose => self.close(b),
                _ => self.fail(),
            },
            Lex::Colon => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b':' => self.lex = Lex::Value,
                _ => self.fail(),
            },
            Lex::CommaOrClose => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b',' => match self.stack.last() {
                    Some(frame) if frame.is_object() => self.lex = Lex::Key,
                    Some(&frame) => {
                        self.slot = element_slot(frame);
                        self.lex = Lex::Value;
                    }
                    None => self.fail(),
                },
                b'}' | b']' => self.close(b),
                _ => self.fail(),
            },
            Lex::Done => {
                if !matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
                    self.fail();
                }
            }
            Lex::Str { key, sink, decoder } => {
                self.string_bytes(key, sink, decoder, &[b]);
            }
            Lex::Num(n) => self.number_byte(n, b),
            Lex::Literal { word, at } => {
                let at = usize::from(at);
                if word.get(at) != Some(&b) {
                    self.fail();
                } else if at + 1 == word.len() {
                    self.value_done();
                } else {
                    self.lex = Lex::Literal {
                        word,
                        at: (at + 1) as u8,
                    };
                }
            }
        }
    }

    /// Starts the value whose first byte is `b`, in the current slot.
    fn begin_value(&mut self, b: u8) {
        let slot = self.slot;
        self.clear_slot(slot);
        match b {
            b'{' => {
                let frame = match slot {
                    Slot::Top => {
                        self.top_is_object = true;
                        Frame::Root
                    }
                    Slot::Message => {
                        self.shape.has_message = true;
                        Frame::Message
                    }
                    Slot::Block => {
                        self.block = BlockState {
                            mark: self.text.len(),
                            ..BlockState::default()
                        };
                        Frame::Block
                    }
                    _ => Frame::OtherObject,
                };
                if self.open(frame) {
                    self.lex = Lex::KeyOrClose;
                }
            }
            b'[' => {
                let frame = if slot == Slot::Content {
                    self.shape.content = ContentShape::Blocks {
                        tool_result: false,
                        has_text: false,
                    };
                    Frame::Content
                } else {
                    Frame::OtherArray
                };
                if self.open(frame) {
                    self.slot = element_slot(frame);
                    self.lex = Lex::ValueOrClose;
                }
            }
            b'"' => {
                let sink = match slot {
                    Slot::Type | Slot::Role | Slot::BlockType => Sink::Small,
                    Slot::Content => {
                        self.shape.content = ContentShape::Text;
                        self.capture_overflow = false;
                        Sink::Text
                    }
                    Slot::BlockText => {
                        self.capture_overflow = self.text_truncated;
                        if matches!(
                            self.shape.content,
                            ContentShape::Blocks { has_text: true, .. }
                        ) {
                            self.sink_str(Sink::Text, "\n");
                        }
                        Sink::Text
                    }
                    _ => Sink::Nowhere,
                };
                self.begin_string(false, sink);
            }
            b't' | b'f' | b'n' => {
                let word: &'static [u8] = match b {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if b == b't' {
                    match slot {
                        Slot::IsMeta => self.shape.is_meta = true,
                        Slot::IsSidechain => self.shape.is_sidechain = true,
                        _ => {}
                    }
                }
                self.lex = Lex::Literal { word, at: 1 };
            }
            _ => match NumScanner::start(b) {
                Some(n) => self.lex = Lex::Num(n),
                None => self.fail(),
            },
        }
    }

    /// A later value for a key replaces the earlier one: forget what the earlier one set.
    fn clear_slot(&mut self, slot: Slot) {
        match slot {
            Slot::Top => self.top_is_object = false,
            Slot::Type => self.shape.row_type = RowType::Other,
            Slot::IsMeta => self.shape.is_meta = false,
            Slot::IsSidechain => self.shape.is_sidechain = false,
            Slot::Message => {
                self.shape.has_message = false;
                self.shape.role_is_user = false;
                self.clear_content();
            }
            Slot::Role => self.shape.role_is_user = false,
            Slot::Content => self.clear_content(),
            Slot::BlockType => self.block.kind = BlockKind::Other,
            Slot::BlockText => {
                self.text.truncate(self.block.mark);
                self.block.text_is_string = false;
                self.block.overflow = false;
            }
            Slot::Block | Slot::Ignore => {}
        }
    }

    fn clear_content(&mut self) {
        self.shape.content = ContentShape::Unusable;
        self.text.clear();
        self.text_truncated = false;
    }

    /// Enters a container; false (and failed) past the nesting limit.
    fn open(&mut self, frame: Frame) -> bool {
        if self.stack.len() >= MAX_DEPTH {
            self.fail();
            return false;
        }
        self.stack.push(frame);
        true
    }

    fn close(&mut self, b: u8) {
        let Some(&frame) = self.stack.last() else {
            return self.fail();
        };
        if frame.is_object() != (b == b'}') {
            return self.fail();
        }
        self.stack.pop();
        if frame == Frame::Block {
            self.end_block();
        }
        self.value_done();
    }

    fn end_block(&mut self) {
        let block = self.block;
        let ContentShape::Blocks {
            tool_result,
            has_text,
        } = &mut self.shape.content
        else {
            return;
        };
        if block.kind == BlockKind::ToolResult {
            *tool_result = true;
        }
        if block.kind == BlockKind::Text && block.text_is_string {
            *has_text = true;
            self.text_truncated |= block.overflow;
        } else {
            self.text.truncate(block.mark);
        }
    }

    /// After any complete value.
    fn value_done(&mut self) {
        self.lex = if self.stack.is_empty() {
            Lex::Done
        } else {
            Lex::CommaOrClose
        };
    }

    fn begin_string(&mut self, key: bool, sink: Sink) {
        if sink == Sink::Small {
            self.small = SmallStr::default();
        }
        self.lex = Lex::Str {
            key,
            sink,
            decoder: StrDecoder::NEW,
        };
    }

    fn end_string(&mut self, key: bool) {
        if key {
            let frame = self.stack.last().copied().unwrap_or(Frame::OtherObject);
            self.slot = key_slot(frame, self.small.as_str().unwrap_or(""));
            self.lex = Lex::Colon;
            return;
        }
        let small = self.small.as_str().unwrap_or("");
        match self.slot {
            Slot::Type => self.shape.row_type = RowType::from_name(small),
            Slot::Role => self.shape.role_is_user = small == "user",
            Slot::BlockType => self.block.kind = BlockKind::from_name(small),
            Slot::Content => self.text_truncated = self.capture_overflow,
            Slot::BlockText => {
                self.block.text_is_string = true;
                self.block.overflow = self.capture_overflow;
            }
            _ => {}
        }
        self.value_done();
    }

    fn sink_str(&mut self, sink: Sink, s: &str) {
        match sink {
            Sink::Nowhere => {}
            Sink::Small => self.small.push_str(s),
            Sink::Text => {
                if self.capture_overflow {
                    return;
                }
                let room = self.text_cap.saturating_sub(self.text.len());
                let kept = cap_text(s, room);
                if !kept.is_empty() {
                    grow_bounded(&mut self.text, kept.len(), self.text_cap);
                    self.text.push_str(kept);
                }
                if kept.len() < s.len() {
                    self.capture_overflow = true;
                }
            }
        }
    }

    fn number_byte(&mut self, mut n: NumScanner, b: u8) {
        match n.step(b) {
            NumEvent::More => self.lex = Lex::Num(n),
            // The number ended at `b`, which belongs to what follows.
            NumEvent::Ended if n.complete_in_range() => {
                self.value_done();
                self.step(b);
            }
            NumEvent::Ended | NumEvent::Invalid => self.fail(),
        }
    }
}

/// The slot of a value under `key` in an object of kind `frame`.
fn key_slot(frame: Frame, key: &str) -> Slot {
    match (frame, key) {
        (Frame::Root, "type") => Slot::Type,
        (Frame::Root, "isMeta") => Slot::IsMeta,
        (Frame::Root, "isSidechain") => Slot::IsSidechain,
        (Frame::Root, "message") => Slot::Message,
        (Frame::Message, "role") => Slot::Role,
        (Frame::Message, "content") => Slot::Content,
        (Frame::Block, "type") => Slot::BlockType,
        (Frame::Block, "text") => Slot::BlockText,
        _ => Slot::Ignore,
    }
}

/// The slot of each element of an array of kind `frame`.
fn element_slot(frame: Frame) -> Slot {
    if frame == Frame::Content {
        Slot::Block
    } else {
        Slot::Ignore
    }
}

/// Reserves room for `additional` more bytes without letting the capacity pass `cap`
/// (the usual doubling could reach twice the cap).
pub(crate) fn grow_bounded(buf: &mut String, additional: usize, cap: usize) {
    let needed = buf.len() + additional;
    if needed > buf.capacity() {
        let target = needed.max(buf.capacity().saturating_mul(2).min(cap));
        buf.reserve_exact(target - buf.len());
    }
}

#[cfg(test)]
mod tests;
