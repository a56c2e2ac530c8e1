//! What each scheme signs, and so what may identify an event: a dedup key comes from signed
//! content only, and the headers a source reads unsigned are attributes, never its key.

use std::time::Duration;

use super::{DedupRule, SchemeName, SourceSpec};
use crate::schemes;

impl SchemeName {
    /// The rule a source of this scheme identifies its events by unless it names one: the
    /// DSS's fields, the delivery id where the scheme signs it, Stripe's event `id`, else the
    /// body's SHA-256. Never anything unsigned: a capture sent again with a new unsigned id
    /// must be the same event.
    pub(super) fn default_dedup(self, options: &SourceSpec) -> DedupRule {
        match self {
            Self::Dss => DedupRule::Dss,
            Self::StandardWebhooks => DedupRule::DeliveryId,
            Self::Hmac if self.signs_delivery_id(options) => DedupRule::DeliveryId,
            Self::Stripe => DedupRule::Field(vec!["id".into()]),
            Self::GitHub | Self::Shopify | Self::Rfc9421 | Self::Slack | Self::Hmac => {
                DedupRule::Body
            }
        }
    }

    /// The request headers the scheme always signs, lowercase: what a dedup key may be read
    /// from besides the body. GitHub and Shopify sign the body alone; an RFC 9421 signature
    /// covers what each request lists, so none is known in advance.
    pub(crate) fn signed_headers(self, options: &SourceSpec) -> Vec<String> {
        match self {
            Self::StandardWebhooks => vec!["webhook-id".into(), "webhook-timestamp".into()],
            Self::Slack => vec!["x-slack-request-timestamp".into()],
            Self::Hmac => options
                .hmac_config(schemes::Window(Duration::ZERO))
                .map(|c| c.signed_headers())
                .unwrap_or_default(),
            Self::Dss | Self::Rfc9421 | Self::GitHub | Self::Shopify | Self::Stripe => Vec::new(),
        }
    }

    /// The headers a source of this scheme reads that its sender does not sign: the delivery
    /// id and event type GitHub and Shopify send beside their body's signature, a generic
    /// HMAC source's `id_header` and `event_type_header` outside its template. They become
    /// attributes, and never the dedup key.
    pub fn unsigned_headers(self, options: &SourceSpec) -> Vec<String> {
        let signed = self.signed_headers(options);
        let read: Vec<String> = match self {
            Self::GitHub => schemes::GITHUB.unsigned_headers().map(String::from).into(),
            Self::Shopify => schemes::SHOPIFY.unsigned_headers().map(String::from).into(),
            Self::Hmac => options.id_header.iter().cloned().collect(),
            _ => Vec::new(),
        };
        read.into_iter()
            .chain(options.event_type_header.iter().cloned())
            .map(|h| h.to_ascii_lowercase())
            .filter(|h| !signed.contains(h))
            .collect()
    }

    /// Whether the delivery id is signed: Standard Webhooks' `webhook-id`, a generic HMAC
    /// template's `{id}`; not GitHub's or Shopify's.
    pub(super) fn signs_delivery_id(self, options: &SourceSpec) -> bool {
        match self {
            Self::StandardWebhooks => true,
            Self::Hmac => options.id_header.as_deref().is_some_and(|h| {
                self.signed_headers(options)
                    .contains(&h.to_ascii_lowercase())
            }),
            _ => false,
        }
    }

    /// Whether the scheme gives a delivery id (`dedup_key = "delivery-id"` needs one).
    pub(super) fn has_delivery_id(self, options: &SourceSpec) -> bool {
        match self {
            Self::GitHub | Self::Shopify | Self::StandardWebhooks => true,
            Self::Hmac => options.id_header.is_some(),
            Self::Dss | Self::Rfc9421 | Self::Stripe | Self::Slack => false,
        }
    }
}
