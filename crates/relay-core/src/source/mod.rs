//! Who sent a request: the sources the relay answers for, each with the paths it answers on,
//! its signature scheme and keys, its clock window, and what identifies one of its events across
//! the sender's retries (its dedup key).
//!
//! Without `[sources]` there is one source, the DSS, on every path, verified by its scheme
//! ([`Dss`]) with the relay's keys: exactly the relay without sources. With
//! `[sources.<name>]` tables, a request goes to the source whose `paths` hold its path (or to
//! the one source without `paths`), and is verified with that source's keys only, so a request
//! signed with another source's key is refused.
//!
//! ```toml
//! [sources.dss]
//! scheme = "dss"
//! paths = ["/dss"]
//!
//! [sources.github]
//! scheme = "github"
//! paths = ["/github"]
//! secret_env = "GITHUB_WEBHOOK_SECRET"
//! ```

mod config;
mod open;
mod signed;

use config::field_path;
#[cfg(feature = "secrets")]
pub(crate) use config::read_keys;
pub use config::{SourceConfig, SourceKeys, SourceSpec};
pub(crate) use open::{Opened, Refusal, document};

use std::sync::Arc;

use serde::Deserialize;

use crate::schemes::dss::Dss;
use crate::schemes::hmac::GenericHmac;
use crate::schemes::{self, Scheme, Secrets};
use crate::verify::{KeyRing, Policy};

/// The signature schemes a source can use, by the names its `scheme` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemeName {
    /// draft-cavage HTTP Signatures as the DSS sends them, with the DSS's payload.
    Dss,
    /// RFC 9421 HTTP Message Signatures with RFC 9530 `Content-Digest`.
    Rfc9421,
    /// Standard Webhooks v1 (HMAC, `whsec_` secrets) and v1a (ed25519).
    StandardWebhooks,
    /// GitHub's `X-Hub-Signature-256`.
    #[serde(rename = "github")]
    GitHub,
    /// Stripe's `Stripe-Signature`.
    Stripe,
    /// Slack's v0 signing secret.
    Slack,
    /// Shopify's `X-Shopify-Hmac-Sha256`.
    Shopify,
    /// A generic HMAC-SHA256: header, prefix, encoding and signed-content template.
    Hmac,
}

impl SchemeName {
    /// Every scheme, in the order the documentation lists them.
    pub const ALL: [Self; 8] = [
        Self::Dss,
        Self::Rfc9421,
        Self::StandardWebhooks,
        Self::GitHub,
        Self::Stripe,
        Self::Slack,
        Self::Shopify,
        Self::Hmac,
    ];

    /// The name as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dss => "dss",
            Self::Rfc9421 => "rfc9421",
            Self::StandardWebhooks => "standard-webhooks",
            Self::GitHub => "github",
            Self::Stripe => "stripe",
            Self::Slack => "slack",
            Self::Shopify => "shopify",
            Self::Hmac => "hmac",
        }
    }

    /// What a request of this scheme is checked with, from a source's options (the defaults
    /// for [`SchemeName::Hmac`] sign the raw body into `x-signature`, in hex); `None` for the
    /// DSS, whose [`Dss`] scheme is built with its source's key ring ([`Sources::new`]).
    pub fn scheme(self, options: &SourceSpec) -> Result<Option<Box<dyn Scheme>>, String> {
        let window = schemes::Window(options.window()?);
        Ok(Some(match self {
            Self::Dss => return Ok(None),
            Self::Rfc9421 => {
                let required = match &options.required_components {
                    Some(required) => {
                        schemes::rfc9421::check_required(required)
                            .map_err(|e| format!("required_components: {e}"))?;
                        required.clone()
                    }
                    None => schemes::rfc9421::DEFAULT_REQUIRED
                        .map(str::to_owned)
                        .to_vec(),
                };
                Box::new(schemes::rfc9421::Rfc9421 {
                    window,
                    required,
                    label: options.label.clone(),
                })
            }
            Self::StandardWebhooks => {
                Box::new(schemes::standard_webhooks::StandardWebhooks { window })
            }
            Self::GitHub => Box::new(schemes::GITHUB),
            Self::Stripe => Box::new(schemes::stripe::Stripe { window }),
            Self::Slack => Box::new(schemes::slack::Slack { window }),
            Self::Shopify => Box::new(schemes::SHOPIFY),
            Self::Hmac => {
                Box::new(GenericHmac::new(options.hmac_config(window)?).map_err(|e| {
                    format!("{e} (header, prefix, encoding, template, timestamp_header, id_header)")
                })?)
            }
        }))
    }

    /// The payload field holding the event type unless the source names one.
    fn default_event_type_field(self) -> Option<&'static str> {
        match self {
            Self::Stripe | Self::StandardWebhooks | Self::Slack => Some("type"),
            _ => None,
        }
    }
}

impl std::fmt::Display for SchemeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SchemeName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|n| n.as_str()).collect();
                format!("unknown scheme {s:?}; the schemes are {}", names.join(", "))
            })
    }
}

/// What identifies one event across its sender's retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedupRule {
    /// The DSS's fields (subscription, bundle, version, event type): the DSS's own key.
    Dss,
    /// The delivery id the scheme reads (`X-GitHub-Delivery`, `webhook-id`, …).
    DeliveryId,
    /// The SHA-256 of the body: a retry that sends the same bytes.
    Body,
    /// A header's value.
    Header(http::HeaderName),
    /// A field of the JSON payload, by its dotted path.
    Field(Vec<String>),
}

impl std::str::FromStr for DedupRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected =
            "expected \"delivery-id\", \"body\", \"header:<name>\" or \"field:<dotted.path>\"";
        match s {
            "delivery-id" => Ok(Self::DeliveryId),
            "body" => Ok(Self::Body),
            _ => match s.split_once(':') {
                Some(("header", name)) => http::HeaderName::try_from(name)
                    .map(Self::Header)
                    .map_err(|_| format!("{name:?} is not a header name")),
                Some(("field", path)) => field_path(path).map(Self::Field),
                _ => Err(format!("{s:?}: {expected}")),
            },
        }
    }
}

impl std::fmt::Display for DedupRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dss => f.write_str("the DSS fields"),
            Self::DeliveryId => f.write_str("delivery-id"),
            Self::Body => f.write_str("body"),
            Self::Header(name) => write!(f, "header:{name}"),
            Self::Field(path) => write!(f, "field:{}", path.join(".")),
        }
    }
}

/// The sources in effect, built once at start.
#[derive(Debug)]
pub struct Sources {
    /// Every source, by name; the DSS alone without `[sources]`.
    list: Vec<Source>,
}

/// One source, built: how its requests are checked and opened.
#[derive(Debug)]
pub(crate) struct Source {
    name: Arc<str>,
    /// Named in `[sources]` (its notifications carry `relay.source`), not the implicit DSS.
    configured: bool,
    paths: Vec<String>,
    /// Its scheme: the DSS's, which holds its own keys, or another sender's.
    scheme: Box<dyn Scheme>,
    /// The keys another sender's scheme checks against (none for the DSS).
    secrets: Secrets,
    /// [`DedupRule::Dss`] for the DSS, whose body is read as its notification.
    dedup: DedupRule,
    event_type_field: Option<Vec<String>>,
    event_type_header: Option<http::HeaderName>,
}

impl Sources {
    /// The sources of a configuration: `configured` (empty: the DSS alone, on every path, with
    /// `keys` and `policy`, exactly the relay without sources).
    pub fn new(configured: &[SourceConfig], keys: &KeyRing, policy: &Policy) -> Self {
        let dss = |keys: &KeyRing, policy: Policy| -> Box<dyn Scheme> {
            Box::new(Dss {
                keys: keys.clone(),
                policy,
            })
        };
        if configured.is_empty() {
            return Self {
                list: vec![Source {
                    name: crate::notification::DEFAULT_SOURCE.into(),
                    configured: false,
                    paths: Vec::new(),
                    scheme: dss(keys, policy.clone()),
                    secrets: Secrets::new(),
                    dedup: DedupRule::Dss,
                    event_type_field: None,
                    event_type_header: None,
                }],
            };
        }
        let list = configured
            .iter()
            .map(|source| {
                let (scheme, secrets) = match (source.scheme(), &source.keys) {
                    (Some(scheme), Some(SourceKeys::Scheme(secrets))) => (scheme, secrets.clone()),
                    (Some(scheme), _) => (scheme, Secrets::new()),
                    // A DSS source without its own keys uses the relay's.
                    (None, own) => {
                        let ring = match own {
                            Some(SourceKeys::Dss(ring)) => ring,
                            _ => keys,
                        };
                        let max_clock_skew = match source.spec.window_secs {
                            Some(_) => source.window,
                            None => policy.max_clock_skew,
                        };
                        let allow_unsigned = policy.allow_unsigned;
                        let policy = Policy {
                            max_clock_skew,
                            allow_unsigned,
                        };
                        (dss(ring, policy), Secrets::new())
                    }
                };
                Source {
                    name: source.name.as_str().into(),
                    configured: true,
                    paths: source.paths.clone(),
                    scheme,
                    secrets,
                    dedup: source.dedup.clone(),
                    event_type_field: source.event_type_field.clone(),
                    event_type_header: source.event_type_header.clone(),
                }
            })
            .collect();
        Self { list }
    }

    /// The source answering on `path`: the one that names it, else the one without paths.
    pub(crate) fn for_path(&self, path: &str) -> Option<&Source> {
        self.list
            .iter()
            .find(|s| s.paths.iter().any(|p| p == path))
            .or_else(|| self.list.iter().find(|s| s.paths.is_empty()))
    }
}
