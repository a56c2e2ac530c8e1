//! JSON as Python's `json` module writes it with default settings, which the DSS uses: it may
//! hold `NaN`, `Infinity` and `-Infinity`, numbers beyond a double's range (`1e400`, an integer
//! of 400 digits) and lone surrogate escapes (`"\ud800"`), all of which strict JSON parsers
//! refuse. The relay must accept such a notification, or the DSS retries it for days and drops
//! it.
//!
//! [`readable_copy`] makes a copy that a strict parser reads, for routing and the required
//! fields only: the non-finite and out-of-range numbers become `null`, and a lone surrogate
//! escape becomes `\ufffd`. The payload forwarded to the sinks is always the original bytes.

/// What Python writes for non-finite floats (`-Infinity` before the numbers that start with `-`).
const NON_FINITE: [&[u8]; 3] = [b"NaN", b"Infinity", b"-Infinity"];

/// A strictly parseable copy of `json`, or `None` when it has nothing to rewrite.
pub(crate) fn readable_copy(json: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(json.len());
    let mut changed = false;
    let mut i = 0;
    while i < json.len() {
        if let Some(word) = NON_FINITE.iter().find(|w| json[i..].starts_with(w)) {
            out.extend_from_slice(b"null");
            changed = true;
            i += word.len();
            continue;
        }
        match json[i] {
            b'"' => i = copy_string(json, i, &mut out, &mut changed),
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
    changed.then_some(out)
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
        readable_copy(json.as_bytes()).map(|b| String::from_utf8(b).unwrap())
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
}
