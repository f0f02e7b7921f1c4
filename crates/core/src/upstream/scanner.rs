//! A streaming, resumable classifier for a JSONL transcript read in chunks.

use super::classify::{classify_line_capped, LineClass, MalformedLine, HUMAN_TEXT_CAP};
use super::stream::StreamClassifier;

/// Default for [`LineScanner::new`]'s `line_cap`: lines up to this many bytes are buffered
/// and parsed whole.
pub const DEFAULT_LINE_CAP: usize = 256 * 1024;

/// One complete, non-blank line found by [`LineScanner::feed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedLine {
    /// Bytes consumed (since the scanner was created or last reset) before the line's first
    /// byte.
    pub start: u64,
    /// Bytes consumed (since the scanner was created or last reset) through and including
    /// the line's `'\n'`.
    pub end: u64,
    /// The line's class, or why it could not be classified.
    pub class: Result<LineClass, MalformedLine>,
}

/// Classifies the lines of a JSONL file fed to it as successive chunks.
///
/// Each `'\n'`-terminated line is classified once its `'\n'` arrives (a `'\r'` before it is
/// part of the line ending); a partial last line stays inside the scanner, already consumed,
/// until a later [`feed`](Self::feed) completes it. Blank lines are skipped silently: they
/// produce no [`ScannedLine`] but still count in [`committed`](Self::committed).
///
/// A line of at most `line_cap` bytes is buffered and parsed whole. A longer line is
/// classified incrementally as its bytes arrive, so one line of any length costs at most
/// `line_cap` bytes of line buffer plus [`HUMAN_TEXT_CAP`] bytes of human text and a small
/// fixed nesting stack (see [`buffer_capacity`](Self::buffer_capacity)); parsing a buffered
/// line also builds its JSON value for a moment. Both ways give the same class for the same
/// line.
///
/// To scan a file from a durable offset `base`: feed the bytes read from
/// `base + consumed()`; persist `base + committed()` (the start of the first unfinished
/// line), which never passes a byte that has not been classified. Keep the scanner between
/// reads so that a line longer than one read progresses across reads instead of starting
/// over; after a restart it starts over from the persisted offset. Call
/// [`reset`](Self::reset) when the file is replaced or truncated.
#[derive(Debug)]
pub struct LineScanner {
    line_cap: usize,
    text_cap: usize,
    consumed: u64,
    line_start: u64,
    /// The partial line, while it is at most `line_cap` bytes.
    buf: Vec<u8>,
    /// Whether the partial line outgrew `line_cap` and is being streamed into `stream`.
    streaming: bool,
    stream: StreamClassifier,
}

impl Default for LineScanner {
    fn default() -> Self {
        LineScanner::new(DEFAULT_LINE_CAP)
    }
}

impl LineScanner {
    /// A scanner that buffers lines of at most `line_cap` bytes (excluding the `'\n'`) and
    /// streams longer ones.
    pub fn new(line_cap: usize) -> Self {
        LineScanner::with_text_cap(line_cap, HUMAN_TEXT_CAP)
    }

    pub(crate) fn with_text_cap(line_cap: usize, text_cap: usize) -> Self {
        LineScanner {
            line_cap,
            text_cap,
            consumed: 0,
            line_start: 0,
            buf: Vec::new(),
            streaming: false,
            stream: StreamClassifier::new(text_cap),
        }
    }

    /// Consumes the next chunk of the file and returns the lines it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<ScannedLine> {
        let mut lines = Vec::new();
        let mut pos = self.consumed;
        self.consumed += chunk.len() as u64;
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let end = pos + i as u64 + 1;
            let class = if !self.streaming && self.buf.is_empty() && i <= self.line_cap {
                // The whole line is in this chunk: parse it in place.
                classify_line_capped(&rest[..i], self.text_cap)
            } else {
                self.absorb(&rest[..i]);
                self.finish_line()
            };
            if class != Ok(LineClass::Blank) {
                lines.push(ScannedLine {
                    start: self.line_start,
                    end,
                    class,
                });
            }
            self.line_start = end;
            pos = end;
            rest = &rest[i + 1..];
        }
        self.absorb(rest);
        lines
    }

    /// Bytes of an incomplete last line already consumed.
    pub fn pending_bytes(&self) -> u64 {
        self.consumed - self.line_start
    }

    /// Bytes consumed through the last complete line (blank lines included): the offset,
    /// relative to where scanning began, up to which every byte has been classified.
    pub fn committed(&self) -> u64 {
        self.line_start
    }

    /// All bytes consumed since the scanner was created or last reset.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Forgets everything consumed, including a partial line; offsets start again at 0.
    pub fn reset(&mut self) {
        self.consumed = 0;
        self.line_start = 0;
        self.buf.clear();
        self.streaming = false;
        self.stream.reset();
    }

    /// Bytes of heap memory held by the scanner's buffers: at most `line_cap` for the line
    /// buffer, plus at most [`HUMAN_TEXT_CAP`] of human text and about 128 bytes of nesting
    /// stack while a long line is streamed.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity() + self.stream.heap_capacity()
    }

    /// Adds bytes of the current (unterminated) line.
    fn absorb(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.streaming {
            self.stream.push(bytes);
        } else if self.buf.len() + bytes.len() <= self.line_cap {
            let needed = self.buf.len() + bytes.len();
            if needed > self.buf.capacity() {
                let target = needed.max(self.buf.capacity().saturating_mul(2).min(self.line_cap));
                self.buf.reserve_exact(target - self.buf.len());
            }
            self.buf.extend_from_slice(bytes);
        } else {
            self.streaming = true;
            self.stream.push(&self.buf);
            self.buf.clear();
            self.stream.push(bytes);
        }
    }

    /// Classifies the current line, whose `'\n'` has arrived.
    fn finish_line(&mut self) -> Result<LineClass, MalformedLine> {
        if self.streaming {
            self.streaming = false;
            self.stream.finish()
        } else {
            let class = classify_line_capped(&self.buf, self.text_cap);
            self.buf.clear();
            class
        }
    }
}

#[cfg(test)]
mod tests;
