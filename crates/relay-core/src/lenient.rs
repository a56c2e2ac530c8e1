//! JSON as Python's `json` module writes it with default settings, which the DSS uses: it may
//! hold `NaN`, `Infinity` and `-Infinity`, numbers beyond a double's range (`1e400`, an integer
//! of 400 digits) and lone surrogate escapes (`"\ud800"`), all of which strict JSON parsers
//! refuse. The relay must accept such a notification, or the DSS retries it for days and drops
//! it.
//!
//! [`readable_copy`] makes a copy that a strict parser reads, for routing and the required
//! fields only: the non-finite and out-of-range numbers become `null`, and a lone surrogate
//! escape becomes `\ufffd`. The payload forwarded to the sinks is always the original bytes.
//!
//! `\ufffd` would make different strings read the same, so the copy also says, for each string
//! it changed, where it is in the copy and what it holds as WTF-8: its code points in UTF-8,
//! a lone surrogate as the three bytes UTF-8 would give it (what Python's
//! `str.encode("utf-8", "surrogatepass")` writes), which no Unicode text has.

use std::ops::Range;

/// A strictly parseable copy of a document, and the strings in it that hold lone surrogates.
#[derive(Debug)]
pub(crate) struct ReadableCopy {
    /// The copy.
    pub(crate) text: Vec<u8>,
    /// Each string literal whose lone surrogate escapes became `\ufffd`: its place in
    /// [`text`](Self::text), quotes included, and its code points as WTF-8.
    pub(crate) surrogates: Vec<(Range<usize>, Vec<u8>)>,
}

/// What Python writes for non-finite floats (`-Infinity` before the numbers that start with `-`).
const NON_FINITE: [&[u8]; 3] = [b"NaN", b"Infinity", b"-Infinity"];

/// A strictly parseable copy of `json`, or `None` when it has nothing to rewrite.
pub(crate) fn readable_copy(json: &[u8]) -> Option<ReadableCopy> {
    let mut out = Vec::with_capacity(json.len());
    let mut changed = false;
    let mut surrogates = Vec::new();
    let mut i = 0;
    while i < json.len() {
        if let Some(word) = NON_FINITE.iter().find(|w| json[i..].starts_with(w)) {
            out.extend_from_slice(b"null");
            changed = true;
            i += word.len();
            continue;
        }
        match json[i] {
            b'"' => {
                // The copy of a string is as long as the string: `\ud800` becomes `\ufffd`.
                let (start, at) = (i, out.len());
                i = copy_string(json, i, &mut out, &mut changed);
                if let Some(wtf8) = lone_surrogates(&json[start..i]) {
                    surrogates.push((at..out.len(), wtf8));
                }
            }
            b'-' | b'0'..=b'9' => {
                let end = i + json[i..]
                    .iter()
                    .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(json.len() - i);
                let number = &json[i..end];
                let finite = std::str::from_utf8(number)
                    .ok()
                    .and_then(|n| n.parse::<f64>().ok());
                if finite.is_some_and(f64::is_infinite) {
                    out.extend_from_slice(b"null");
                    changed = true;
                } else {
                    out.extend_from_slice(number);
                }
                i = end;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    changed.then_some(ReadableCopy {
        text: out,
        surrogates,
    })
}

/// The code points of the string `literal` (quotes included) as WTF-8, when it holds a lone
/// surrogate escape; `None` when it holds none, or does not read as a string.
fn lone_surrogates(literal: &[u8]) -> Option<Vec<u8>> {
    let inner = literal.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let mut wtf8 = Vec::new();
    let mut lone = false;
    let mut segment = 0;
    let mut i = 0;
    while i < inner.len() {
        match inner[i] {
            b'\\' if inner.get(i + 1) == Some(&b'u') => {
                match escape_at(inner, i) {
                    Some(u) if (0xD800..0xDC00).contains(&u) && is_low(inner, i + 6) => i += 12,
                    Some(u) if (0xD800..0xE000).contains(&u) => {
                        decode_into(&inner[segment..i], &mut wtf8)?;
                        // UTF-8's three bytes for a code point of 0x0800..=0xFFFF.
                        wtf8.extend([
                            0xE0 | (u >> 12) as u8,
                            0x80 | ((u >> 6) & 0x3F) as u8,
                            0x80 | (u & 0x3F) as u8,
                        ]);
                        lone = true;
                        i += 6;
                        segment = i;
                    }
                    _ => i += 2,
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    if !lone {
        return None;
    }
    decode_into(&inner[segment..], &mut wtf8)?;
    Some(wtf8)
}

/// Appends the text of `piece`, a string's content without lone surrogates, to `out`.
fn decode_into(piece: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let quoted = [b"\"", piece, b"\""].concat();
    out.extend(serde_json::from_slice::<String>(&quoted).ok()?.into_bytes());
    Some(())
}

/// Whether a low surrogate escape is at `json[at]`.
fn is_low(json: &[u8], at: usize) -> bool {
    escape_at(json, at).is_some_and(|u| (0xDC00..0xE000).contains(&u))
}

/// Copies the string starting at `json[start]` (a quote), replacing lone surrogate escapes;
/// returns the index after its closing quote (or the end of the input).
fn copy_string(json: &[u8], start: usize, out: &mut Vec<u8>, changed: &mut bool) -> usize {
    out.push(b'"');
    let mut i = start + 1;
    while i < json.len() {
        match json[i] {
            b'"' => {
                out.push(b'"');
                return i + 1;
            }
            b'\\' if json.get(i + 1) == Some(&b'u') => {
                let unit = escape_at(json, i);
                let paired = |next: usize| {
                    escape_at(json, next).is_some_and(|u| (0xDC00..0xE000).contains(&u))
                };
                match unit {
                    Some(u) if (0xD800..0xDC00).contains(&u) && paired(i + 6) => {
                        out.extend_from_slice(&json[i..i + 12]);
                        i += 12;
                    }
                    Some(u) if (0xD800..0xE000).contains(&u) => {
                        out.extend_from_slice(b"\\ufffd");
                        *changed = true;
                        i += 6;
                    }
                    _ => {
                        out.extend_from_slice(&json[i..(i + 2).min(json.len())]);
                        i += 2;
                    }
                }
            }
            b'\\' => {
                out.extend_from_slice(&json[i..(i + 2).min(json.len())]);
                i += 2;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    json.len()
}

/// The code unit of a `\uXXXX` escape at `json[at]`, if there is one.
fn escape_at(json: &[u8], at: usize) -> Option<u32> {
    let escape = json.get(at..at + 6)?;
    if &escape[..2] != b"\\u" {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(&escape[2..]).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(json: &str) -> Option<String> {
        readable_copy(json.as_bytes()).map(|c| String::from_utf8(c.text).unwrap())
    }

    #[test]
    fn python_only_forms_become_readable() {
        assert_eq!(
            copy(r#"{"a": NaN, "b": [Infinity, -Infinity]}"#).unwrap(),
            r#"{"a": null, "b": [null, null]}"#
        );
        assert_eq!(
            copy(r#"{"a": 1e400, "b": -1e400, "c": 1.5}"#).unwrap(),
            r#"{"a": null, "b": null, "c": 1.5}"#
        );
        let big = "9".repeat(400);
        assert_eq!(
            copy(&format!(r#"{{"a": {big}}}"#)).unwrap(),
            r#"{"a": null}"#
        );
        assert_eq!(
            copy(r#"{"a": "x\ud800y", "b": "\udc00"}"#).unwrap(),
            r#"{"a": "x\ufffdy", "b": "\ufffd"}"#
        );
    }

    #[test]
    fn what_is_already_strict_is_left_alone() {
        for json in [
            r#"{"a": "\ud83d\ude00", "NaN": "Infinity"}"#,
            r#"{"a": -0.5e-3, "b": "\\ud800"}"#,
            "[1, 2]",
        ] {
            assert_eq!(copy(json), None, "{json}");
        }
    }

    #[test]
    fn strings_with_lone_surrogates_are_found_with_their_code_points() {
        let json = r#"{"a": NaN, "b": "x\ud800\\ud800\u00e9", "c": "\ud83d\ude00", "d": "\udfff"}"#;
        let copy = readable_copy(json.as_bytes()).unwrap();
        let found: Vec<(&[u8], &[u8])> = copy
            .surrogates
            .iter()
            .map(|(place, wtf8)| (&copy.text[place.clone()], wtf8.as_slice()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    br#""x\ufffd\\ud800\u00e9""#.as_slice(),
                    b"x\xed\xa0\x80\\ud800\xc3\xa9".as_slice()
                ),
                (br#""\ufffd""#.as_slice(), b"\xed\xbf\xbf".as_slice()),
            ]
        );
    }
}
