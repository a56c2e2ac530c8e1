//! A source's configuration: one `[sources.<name>]` table as written (`SourceSpec`), checked
//! into a `SourceConfig` (its scheme, paths, window, dedup rule, event type, and its keys from
//! `secret_env`, `secret_file` or, read at start, `secret_arn`).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::{DedupRule, SchemeName};
use crate::schemes::hmac::{Encoding, HmacConfig};
use crate::schemes::{DEFAULT_WINDOW, Ed25519VerifyingKey, Scheme, Secrets, Window};
use crate::verify::{KeyRing, Secret};

/// A dotted field path (`match.bundle_uuid`) as its names.
pub(super) fn field_path(path: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
    match parts.iter().any(String::is_empty) {
        true => Err(format!("{path:?} is not a dotted field path")),
        false => Ok(parts),
    }
}

/// One `[sources.<name>]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// The signature scheme.
    pub scheme: Option<SchemeName>,
    /// The request paths it answers on; none: every path no other source names.
    #[serde(default)]
    pub paths: Vec<String>,
    /// The variable holding its secret, or a JSON object of key ids to secrets; for the DSS,
    /// unset (with `secret_file` and `secret_arn`) means the relay's keys (`RELAY_HMAC_KEYS`, …).
    pub secret_env: Option<String>,
    /// A file holding the same, read at start.
    pub secret_file: Option<String>,
    /// An AWS Secrets Manager secret holding the same, read at start.
    pub secret_arn: Option<String>,
    /// The largest distance between a signed timestamp and the relay's clock, in seconds
    /// (default 300; for the DSS, `RELAY_MAX_CLOCK_SKEW_SECS`).
    pub window_secs: Option<u64>,
    /// What identifies one event across retries: `delivery-id`, `body`, `header:<name>`,
    /// `field:<dotted.path>`.
    pub dedup_key: Option<String>,
    /// The payload field holding the event type (`type` for Stripe, Standard Webhooks, Slack).
    pub event_type_field: Option<String>,
    /// `hmac`: the header carrying the signature (default `x-signature`).
    pub header: Option<String>,
    /// `hmac`: a prefix before the signature, e.g. `sha256=`.
    pub prefix: Option<String>,
    /// `hmac`: `hex` (default) or `base64`.
    pub encoding: Option<String>,
    /// `hmac`: the signed content (default `{body}`), with `{timestamp}`, `{id}`,
    /// `{header:<name>}`.
    pub template: Option<String>,
    /// `hmac`: the header carrying the signed Unix timestamp.
    pub timestamp_header: Option<String>,
    /// `hmac`: the header carrying the delivery id.
    pub id_header: Option<String>,
    /// `hmac`: the header carrying the event type.
    pub event_type_header: Option<String>,
    /// `rfc9421`: verify only the signature with this label.
    pub label: Option<String>,
    /// `rfc9421`: the components a signature must cover (default `["@method", "@path",
    /// "content-digest"]`; `["content-digest"]` signs the body alone).
    pub required_components: Option<Vec<String>>,
}

impl SourceSpec {
    pub(super) fn window(&self) -> Result<Duration, String> {
        match self.window_secs {
            Some(0) => Err("window_secs must be at least 1".into()),
            Some(secs) => Ok(Duration::from_secs(secs)),
            None => Ok(DEFAULT_WINDOW),
        }
    }

    pub(super) fn hmac_config(&self, window: Window) -> Result<HmacConfig, String> {
        let encoding = match self.encoding.as_deref() {
            None | Some("hex") => Encoding::Hex,
            Some("base64") => Encoding::Base64,
            Some(other) => {
                return Err(format!(
                    "encoding {other:?}: expected \"hex\" or \"base64\""
                ));
            }
        };
        Ok(HmacConfig {
            header: self.header.clone().unwrap_or_else(|| "x-signature".into()),
            prefix: self.prefix.clone(),
            encoding,
            template: self.template.clone().unwrap_or_else(|| "{body}".into()),
            timestamp_header: self.timestamp_header.clone(),
            id_header: self.id_header.clone(),
            window,
        })
    }

    /// The options set that `scheme` does not read, in the order the table lists them.
    fn unused(&self, scheme: SchemeName) -> Vec<&'static str> {
        let hmac = scheme == SchemeName::Hmac;
        let rfc9421 = scheme == SchemeName::Rfc9421;
        let not_dss = scheme != SchemeName::Dss;
        // Each option: its name, whether it is set, whether `scheme` reads it.
        let options = [
            ("header", self.header.is_some(), hmac),
            ("prefix", self.prefix.is_some(), hmac),
            ("encoding", self.encoding.is_some(), hmac),
            ("template", self.template.is_some(), hmac),
            ("timestamp_header", self.timestamp_header.is_some(), hmac),
            ("id_header", self.id_header.is_some(), hmac),
            ("event_type_header", self.event_type_header.is_some(), hmac),
            ("label", self.label.is_some(), rfc9421),
            (
                "required_components",
                self.required_components.is_some(),
                rfc9421,
            ),
            ("dedup_key", self.dedup_key.is_some(), not_dss),
            ("event_type_field", self.event_type_field.is_some(), not_dss),
        ];
        (options.into_iter())
            .filter(|&(_, set, read)| set && !read)
            .map(|(name, ..)| name)
            .collect()
    }
}

/// One source, checked and ready: its name, paths, scheme and keys.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// Its name, as `$source` in routes and the `relay.source` attribute give it.
    pub name: String,
    /// The paths it answers on; empty: every path no other source names.
    pub paths: Vec<String>,
    /// Its scheme.
    pub scheme: SchemeName,
    /// Its keys: for the DSS, `None` means the relay's keys.
    pub keys: Option<SourceKeys>,
    /// The timestamp window (for the DSS, `None`: the relay's `Date` check).
    pub window: Option<Duration>,
    /// What identifies one of its events across retries.
    pub dedup: DedupRule,
    /// The payload field holding the event type.
    pub event_type_field: Option<Vec<String>>,
    /// The header holding the event type (`hmac`).
    pub event_type_header: Option<http::HeaderName>,
    /// The variable its keys came from, for `relay check`.
    pub secret_env: Option<String>,
    /// The Secrets Manager secret its keys are read from at start, when they come from one.
    pub secret_arn: Option<String>,
    /// The options as written, for building its scheme.
    pub spec: SourceSpec,
}

/// A source's keys, as its `secret_env` variable held them.
#[derive(Debug, Clone)]
pub enum SourceKeys {
    /// For the DSS: keys by keyId, and a catch-all.
    Dss(KeyRing),
    /// For every other scheme.
    Scheme(Secrets),
}

impl SourceConfig {
    /// Checks one `[sources.<name>]` table, reading its secret through `var`; every problem is
    /// a message for the configuration's error list.
    /// `read_keys`: whether its keys are read (a relay) or left out (`relay replay`, which verifies
    /// nothing: a missing secret is then no problem).
    pub fn new(
        name: &str,
        spec: &SourceSpec,
        var: &dyn Fn(&str) -> Option<String>,
        read_keys: bool,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let scheme = spec.scheme.unwrap_or_else(|| {
            problems.push(format!(
                "source {name:?} has no scheme; set scheme to one of {}",
                SchemeName::ALL.map(SchemeName::as_str).join(", ")
            ));
            SchemeName::Dss
        });
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        {
            problems.push(format!(
                "source {name:?}: a name is letters, digits, - and _"
            ));
        }
        for path in &spec.paths {
            if !path.starts_with('/') || path.contains(['?', '#']) {
                problems.push(format!(
                    "source {name:?}: path {path:?} must start with / and hold no query"
                ));
            }
        }
        let unused = spec.unused(scheme);
        if !unused.is_empty() {
            problems.push(format!(
                "source {name:?}: the {} scheme does not read {}",
                scheme,
                unused.join(", ")
            ));
        }
        if let Err(e) = scheme.scheme(spec) {
            problems.push(format!("source {name:?}: {e}"));
        }
        let dedup = dedup_rule(name, spec, scheme, &mut problems);
        let (event_type_field, event_type_header) = event_type(name, spec, scheme, &mut problems);
        let keys = match read_keys {
            true => source_keys(name, spec, scheme, var, &mut problems),
            false => None,
        };
        let window = match scheme {
            SchemeName::Dss => spec
                .window_secs
                .map(|s| (s > 0).then(|| Duration::from_secs(s)))
                .unwrap_or(None),
            _ => spec.window().ok(),
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            name: name.to_owned(),
            paths: spec.paths.clone(),
            scheme,
            keys,
            window,
            dedup,
            event_type_field,
            event_type_header,
            secret_env: spec.secret_env.clone(),
            secret_arn: spec.secret_arn.clone().filter(|_| read_keys),
            spec: spec.clone(),
        })
    }

    /// True when the scheme signs a timestamp; otherwise a captured request can be sent again,
    /// and only the ledger's dedup key keeps it from being published twice.
    pub fn has_timestamp(&self) -> bool {
        match self.scheme() {
            None => true,
            Some(scheme) => scheme.has_timestamp(),
        }
    }

    pub(super) fn scheme(&self) -> Option<Box<dyn Scheme>> {
        self.scheme.scheme(&self.spec).ok().flatten()
    }
}

/// Where a source's event type is read: a dotted field of its body (its `event_type_field`,
/// or the scheme's), and a header (`event_type_header`).
fn event_type(
    name: &str,
    spec: &SourceSpec,
    scheme: SchemeName,
    problems: &mut Vec<String>,
) -> (Option<Vec<String>>, Option<http::HeaderName>) {
    let event_type_field = match spec
        .event_type_field
        .as_deref()
        .or(scheme.default_event_type_field())
        .map(field_path)
        .transpose()
    {
        Ok(path) => path,
        Err(e) => {
            problems.push(format!("source {name:?}: event_type_field {e}"));
            None
        }
    };
    let event_type_header =
        match spec.event_type_header.as_deref().map(|h| {
            http::HeaderName::try_from(h).map_err(|_| format!("{h:?} is not a header name"))
        }) {
            None => None,
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                problems.push(format!("source {name:?}: event_type_header {e}"));
                None
            }
        };
    (event_type_field, event_type_header)
}

/// A source's dedup rule: its `dedup_key`, or the scheme's default. A rule that reads what the
/// scheme does not sign (or does not give) is a problem: a captured request sent again with a
/// new value would be published again.
fn dedup_rule(
    name: &str,
    spec: &SourceSpec,
    scheme: SchemeName,
    problems: &mut Vec<String>,
) -> DedupRule {
    match spec.dedup_key.as_deref().map(str::parse::<DedupRule>) {
        None => scheme.default_dedup(spec),
        Some(Ok(DedupRule::DeliveryId)) if !scheme.has_delivery_id(spec) => {
            problems.push(format!(
                "source {name:?}: dedup_key = \"delivery-id\", but the {scheme} scheme gives no delivery id{}",
                match scheme {
                    SchemeName::Hmac => "; set id_header",
                    _ => "",
                }
            ));
            DedupRule::Body
        }
        Some(Ok(DedupRule::DeliveryId)) if !scheme.signs_delivery_id(spec) => {
            problems.push(format!(
                "source {name:?}: dedup_key = \"delivery-id\", but the {scheme} scheme does not sign its delivery id, so a captured request sent again with a new id would be published again; leave dedup_key unset (the body's SHA-256){}",
                match scheme {
                    SchemeName::Hmac => ", or sign {id} in the template",
                    _ => "",
                }
            ));
            DedupRule::Body
        }
        Some(Ok(DedupRule::Header(header)))
            if !scheme
                .signed_headers(spec)
                .contains(&header.as_str().to_owned()) =>
        {
            problems.push(format!(
                "source {name:?}: dedup_key = \"header:{header}\", but the {scheme} scheme does not sign that header, so a captured request sent again with a new value would be published again; use \"body\" or a signed field{}",
                match scheme {
                    SchemeName::Hmac => format!(", or sign {{header:{header}}} in the template"),
                    _ => String::new(),
                }
            ));
            DedupRule::Body
        }
        Some(Ok(rule)) => rule,
        Some(Err(e)) => {
            problems.push(format!("source {name:?}: dedup_key {e}"));
            DedupRule::Body
        }
    }
}

/// A source's keys, from its `secret_env` or `secret_file` (`secret_arn` is read at start);
/// what is wrong with them in `problems`.
fn source_keys(
    name: &str,
    spec: &SourceSpec,
    scheme: SchemeName,
    var: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) -> Option<SourceKeys> {
    let given = [
        spec.secret_env.is_some(),
        spec.secret_file.is_some(),
        spec.secret_arn.is_some(),
    ];
    match (&spec.secret_env, &spec.secret_file) {
        _ if given.iter().filter(|g| **g).count() > 1 => {
            problems.push(format!(
                "source {name:?}: set one of secret_env, secret_file and secret_arn"
            ));
            None
        }
        (Some(env), _) => match var(env).filter(|v| !v.trim().is_empty()) {
            None => {
                problems.push(format!(
                    "source {name:?}: its secret_env {env} is not set (or empty)"
                ));
                None
            }
            Some(text) => keys_or_problem(problems, name, env, scheme, &text),
        },
        (None, Some(path)) => match std::fs::read_to_string(path) {
            Ok(text) if !text.trim().is_empty() => {
                keys_or_problem(problems, name, path, scheme, &text)
            }
            Ok(_) => {
                problems.push(format!("source {name:?}: its secret_file {path} is empty"));
                None
            }
            Err(e) => {
                problems.push(format!(
                    "source {name:?}: its secret_file {path} cannot be read: {}",
                    e.kind()
                ));
                None
            }
        },
        (None, None) => {
            if scheme != SchemeName::Dss && spec.secret_arn.is_none() {
                problems.push(format!(
                    "source {name:?}: set secret_env to the variable that holds its secret (or secret_file, or secret_arn)"
                ));
            }
            None
        }
    }
}

/// The keys `text` holds, or a problem naming the source and where the text came from.
fn keys_or_problem(
    problems: &mut Vec<String>,
    name: &str,
    from: &str,
    scheme: SchemeName,
    text: &str,
) -> Option<SourceKeys> {
    read_keys(scheme, text.trim())
        .map_err(|e| problems.push(format!("source {name:?}: {from}: {e}")))
        .ok()
}

/// Reads a `secret_env` value: one secret, or a JSON object of key ids to secrets. For the
/// DSS, HMAC secrets; for the others, an HMAC secret, or an ed25519 public key written
/// `ed25519:<base64>` or (Standard Webhooks) `whpk_<base64>`.
pub(crate) fn read_keys(scheme: SchemeName, text: &str) -> Result<SourceKeys, String> {
    let named: Vec<(Option<String>, String)> = match text.starts_with('{') {
        true => serde_json::from_str::<BTreeMap<String, String>>(text)
            .map_err(|_| "a JSON object of key ids to secrets, or one secret, expected".to_owned())?
            .into_iter()
            .map(|(id, secret)| (Some(id), secret))
            .collect(),
        false => vec![(None, text.to_owned())],
    };
    if named.is_empty() || named.iter().any(|(_, s)| s.is_empty()) {
        return Err("holds an empty secret".into());
    }
    if scheme == SchemeName::Dss {
        let mut any = None;
        let mut by_id = BTreeMap::new();
        for (id, secret) in named {
            match id {
                Some(id) => {
                    by_id.insert(id, Secret::new(secret));
                }
                None => any = Some(Secret::new(secret)),
            }
        }
        return Ok(SourceKeys::Dss(KeyRing::new(by_id, any)));
    }
    let mut secrets = Secrets::new();
    for (id, secret) in named {
        secrets = match public_key(&secret)? {
            Some(key) => match id {
                Some(id) => secrets.with_ed25519_id(id, key),
                None => secrets.with_ed25519(key),
            },
            None => match id {
                Some(id) => secrets.with_hmac_id(id, Secret::new(secret)),
                None => secrets.with_hmac(Secret::new(secret)),
            },
        };
    }
    Ok(SourceKeys::Scheme(secrets))
}

/// An ed25519 public key written `ed25519:<base64>` or `whpk_<base64>`; `None` for an HMAC
/// secret.
fn public_key(text: &str) -> Result<Option<Ed25519VerifyingKey>, String> {
    let Some(encoded) = text
        .strip_prefix("ed25519:")
        .or_else(|| text.strip_prefix("whpk_"))
    else {
        return Ok(None);
    };
    let bytes: [u8; 32] = BASE64
        .decode(encoded)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("an ed25519 public key is 32 bytes of base64")?;
    Ed25519VerifyingKey::from_bytes(&bytes)
        .map(Some)
        .map_err(|_| "not an ed25519 public key".to_owned())
}
