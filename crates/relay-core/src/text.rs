//! Values that read the same from a TOML scalar and from an environment variable's text.
//!
//! A setting's type implements `FromStr` (its one parser) and gets `Deserialize` from
//! [`deserialize_from_text!`]: a TOML string, integer, float or boolean is turned into text and
//! parsed, and a variable's text is parsed as it is. The file and the variables therefore
//! accept and refuse exactly the same values, with the same messages.

/// Implements `serde::Deserialize` for a `FromStr` type whose error is a `String`.
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

/// Defines a string newtype that only holds values `$check` accepts, with `as_str`, `Display`,
/// `FromStr` and `Deserialize`.
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
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(s).map(|()| Self(s.to_owned()))
            }
        }

        $crate::text::deserialize_from_text!($name, $expecting);
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
    T: std::str::FromStr<Err = String>,
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
