//! JSON written by hand where it is on the hot path: the SQS request body (`sink/sqs.rs`) and
//! the metric lines (`metrics.rs`). Strings are escaped exactly as `serde_json` escapes them
//! (a test holds it), and a notification's body is copied in place rather than parsed.

/// Appends `text` as a JSON string. Text with a control character (rare in a notification: JSON
/// text escapes them inside its own strings) goes through `serde_json` whole.
pub(crate) fn string(out: &mut Vec<u8>, text: &str) {
    utf8(out, text.as_bytes());
}

/// [`string`] for bytes known to be UTF-8 (a message's body, read in place); bytes that are not
/// would be written with U+FFFD in place of each invalid sequence.
pub(crate) fn utf8(out: &mut Vec<u8>, bytes: &[u8]) {
    // A fold without an early exit is vectorized: the whole body costs a few cycles per 32
    // bytes, where `any` would test it one byte at a time.
    if bytes.iter().fold(false, |control, &b| control | (b < 0x20)) {
        let text = String::from_utf8_lossy(bytes);
        serde_json::to_writer(&mut *out, &text).expect("a string always serializes");
        return;
    }
    out.push(b'"');
    let mut copied = 0;
    for at in memchr::memchr2_iter(b'"', b'\\', bytes) {
        out.extend_from_slice(&bytes[copied..at]);
        out.push(b'\\');
        out.push(bytes[at]);
        copied = at + 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// Appends `items` between the brackets `[open, close]` (`b"[]"` or `b"{}"`), separated by
/// commas, each written by `write`.
pub(crate) fn list<T>(
    out: &mut Vec<u8>,
    [open, close]: [u8; 2],
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(open);
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(close);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut samples: Vec<String> = (0u8..0x80).map(|b| format!("a{}b", b as char)).collect();
        samples.extend(
            [
                "",
                "\"",
                "\\",
                "\\\"",
                "plain",
                "ends with \\",
                "{\"k\": \"v\\\"w\"}",
                "é ü \u{1F600} \u{2028}",
                "line\nbreak",
            ]
            .map(str::to_owned),
        );
        for sample in samples {
            let mut out = Vec::new();
            string(&mut out, &sample);
            let expected = serde_json::to_string(&sample).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{sample:?}");
        }
    }

    #[test]
    fn lists_separate_their_items_with_commas() {
        let mut out = Vec::new();
        list(&mut out, *b"[]", ["a", "b"], string);
        list(&mut out, *b"{}", Vec::<&str>::new(), string);
        assert_eq!(out, br#"["a","b"]{}"#);
    }
}
