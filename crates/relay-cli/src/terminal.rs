//! Text for a terminal: what the relay prints comes partly from its senders (a subscription id,
//! a dedup key, an archive's object names), and a control character in it must not reach the
//! terminal as one (an escape sequence can retitle a window or clear the screen).

use std::borrow::Cow;

/// `text` with every control character but the line break written as an escape (`\u{1b}`),
/// as Rust's `Debug` writes it; unchanged, and not copied, when it has none.
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match unsafe_char(c) {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The width of a column holding `cells`: the longest one's length.
pub(crate) fn column_width<'a>(cells: impl IntoIterator<Item = &'a str>) -> usize {
    cells.into_iter().map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(safe("bundle 1\nversion 2"), Cow::Borrowed(_)));
        assert_eq!(
            safe("sub\u{1b}]0;owned\u{7}\u{1b}[2J\r\tend\u{9b}"),
            "sub\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\r\\tend\\u{9b}"
        );
        assert_eq!(safe("übung ✓"), "übung ✓");
    }
}
