//! Byte-at-a-time decoders for JSON strings and numbers, with `serde_json`'s acceptance
//! rules, for the streaming classifier.

/// Progress through an escape sequence inside a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    Backslash,
    /// Inside `\uXXXX`; `high` is a leading surrogate already read.
    Hex {
        digits: u8,
        acc: u16,
        high: Option<u16>,
    },
    /// After a leading surrogate: `\` must follow.
    WantBackslash(u16),
    /// After a leading surrogate and `\`: `u` must follow.
    WantU(u16),
}

/// Progress through a multi-byte UTF-8 sequence: `need` more bytes, the next one in
/// `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Utf8 {
    need: u8,
    code: u32,
    lo: u8,
    hi: u8,
}

/// What one byte inside a string amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrEvent {
    /// Part of an escape or multi-byte sequence still open.
    Pending,
    /// One decoded character.
    Char(char),
    /// The closing quote.
    End,
    /// Not valid here: the line is not JSON.
    Invalid,
}

/// Decodes the bytes of a JSON string after its opening quote, as `serde_json` does into a
/// `String`: strict UTF-8, no raw control characters, the eight short escapes, `\uXXXX`
/// with surrogates only as a leading-then-trailing pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StrDecoder {
    escape: Escape,
    utf8: Utf8,
}

impl StrDecoder {
    pub(crate) const NEW: StrDecoder = StrDecoder {
        escape: Escape::None,
        utf8: Utf8 {
            need: 0,
            code: 0,
            lo: 0x80,
            hi: 0xBF,
        },
    };

    /// Whether no escape or multi-byte sequence is open, so that a run of bytes other than
    /// `"`, `\` and controls may be taken whole once checked as UTF-8.
    pub(crate) fn is_between_chars(&self) -> bool {
        self.escape == Escape::None && self.utf8.need == 0
    }

    pub(crate) fn step(&mut self, b: u8) -> StrEvent {
        if self.utf8.need > 0 {
            if b < self.utf8.lo || b > self.utf8.hi {
                return StrEvent::Invalid;
            }
            self.utf8.code = (self.utf8.code << 6) | u32::from(b & 0x3F);
            self.utf8.need -= 1;
            self.utf8.lo = 0x80;
            self.utf8.hi = 0xBF;
            return if self.utf8.need == 0 {
                scalar(self.utf8.code)
            } else {
                StrEvent::Pending
            };
        }
        match self.escape {
            Escape::None => match b {
                b'"' => StrEvent::End,
                b'\\' => {
                    self.escape = Escape::Backslash;
                    StrEvent::Pending
                }
                0x00..=0x1F => StrEvent::Invalid,
                0x20..=0x7F => StrEvent::Char(char::from(b)),
                _ => match utf8_lead(b) {
                    Some(utf8) => {
                        self.utf8 = utf8;
                        StrEvent::Pending
                    }
                    None => StrEvent::Invalid,
                },
            },
            Escape::Backslash => {
                self.escape = Escape::None;
                StrEvent::Char(match b {
                    b'"' | b'\\' | b'/' => char::from(b),
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        self.escape = Escape::Hex {
                            digits: 0,
                            acc: 0,
                            high: None,
                        };
                        return StrEvent::Pending;
                    }
                    _ => return StrEvent::Invalid,
                })
            }
            Escape::Hex { digits, acc, high } => {
                let Some(digit) = char::from(b).to_digit(16) else {
                    return StrEvent::Invalid;
                };
                let acc = (acc << 4) | digit as u16;
                if digits < 3 {
                    self.escape = Escape::Hex {
                        digits: digits + 1,
                        acc,
                        high,
                    };
                    return StrEvent::Pending;
                }
                self.escape = Escape::None;
                match (high, acc) {
                    (None, 0xDC00..=0xDFFF) => StrEvent::Invalid,
                    (None, 0xD800..=0xDBFF) => {
                        self.escape = Escape::WantBackslash(acc);
                        StrEvent::Pending
                    }
                    (None, _) => scalar(u32::from(acc)),
                    (Some(high), 0xDC00..=0xDFFF) => scalar(
                        0x1_0000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(acc) - 0xDC00),
                    ),
                    (Some(_), _) => StrEvent::Invalid,
                }
            }
            Escape::WantBackslash(high) if b == b'\\' => {
                self.escape = Escape::WantU(high);
                StrEvent::Pending
            }
            Escape::WantU(high) if b == b'u' => {
                self.escape = Escape::Hex {
                    digits: 0,
                    acc: 0,
                    high: Some(high),
                };
                StrEvent::Pending
            }
            Escape::WantBackslash(_) | Escape::WantU(_) => StrEvent::Invalid,
        }
    }
}

fn scalar(code: u32) -> StrEvent {
    char::from_u32(code).map_or(StrEvent::Invalid, StrEvent::Char)
}

/// The state after a UTF-8 lead byte above ASCII, or `None` if `b` cannot start a sequence
/// (continuation bytes, overlong leads `C0`/`C1`, and leads past U+10FFFF).
fn utf8_lead(b: u8) -> Option<Utf8> {
    let (need, code, lo, hi) = match b {
        0xC2..=0xDF => (1, b & 0x1F, 0x80, 0xBF),
        0xE0 => (2, b & 0x0F, 0xA0, 0xBF),
        0xE1..=0xEC | 0xEE | 0xEF => (2, b & 0x0F, 0x80, 0xBF),
        // ED A0..BF would encode a surrogate.
        0xED => (2, b & 0x0F, 0x80, 0x9F),
        0xF0 => (3, b & 0x07, 0x90, 0xBF),
        0xF1..=0xF3 => (3, b & 0x07, 0x80, 0xBF),
        0xF4 => (3, b & 0x07, 0x80, 0x8F),
        _ => return None,
    };
    Some(Utf8 {
        need,
        code: u32::from(code),
        lo,
        hi,
    })
}

/// Where a number is in its grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumPhase {
    Minus,
    Zero,
    Int,
    /// Integer digits past `u64`: each one raises the exponent.
    LongInt,
    Dot,
    Frac,
    /// Fraction digits past `u64`: ignored.
    FracOverflow,
    E,
    ESign,
    ExpDigits,
    /// Exponent digits past `i32`: the value is 0 (an out-of-range one failed on entry).
    ExpOverflow,
}

/// What one byte amounts to for a number in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumEvent {
    /// The byte belongs to the number.
    More,
    /// The byte does not belong to the number, which ended before it; check
    /// [`NumScanner::complete_in_range`].
    Ended,
    /// Not valid here: the line is not JSON.
    Invalid,
}

/// Scans a JSON number, keeping the significand and decimal exponent exactly as
/// `serde_json`'s parser does, so that the same numbers are rejected as out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumScanner {
    phase: NumPhase,
    significand: u64,
    exponent: i32,
    exp_negative: bool,
    exp_value: i32,
}

impl NumScanner {
    /// Starts a number at its first byte, `-` or a digit.
    pub(crate) fn start(b: u8) -> Option<NumScanner> {
        let (phase, significand) = match b {
            b'-' => (NumPhase::Minus, 0),
            b'0' => (NumPhase::Zero, 0),
            b'1'..=b'9' => (NumPhase::Int, u64::from(b - b'0')),
            _ => return None,
        };
        Some(NumScanner {
            phase,
            significand,
            exponent: 0,
            exp_negative: false,
            exp_value: 0,
        })
    }

    pub(crate) fn step(&mut self, b: u8) -> NumEvent {
        let digit = b.wrapping_sub(b'0');
        let is_digit = digit < 10;
        self.phase = match (self.phase, b) {
            (NumPhase::Minus, b'0') => NumPhase::Zero,
            (NumPhase::Minus, b'1'..=b'9') => {
                self.significand = u64::from(digit);
                NumPhase::Int
            }
            (NumPhase::Minus, _) => return NumEvent::Invalid,
            // Only one leading zero.
            (NumPhase::Zero, b'0'..=b'9') => return NumEvent::Invalid,
            (NumPhase::Int, b'0'..=b'9') => match push_digit(self.significand, digit) {
                Some(sig) => {
                    self.significand = sig;
                    NumPhase::Int
                }
                None => {
                    self.exponent = self.exponent.wrapping_add(1);
                    NumPhase::LongInt
                }
            },
            (NumPhase::LongInt, b'0'..=b'9') => {
                self.exponent = self.exponent.wrapping_add(1);
                NumPhase::LongInt
            }
            (NumPhase::Zero | NumPhase::Int | NumPhase::LongInt, b'.') => NumPhase::Dot,
            (NumPhase::Dot | NumPhase::Frac, b'0'..=b'9') => {
                match push_digit(self.significand, digit) {
                    Some(sig) => {
                        self.significand = sig;
                        self.exponent = self.exponent.wrapping_sub(1);
                        NumPhase::Frac
                    }
                    None => NumPhase::FracOverflow,
                }
            }
            (NumPhase::Dot, _) => return NumEvent::Invalid,
            (NumPhase::FracOverflow, b'0'..=b'9') => NumPhase::FracOverflow,
            (
                NumPhase::Zero
                | NumPhase::Int
                | NumPhase::LongInt
                | NumPhase::Frac
                | NumPhase::FracOverflow,
                b'e' | b'E',
            ) => NumPhase::E,
            (NumPhase::E, b'+' | b'-') => {
                self.exp_negative = b == b'-';
                NumPhase::ESign
            }
            (NumPhase::E | NumPhase::ESign, _) if is_digit => {
                self.exp_value = i32::from(digit);
                NumPhase::ExpDigits
            }
            (NumPhase::E | NumPhase::ESign, _) => return NumEvent::Invalid,
            (NumPhase::ExpDigits, b'0'..=b'9') => match self
                .exp_value
                .checked_mul(10)
                .and_then(|v| v.checked_add(i32::from(digit)))
            {
                Some(v) => {
                    self.exp_value = v;
                    NumPhase::ExpDigits
                }
                None if self.significand != 0 && !self.exp_negative => return NumEvent::Invalid,
                None => NumPhase::ExpOverflow,
            },
            (NumPhase::ExpOverflow, b'0'..=b'9') => NumPhase::ExpOverflow,
            _ => return NumEvent::Ended,
        };
        NumEvent::More
    }

    /// Whether the number, ending here, is complete and within `f64` range as `serde_json`
    /// computes it: `significand as f64` multiplied or divided by a power of ten, which
    /// never overflows for a negative exponent or a zero significand.
    pub(crate) fn complete_in_range(&self) -> bool {
        let exponent = match self.phase {
            NumPhase::Minus | NumPhase::Dot | NumPhase::E | NumPhase::ESign => return false,
            NumPhase::Zero | NumPhase::Int | NumPhase::ExpOverflow => return true,
            NumPhase::LongInt | NumPhase::Frac | NumPhase::FracOverflow => self.exponent,
            NumPhase::ExpDigits if self.exp_negative => {
                self.exponent.saturating_sub(self.exp_value)
            }
            NumPhase::ExpDigits => self.exponent.saturating_add(self.exp_value),
        };
        if self.significand == 0 || exponent < 0 {
            return true;
        }
        if exponent > 308 {
            return false;
        }
        // Below 1e280 even u64::MAX times the power stays finite.
        if exponent < 280 {
            return true;
        }
        let power: f64 = format!("1e{exponent}").parse().unwrap_or(f64::INFINITY);
        (self.significand as f64 * power).is_finite()
    }
}

/// `significand * 10 + digit`, unless it overflows `u64`.
fn push_digit(significand: u64, digit: u8) -> Option<u64> {
    significand
        .checked_mul(10)
        .and_then(|v| v.checked_add(u64::from(digit)))
}

/// Room for the longest key or small value the rules compare against (`"isSidechain"`,
/// `"tool_result"`); anything longer matches nothing.
const SMALL_CAP: usize = 16;

/// A short string captured in place, used for keys and for `type`/`role` values.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SmallStr {
    buf: [u8; SMALL_CAP],
    len: usize,
    overflow: bool,
}

impl SmallStr {
    pub(crate) fn push_str(&mut self, s: &str) {
        let end = self.len + s.len();
        if self.overflow || end > SMALL_CAP {
            self.overflow = true;
        } else {
            self.buf[self.len..end].copy_from_slice(s.as_bytes());
            self.len = end;
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        if self.overflow {
            return None;
        }
        std::str::from_utf8(&self.buf[..self.len]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a whole JSON string literal (with its quotes) byte by byte.
    fn decode(literal: &[u8]) -> Option<String> {
        let (&first, rest) = literal.split_first()?;
        if first != b'"' {
            return None;
        }
        let mut d = StrDecoder::NEW;
        let mut out = String::new();
        for (i, &b) in rest.iter().enumerate() {
            match d.step(b) {
                StrEvent::Pending => {}
                StrEvent::Char(c) => out.push(c),
                StrEvent::End => return (i + 1 == rest.len()).then_some(out),
                StrEvent::Invalid => return None,
            }
        }
        None
    }

    /// Scans a whole number token byte by byte; `Some(in range)` if the grammar holds.
    fn scan_number(token: &[u8]) -> bool {
        let Some((&first, rest)) = token.split_first() else {
            return false;
        };
        let Some(mut n) = NumScanner::start(first) else {
            return false;
        };
        for &b in rest {
            if n.step(b) != NumEvent::More {
                return false;
            }
        }
        // A space ends a complete number like any delimiter.
        n.step(b' ') == NumEvent::Ended && n.complete_in_range()
    }

    #[test]
    fn strings_decode_like_serde_json() {
        let literals: &[&[u8]] = &[
            br#""""#,
            br#""plain""#,
            br#""q \" b \\ s \/ \b\f\n\r\t""#,
            br#""\u00e9\u00E9\u0000\u001f\uFFFF""#,
            br#""\ud83d\ude00 \uD83D\uDE00 \udbff\udfff""#,
            "\"é 😀 \u{7f} \u{10ffff}\"".as_bytes(),
            br#""\ud83d""#,
            br#""\ude00""#,
            br#""\ud83d\u0041""#,
            br#""\ud83d\ud83d""#,
            br#""\ud83dx""#,
            br#""\ud83d\n""#,
            br#""\x""#,
            br#""\u12G4""#,
            br#""\u12""#,
            b"\"tab\there\"",
            b"\"nl\nhere\"",
            b"\"\xff\"",
            b"\"\xc0\x80\"",
            b"\"\xc1\xbf\"",
            b"\"\xe0\x80\x80\"",
            b"\"\xed\xa0\x80\"",
            b"\"\xed\x9f\xbf\"",
            b"\"\xe2\x82\"",
            b"\"\xf0\x8f\xbf\xbf\"",
            b"\"\xf4\x8f\xbf\xbf\"",
            b"\"\xf4\x90\x80\x80\"",
            b"\"\xf5\x80\x80\x80\"",
            b"\"\x80\"",
            b"\"unterminated",
            b"\"a\"b",
        ];
        for literal in literals {
            let ours = decode(literal);
            let theirs = serde_json::from_slice::<String>(literal).ok();
            assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(literal));
        }
        assert_eq!(decode(br#""\ud83d\ude00""#).as_deref(), Some("😀"));
    }

    #[test]
    fn numbers_scan_like_serde_json() {
        let long_int = format!("17976931348623157{}", "0".repeat(292));
        let too_long = format!("17976931348623159{}", "0".repeat(292));
        let huge = "9".repeat(400);
        let round = format!("1{}", "0".repeat(300));
        let tiny = format!("0.{}1", "0".repeat(400));
        let long_frac = format!("1.{}", "7".repeat(400));
        let tokens = [
            "0",
            "-0",
            "7",
            "-12",
            "1.5",
            "1.5e10",
            "-2E-3",
            "1e+5",
            "0.0",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "12345678901234567890123",
            "0.1234567890123456789012345",
            "1e308",
            "1e309",
            "-1e309",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "17976931348623157e292",
            "1.8e308",
            "0.00000000000000000001e328",
            "18446744073709551615e289",
            "1844674407370955161.5e290",
            "1e-400",
            "1e-2147483648",
            "1e-2147483649",
            "0e2147483648",
            "1e2147483647",
            "1e2147483648",
            "0e999999999999",
            long_int.as_str(),
            too_long.as_str(),
            huge.as_str(),
            round.as_str(),
            tiny.as_str(),
            long_frac.as_str(),
            "01",
            "-01",
            "1.",
            "-",
            "+1",
            ".5",
            "1e",
            "1e+",
            "1.e5",
            "1..2",
            "--1",
            "1-",
        ];
        for token in tokens {
            let theirs = serde_json::from_str::<serde_json::Value>(token).is_ok();
            assert_eq!(scan_number(token.as_bytes()), theirs, "{token}");
        }
        assert!(scan_number(round.as_bytes()));
        assert!(!scan_number(huge.as_bytes()));
        assert!(!scan_number(b"1.7976931348623158e308"));
    }

    #[test]
    fn a_number_ends_at_the_first_byte_that_is_not_its_own() {
        let mut n = NumScanner::start(b'4').unwrap_or_else(|| unreachable!());
        assert_eq!(n.step(b'2'), NumEvent::More);
        assert_eq!(n.step(b','), NumEvent::Ended);
        assert!(n.complete_in_range());
        let mut n = NumScanner::start(b'-').unwrap_or_else(|| unreachable!());
        assert_eq!(n.step(b'}'), NumEvent::Invalid);
        assert_eq!(NumScanner::start(b'+'), None);
    }
}
