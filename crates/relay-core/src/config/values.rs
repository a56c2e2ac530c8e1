//! The value types of the relay's own settings. Each is its setting's parser: `FromStr` for a
//! variable's text, and the same parse for a TOML scalar (see [`crate::text`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::de::{Error as _, MapAccess, Visitor};

use crate::text::{checked_string, deserialize_from_text};
use crate::verify::Secret;

/// How `relay check` shows a value; secrets are masked.
pub trait Show {
    /// The value as text.
    fn show(&self) -> String;
}

impl<T: fmt::Display> Show for T {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for Secret {
    fn show(&self) -> String {
        "****".into()
    }
}

impl Show for HmacKeys {
    fn show(&self) -> String {
        let masked: BTreeMap<&str, &str> = self.0.keys().map(|id| (id.as_str(), "****")).collect();
        serde_json::to_string(&masked).unwrap_or_default()
    }
}

/// Defines a newtype over a parsed value, with `Display`, `FromStr` (via `$parse`) and
/// `Deserialize`.
macro_rules! value {
    ($(#[$meta:meta])* $name:ident($inner:ty), $expecting:literal, $parse:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub $inner);

        impl FromStr for $name {
            type Err = crate::text::InvalidValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let parse: fn(&str) -> Option<$inner> = $parse;
                parse(s.trim()).map(Self).ok_or_else(|| format!(concat!("expected ", $expecting, ", got {:?}"), s).into())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        deserialize_from_text!($name, $expecting);
    };
}

/// Defines an enum of keywords, with `FromStr`, `Display` and `Deserialize`.
macro_rules! keywords {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl FromStr for $name {
            type Err = crate::text::InvalidValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(format!("expected {}, got {s:?}", [$($text),+].join(" or ")).into()),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $(Self::$variant => $text,)+
                })
            }
        }

        deserialize_from_text!($name, concat!("one of", $(" ", $text),+));
    };
}

value!(
    /// `true`/`false` (also `1`/`0`, `yes`/`no`; empty is false).
    Flag(bool),
    "true or false",
    |s| match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" | "" => Some(false),
        _ => None,
    }
);

value!(
    /// Whole seconds; `0` is allowed (it turns a check off).
    Seconds(u64),
    "a whole number of seconds (0 turns the check off)",
    |s| s.parse().ok()
);

value!(
    /// Milliseconds between 1 and 60000.
    Millis(u64),
    "milliseconds between 1 and 60000",
    |s| s.parse().ok().filter(|n| (1..=60_000).contains(n))
);

value!(
    /// Milliseconds between 0 and 1000.
    WaitMillis(u64),
    "milliseconds between 0 and 1000",
    |s| s.parse().ok().filter(|n| *n <= 1000)
);

value!(
    /// Milliseconds between 1 and 1000: a transform's time limit, within
    /// [`MAX_TIMEOUT`](crate::transform::MAX_TIMEOUT).
    TransformMillis(u64),
    "milliseconds between 1 and 1000",
    |s| {
        let most = crate::transform::MAX_TIMEOUT.as_millis() as u64;
        s.parse().ok().filter(|n| (1..=most).contains(n))
    }
);

value!(
    /// A positive count.
    Count(usize),
    "a positive whole number",
    |s| s.parse().ok().filter(|&n| n > 0)
);

value!(
    /// A socket address such as `127.0.0.1:8080`.
    ListenAddr(std::net::SocketAddr),
    "an address such as 127.0.0.1:8080",
    |s| s.parse().ok()
);

checked_string!(
    /// A multipart form field name: non-empty, without quotes.
    FieldName,
    "a form field name",
    |s| match s.is_empty() || s.contains('"') {
        true => Err(format!("expected a non-empty form field name without quotes, got {s:?}")),
        false => Ok(()),
    }
);

checked_string!(
    /// An AWS Secrets Manager secret ARN.
    SecretArn,
    "a Secrets Manager secret ARN",
    |arn| match arn.splitn(7, ':').collect::<Vec<_>>().as_slice() {
        ["arn", partition, "secretsmanager", region, account, "secret", name]
            if partition.starts_with("aws") && ![region, account, name].iter().any(|p| p.is_empty()) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "expected a Secrets Manager secret ARN such as arn:aws:secretsmanager:us-east-1:123456789012:secret:dss-relay-hmac, got {arn:?}"
        )),
    }
);

keywords!(
    /// Log output format.
    LogFormat {
        /// One JSON object per line (the default on Lambda and Cloud Run).
        Json = "json",
        /// Human-readable lines (the default elsewhere).
        Text = "text",
    }
);

keywords!(
    /// Whether the relay writes metric lines.
    MetricsFormat {
        /// CloudWatch Embedded Metric Format lines on standard output (the default on Lambda).
        Emf = "emf",
        /// None (the default elsewhere: the request log line carries the same fields).
        Off = "off",
    }
);

/// HMAC keys by keyId: a TOML table in the file, a JSON object in `RELAY_HMAC_KEYS`. Neither a
/// key nor a secret is ever echoed in an error.
#[derive(Debug, Clone, Default)]
pub struct HmacKeys(pub BTreeMap<String, Secret>);

impl HmacKeys {
    /// Parses the JSON object form.
    pub(crate) fn from_json(raw: &str) -> Result<Self, crate::text::InvalidValue> {
        let map: BTreeMap<String, serde_json::Value> = serde_json::from_str(raw)
            .map_err(|_| "expected a JSON object of {\"<keyId>\": \"<secret>\"}")?;
        map.into_iter()
            .map(|(id, secret)| match secret {
                serde_json::Value::String(s) => Self::entry(id, s),
                _ => Err(format!("the secret of {id:?} must be a string")),
            })
            .collect::<Result<_, String>>()
            .map(Self)
            .map_err(Into::into)
    }

    fn entry(id: String, secret: String) -> Result<(String, Secret), String> {
        if id.is_empty() || secret.is_empty() {
            return Err(format!(
                "the key {id:?} must have a non-empty string secret and a non-empty keyId"
            ));
        }
        Ok((id, Secret::new(secret)))
    }
}

impl<'de> serde::Deserialize<'de> for HmacKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = HmacKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of keyIds to secrets")
            }
            fn visit_str<E: serde::de::Error>(self, raw: &str) -> Result<HmacKeys, E> {
                HmacKeys::from_json(raw).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HmacKeys, A::Error> {
                let mut keys = BTreeMap::new();
                while let Some(id) = map.next_key::<String>()? {
                    let secret = map.next_value::<String>().map_err(|_| {
                        A::Error::custom(format!("the secret of {id:?} must be a string"))
                    })?;
                    let (id, secret) = HmacKeys::entry(id, secret).map_err(A::Error::custom)?;
                    keys.insert(id, secret);
                }
                Ok(HmacKeys(keys))
            }
        }
        deserializer.deserialize_any(Keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_from_text() {
        assert_eq!("yes".parse::<Flag>(), Ok(Flag(true)));
        assert!("maybe".parse::<Flag>().unwrap_err().0.contains("\"maybe\""));
        assert!("0".parse::<Millis>().is_err() && "60001".parse::<Millis>().is_err());
        assert_eq!("0".parse::<WaitMillis>().map(|w| w.0), Ok(0));
        assert!("1001".parse::<WaitMillis>().is_err() && "-1".parse::<WaitMillis>().is_err());
        assert_eq!("0".parse::<Seconds>(), Ok(Seconds(0)));
        assert!("".parse::<FieldName>().is_err() && "a\"b".parse::<FieldName>().is_err());
        assert!("xml".parse::<LogFormat>().is_err());
        assert!(
            "arn:aws:secretsmanager:us-east-1:1:secret:x"
                .parse::<SecretArn>()
                .is_ok()
        );
        assert!("arn:aws:sns:us-east-1:1:x".parse::<SecretArn>().is_err());
    }

    #[test]
    fn key_errors_never_echo_the_secret() {
        for raw in [
            r#"{"k": "" }"#,
            r#"{"k": 5}"#,
            "s3cret-not-json",
            r#"{"": "s3cret"}"#,
        ] {
            let e = HmacKeys::from_json(raw).unwrap_err();
            assert!(!e.0.contains("s3cret"), "{e}");
        }
        let keys = HmacKeys::from_json(r#"{"new": "s3cret-2", "old": "s3cret-1"}"#).unwrap();
        assert_eq!(keys.show(), r#"{"new":"****","old":"****"}"#);
    }
}
