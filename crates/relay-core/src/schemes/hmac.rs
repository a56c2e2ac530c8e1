//! A generic HMAC-SHA256 scheme for senders without a scheme of their own: the signature in one
//! header, after an optional prefix, as hex or base64, over a signed-content template with
//! `{body}`, `{timestamp}`, `{id}` and `{header:<name>}` placeholders (`{{` and `}}` for braces).
//! With a timestamp header, the timestamp is checked within a window; without one, a captured
//! request can be replayed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::{HeaderName, HeaderValue};

use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, Window, owned};

/// How the signature is written in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Lower- or upper-case hexadecimal.
    #[default]
    Hex,
    /// Standard base64 with padding.
    Base64,
}

/// One piece of the signed content.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Body,
    Timestamp,
    Id,
    Header(String),
}

impl Part {
    fn is_placeholder(&self) -> bool {
        !matches!(self, Self::Text(_))
    }

    /// The placeholder as written, without its braces.
    fn name(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Body => "body".into(),
            Self::Timestamp => "timestamp".into(),
            Self::Id => "id".into(),
            Self::Header(h) => format!("header:{h}"),
        }
    }
}

/// Why a generic HMAC scheme cannot be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HmacConfigError {
    /// A `{` without its `}`, or a lone `}`.
    #[error("the template has an unbalanced brace")]
    UnbalancedBrace,
    /// A placeholder other than `{body}`, `{timestamp}`, `{id}` or `{header:<name>}`.
    #[error("the template has an unknown placeholder {{{0}}}")]
    UnknownPlaceholder(String),
    /// `{timestamp}` or `{id}` without the header that carries it.
    #[error("the template uses {{{0}}} but no header for it is configured")]
    NoHeaderFor(&'static str),
    /// A header name that is not a valid lower-case HTTP field name.
    #[error("{0:?} is not a valid header name")]
    BadHeaderName(String),
    /// A template that does not sign the body.
    #[error("the template must contain {{body}}")]
    NoBody,
    /// A timestamp header the template does not sign: its window would be checked on a value
    /// anyone can change, and a captured request could be sent again.
    #[error("timestamp_header is set, but the template does not sign {{timestamp}}")]
    UnsignedTimestamp,
    /// Two placeholders with nothing between them: bytes could move from one to the other under
    /// the same signature.
    #[error("the template has {{{0}}} and {{{1}}} side by side; put a separator between them")]
    Adjacent(String, String),
    /// `{body}` is not the template's end: the body could end in the text that follows it, and
    /// the boundary would shift.
    #[error(
        "the template must end with {{body}}, after the other placeholders and their separators"
    )]
    BodyNotLast,
}

/// What a generic HMAC scheme is configured with.
#[derive(Debug, Clone)]
pub struct HmacConfig {
    /// The header that carries the signature.
    pub header: String,
    /// A prefix before the signature in that header, e.g. `sha256=`.
    pub prefix: Option<String>,
    /// How the signature is encoded.
    pub encoding: Encoding,
    /// The signed content, e.g. `{timestamp}.{body}`.
    pub template: String,
    /// The header that carries the signed Unix timestamp, if any.
    pub timestamp_header: Option<String>,
    /// The header that carries the delivery id, if any.
    pub id_header: Option<String>,
    /// Largest accepted distance between the timestamp and now.
    pub window: Window,
}

impl HmacConfig {
    /// The headers whose values the template signs, lowercase: the id's and the timestamp's
    /// when `{id}` and `{timestamp}` are in it, and each `{header:<name>}`. Empty for a
    /// template that does not parse (refused elsewhere).
    pub(crate) fn signed_headers(&self) -> Vec<String> {
        let parts = parse_template(&self.template).unwrap_or_default();
        let lower = |h: &Option<String>| h.as_deref().map(str::to_ascii_lowercase);
        parts
            .iter()
            .filter_map(|part| match part {
                Part::Id => lower(&self.id_header),
                Part::Timestamp => lower(&self.timestamp_header),
                Part::Header(name) => Some(name.to_ascii_lowercase()),
                Part::Text(_) | Part::Body => None,
            })
            .collect()
    }

    /// A configuration signing only the raw body, hex-encoded, without a prefix or timestamp.
    pub fn body_only(header: impl Into<String>) -> Self {
        Self {
            header: header.into(),
            prefix: None,
            encoding: Encoding::Hex,
            template: "{body}".into(),
            timestamp_header: None,
            id_header: None,
            window: Window::default(),
        }
    }
}

/// A generic HMAC-SHA256 scheme, built from an [`HmacConfig`].
#[derive(Debug, Clone)]
pub struct GenericHmac {
    config: HmacConfig,
    parts: Vec<Part>,
}

fn header_name(name: &str) -> Result<String, HmacConfigError> {
    match HeaderName::try_from(name) {
        Ok(h) if h.as_str() == name => Ok(name.to_owned()),
        _ => Err(HmacConfigError::BadHeaderName(name.to_owned())),
    }
}

/// Parses a signed-content template into its parts.
fn parse_template(template: &str) -> Result<Vec<Part>, HmacConfigError> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("{{") {
            text.push('{');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("}}") {
            text.push('}');
            rest = after;
        } else if c == '}' {
            return Err(HmacConfigError::UnbalancedBrace);
        } else if c == '{' {
            let (name, after) = rest[1..]
                .split_once('}')
                .ok_or(HmacConfigError::UnbalancedBrace)?;
            let part = match name {
                "body" => Part::Body,
                "timestamp" => Part::Timestamp,
                "id" => Part::Id,
                _ => match name.strip_prefix("header:") {
                    Some(h) => Part::Header(header_name(h)?),
                    None => return Err(HmacConfigError::UnknownPlaceholder(name.to_owned())),
                },
            };
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(part);
            rest = after;
        } else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(parts)
}

impl GenericHmac {
    /// Checks the configuration and parses its template.
    pub fn new(config: HmacConfig) -> Result<Self, HmacConfigError> {
        header_name(&config.header)?;
        for h in [&config.timestamp_header, &config.id_header]
            .into_iter()
            .flatten()
        {
            header_name(h)?;
        }
        let parts = parse_template(&config.template)?;
        if !parts.contains(&Part::Body) {
            return Err(HmacConfigError::NoBody);
        }
        if parts.contains(&Part::Timestamp) && config.timestamp_header.is_none() {
            return Err(HmacConfigError::NoHeaderFor("timestamp"));
        }
        if parts.contains(&Part::Id) && config.id_header.is_none() {
            return Err(HmacConfigError::NoHeaderFor("id"));
        }
        if config.timestamp_header.is_some() && !parts.contains(&Part::Timestamp) {
            return Err(HmacConfigError::UnsignedTimestamp);
        }
        if let Some(pair) = parts
            .windows(2)
            .find(|w| w.iter().all(Part::is_placeholder))
        {
            return Err(HmacConfigError::Adjacent(pair[0].name(), pair[1].name()));
        }
        // Body last, and each other value followed by a separator it is checked not to hold
        // (`content`): the signed content then splits into its values one way only.
        if parts.last() != Some(&Part::Body)
            || parts.iter().filter(|p| **p == Part::Body).count() > 1
        {
            return Err(HmacConfigError::BodyNotLast);
        }
        Ok(Self { config, parts })
    }

    /// The signed content, with the values each placeholder takes. A value that holds the
    /// separator after it is refused: with it, another split of the same bytes (a longer id,
    /// a shorter body) would verify too.
    fn content(
        &self,
        body: &[u8],
        ts: Option<&str>,
        id: Option<&str>,
        other: &dyn Fn(&str) -> Result<String, SchemeError>,
    ) -> Result<Vec<u8>, SchemeError> {
        let mut out = Vec::with_capacity(body.len() + 64);
        for (i, part) in self.parts.iter().enumerate() {
            let value = match part {
                Part::Text(t) => {
                    out.extend_from_slice(t.as_bytes());
                    continue;
                }
                Part::Body => {
                    out.extend_from_slice(body);
                    continue;
                }
                Part::Timestamp => ts.unwrap_or_default().to_owned(),
                Part::Id => id.unwrap_or_default().to_owned(),
                Part::Header(h) => other(h)?,
            };
            // `new` keeps a text between any two placeholders, and the body last.
            if let Some(Part::Text(separator)) = self.parts.get(i + 1)
                && value.contains(separator.as_str())
            {
                return Err(SchemeError::AmbiguousValue(part.name()));
            }
            out.extend_from_slice(value.as_bytes());
        }
        Ok(out)
    }

    fn encode(&self, mac: &[u8]) -> String {
        let prefix = self.config.prefix.as_deref().unwrap_or_default();
        match self.config.encoding {
            Encoding::Hex => format!("{prefix}{}", hex::encode(mac)),
            Encoding::Base64 => format!("{prefix}{}", BASE64.encode(mac)),
        }
    }
}

fn static_name(name: &str) -> Result<HeaderName, SchemeError> {
    HeaderName::try_from(name).map_err(|_| SchemeError::Unsignable("not a header name"))
}

impl Scheme for GenericHmac {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let (c, headers) = (&self.config, check.request.headers);
        let value = check.signature(&c.header, "the configured signature")?;
        let encoded = match &c.prefix {
            Some(p) => value
                .strip_prefix(p.as_str())
                .ok_or(SchemeError::MalformedSignature("the prefix is missing"))?,
            None => value,
        };
        let candidate = match c.encoding {
            Encoding::Hex => hex::decode(encoded).ok(),
            Encoding::Base64 => BASE64.decode(encoded).ok(),
        }
        .ok_or(SchemeError::MalformedSignature(
            "the signature is not encoded as configured",
        ))?;
        let mut signed_at = None;
        let mut ts = None;
        if let Some(name) = &c.timestamp_header {
            let t = check.needed(name)?;
            signed_at = Some(check.timestamp(t, c.window)?);
            ts = Some(t);
        }
        let id = match &c.id_header {
            Some(name) => owned(headers, name)?,
            None => None,
        };
        if self.parts.contains(&Part::Id) && id.is_none() {
            let name = c.id_header.clone().unwrap_or_default();
            return Err(SchemeError::MissingHeader(name));
        }
        let other = |name: &str| check.needed(name).map(str::to_owned);
        let content = self.content(check.request.body, ts, id.as_deref(), &other)?;
        let key_id = check.hmac(&[candidate], &[&content])?;
        Ok(Proof {
            key_id,
            delivery_id: id,
            event_type: None,
            signed_at,
        })
    }

    fn has_timestamp(&self) -> bool {
        self.config.timestamp_header.is_some()
    }

    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        let (c, id) = (&self.config, signer.id);
        let ts = signer.unix();
        let refuse = |_: &str| Err(SchemeError::Unsignable("the template signs another header"));
        let content = self.content(body, Some(&ts), id, &refuse)?;
        let mac = signer.hmac(&[&content])?;
        let value = |v: String| {
            HeaderValue::try_from(v).map_err(|_| SchemeError::Unsignable("not a header value"))
        };
        let mut headers = vec![(static_name(&c.header)?, value(self.encode(&mac))?)];
        if let Some(name) = &c.timestamp_header {
            headers.push((static_name(name)?, value(ts)?));
        }
        match (&c.id_header, id) {
            (Some(name), Some(id)) => headers.push((static_name(name)?, value(id.to_owned())?)),
            (Some(_), None) if self.parts.contains(&Part::Id) => {
                return Err(SchemeError::Unsignable("the template signs an id"));
            }
            _ => {}
        }
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_bad_ones_are_refused() {
        let text = |t: &str| Part::Text(t.into());
        for (template, parts) in [
            (
                "v0:{timestamp}:{body}",
                vec![text("v0:"), Part::Timestamp, text(":"), Part::Body],
            ),
            (
                "{{{body}}}{header:x-a}",
                vec![text("{"), Part::Body, text("}"), Part::Header("x-a".into())],
            ),
        ] {
            assert_eq!(parse_template(template).unwrap(), parts, "{template}");
        }
        for (bad, error) in [
            ("{body", HmacConfigError::UnbalancedBrace),
            ("body}", HmacConfigError::UnbalancedBrace),
            ("{nope}", HmacConfigError::UnknownPlaceholder("nope".into())),
            ("{header:X A}", HmacConfigError::BadHeaderName("X A".into())),
            ("{header:X-A}", HmacConfigError::BadHeaderName("X-A".into())),
        ] {
            assert_eq!(parse_template(bad), Err(error), "{bad}");
        }
        let mut config = HmacConfig::body_only("x-sig");
        config.template = "{timestamp}.{body}".into();
        assert_eq!(
            GenericHmac::new(config.clone()).unwrap_err(),
            HmacConfigError::NoHeaderFor("timestamp")
        );
        config.template = "{timestamp}".into();
        config.timestamp_header = Some("x-ts".into());
        assert_eq!(
            GenericHmac::new(config).unwrap_err(),
            HmacConfigError::NoBody
        );
    }
}
