//! Values that read the same from a TOML scalar and from an environment variable's text.
//!
//! A setting's type implements `FromStr` (its one parser) and gets `Deserialize` from
//! [`deserialize_from_text!`]: a TOML string, integer, float or boolean is turned into text and
//! parsed, and a variable's text is parsed as it is. The file and the variables therefore
//! accept and refuse exactly the same values, with the same messages.

/// A value that does not parse: what was expected and what was given, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidValue(pub String);

impl From<String> for InvalidValue {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for InvalidValue {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// A TOML document that does not parse into its type: the 1-based line and column, and the
/// parser's message, never the text of the line (it may hold a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct DocumentError {
    /// The line at fault.
    pub line: usize,
    /// The column at fault.
    pub column: usize,
    /// What the parser says.
    pub message: String,
}

/// Parses a TOML document into `T`: the `RELAY_CONFIG` file and the stored routes document.
pub(crate) fn parse_document<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, DocumentError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |span| position(text, span.start));
        DocumentError {
            line,
            column,
            message: e.message().trim_end().to_owned(),
        }
    })
}

/// The 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// A store's place as a setting writes it: `<scheme>://<name>[/<path>]` (a bucket or a table,
/// then an object, a prefix or further names), or a local path. What a store takes of it is its
/// own URL type's to say (the ledger's, the archive's, the stored routes').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreUrl<'a> {
    /// `<scheme>://<name>/<path>`; `path` is none without a `/` after the name.
    Remote {
        scheme: &'a str,
        name: &'a str,
        path: Option<&'a str>,
    },
    /// A local path: the text, trimmed, with no `://` in it.
    Local(&'a str),
}

impl<'a> StoreUrl<'a> {
    /// `text` read as a store's place; none when it is empty.
    pub(crate) fn parse(text: &'a str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(match text.split_once("://") {
            Some((scheme, rest)) => {
                let (name, path) = match rest.split_once('/') {
                    Some((name, path)) => (name, Some(path)),
                    None => (rest, None),
                };
                Self::Remote { scheme, name, path }
            }
            None => Self::Local(text),
        })
    }
}

/// Implements `serde::Deserialize` for a `FromStr` type whose error is an [`InvalidValue`].
macro_rules! deserialize_from_text {
    ($type:ty, $expecting:expr) => {
        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any($crate::text::TextVisitor::<$type>::new($expecting))
            }
        }
    };
}
pub(crate) use deserialize_from_text;

/// Implements `serde::Serialize` for a `Display` type as its text, which its `FromStr` (and so
/// its `Deserialize`) reads back.
macro_rules! serialize_as_text {
    ($type:ty) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }
    };
}
pub(crate) use serialize_as_text;

/// Defines a string newtype that only holds values `$check` accepts, with `as_str`, `Display`,
/// `FromStr`, `Deserialize` and `Serialize`.
macro_rules! checked_string {
    ($(#[$meta:meta])* $name:ident, $expecting:literal, $check:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            /// The value.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::text::InvalidValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(s).map(|()| Self(s.to_owned())).map_err($crate::text::InvalidValue)
            }
        }

        $crate::text::deserialize_from_text!($name, $expecting);
        $crate::text::serialize_as_text!($name);
    };
}
pub(crate) use checked_string;

/// Visits any scalar as text and parses it with `T::from_str`.
pub(crate) struct TextVisitor<T> {
    expecting: &'static str,
    parsed: std::marker::PhantomData<T>,
}

impl<T> TextVisitor<T> {
    pub(crate) fn new(expecting: &'static str) -> Self {
        Self {
            expecting,
            parsed: std::marker::PhantomData,
        }
    }
}

impl<T> serde::de::Visitor<'_> for TextVisitor<T>
where
    T: std::str::FromStr<Err = InvalidValue>,
{
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<T, E> {
        self.visit_str(if v { "true" } else { "false" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_lines_and_columns() {
        assert_eq!(position("ab\ncd", 4), (2, 2));
        assert_eq!(position("ab", 0), (1, 1));
    }

    #[test]
    fn a_store_url_is_a_scheme_a_name_and_a_path_or_a_local_path() {
        let remote = |scheme, name, path| Some(StoreUrl::Remote { scheme, name, path });
        let cases = [
            (" s3://b/a/k.toml ", remote("s3", "b", Some("a/k.toml"))),
            ("dynamodb://t", remote("dynamodb", "t", None)),
            ("dynamodb://t/", remote("dynamodb", "t", Some(""))),
            ("x://", remote("x", "", None)),
            ("./relay.db", Some(StoreUrl::Local("./relay.db"))),
            ("  ", None),
        ];
        for (text, url) in cases {
            assert_eq!(StoreUrl::parse(text), url, "{text:?}");
        }
    }
}
