//! The generic HMAC scheme's target: its configuration, checked against the template grammar
//! its documentation gives, and verification with it.

use http::{HeaderMap, HeaderName, HeaderValue};
use relay_core::schemes::Proof;
use relay_core::schemes::hmac::{Encoding, GenericHmac, HmacConfig, HmacConfigError};
use relay_core::schemes::{HmacKey, Scheme, Secrets, Signer, Window};
use relay_core::verify::Secret;

use super::{DELIVERY, GITHUB_SECRET, SHOPIFY_SECRET, SLACK_NOW, SLACK_SECRET};
use super::{at, checked, hmac_key, mac_base64, mac_hex, one, round_trip, split};

/// The generic scheme's keys by id: the senders' examples, so that it verifies them.
const TEMPLATE_KEYS: [(&str, &str); 3] = [
    ("github", GITHUB_SECRET),
    ("shopify", SHOPIFY_SECRET),
    ("slack", SLACK_SECRET),
];

/// One piece of a generic template, as its documentation describes it.
#[derive(Debug, PartialEq)]
enum Piece<'t> {
    Text(char),
    Body,
    Timestamp,
    Id,
    Header(&'t str),
}

fn header_name(name: &str) -> Result<(), HmacConfigError> {
    match HeaderName::try_from(name) {
        Ok(h) if h.as_str() == name => Ok(()),
        _ => Err(HmacConfigError::BadHeaderName(name.to_owned())),
    }
}

/// A template's pieces: `{{` and `}}` are braces, `{body}`, `{timestamp}`, `{id}` and
/// `{header:<lower-case name>}` placeholders, any other `{…}` or a lone brace an error.
fn pieces(template: &str) -> Result<Vec<Piece<'_>>, HmacConfigError> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        let (piece, len) = match c {
            '{' | '}' if rest[1..].starts_with(c) => (Piece::Text(c), 2),
            '}' => return Err(HmacConfigError::UnbalancedBrace),
            '{' => {
                let end = rest.find('}').ok_or(HmacConfigError::UnbalancedBrace)?;
                let piece = match &rest[1..end] {
                    "body" => Piece::Body,
                    "timestamp" => Piece::Timestamp,
                    "id" => Piece::Id,
                    name => match name.strip_prefix("header:") {
                        Some(h) => header_name(h).map(|()| Piece::Header(h))?,
                        None => return Err(HmacConfigError::UnknownPlaceholder(name.to_owned())),
                    },
                };
                (piece, end + 1)
            }
            _ => (Piece::Text(c), c.len_utf8()),
        };
        pieces.push(piece);
        rest = &rest[len..];
    }
    Ok(pieces)
}

/// What `GenericHmac::new` answers for `config`: the first rule its documentation gives that
/// `config` breaks, in the documentation's order.
fn expected_config(config: &HmacConfig) -> Result<(), HmacConfigError> {
    let named = [
        Some(&config.header),
        config.timestamp_header.as_ref(),
        config.id_header.as_ref(),
    ];
    named
        .into_iter()
        .flatten()
        .try_for_each(|name| header_name(name))?;
    let pieces = pieces(&config.template)?;
    let (ts, id) = (&config.timestamp_header, &config.id_header);
    let rules = [
        (!pieces.contains(&Piece::Body), HmacConfigError::NoBody),
        (
            pieces.contains(&Piece::Timestamp) && ts.is_none(),
            HmacConfigError::NoHeaderFor("timestamp"),
        ),
        (
            pieces.contains(&Piece::Id) && id.is_none(),
            HmacConfigError::NoHeaderFor("id"),
        ),
        (
            ts.is_some() && !pieces.contains(&Piece::Timestamp),
            HmacConfigError::UnsignedTimestamp,
        ),
    ];
    if let Some((_, broken)) = rules.into_iter().find(|(broken, _)| *broken) {
        return Err(broken);
    }
    // Literal text between two placeholders, a brace included, keeps them apart.
    let named = |p: &Piece<'_>| match p {
        Piece::Text(_) => None,
        Piece::Body => Some("body".to_owned()),
        Piece::Timestamp => Some("timestamp".to_owned()),
        Piece::Id => Some("id".to_owned()),
        Piece::Header(h) => Some(format!("header:{h}")),
    };
    if let Some(w) = pieces
        .windows(2)
        .find(|w| named(&w[0]).is_some() && named(&w[1]).is_some())
    {
        return Err(HmacConfigError::Adjacent(
            named(&w[0]).expect("a placeholder"),
            named(&w[1]).expect("a placeholder"),
        ));
    }
    // The body once, and last: nothing after it can move the boundary.
    let bodies = pieces.iter().filter(|p| **p == Piece::Body).count();
    if pieces.last() != Some(&Piece::Body) || bodies > 1 {
        return Err(HmacConfigError::BodyNotLast);
    }
    Ok(())
}

/// True when a placeholder's value holds the literal text that follows it in the template:
/// the content could then be split another way, and the scheme refuses it.
fn ambiguous(pieces: &[Piece<'_>], ts: &str, id: &str, header: &dyn Fn(&str) -> String) -> bool {
    pieces.iter().enumerate().any(|(i, piece)| {
        let value = match piece {
            Piece::Text(_) | Piece::Body => return false,
            Piece::Timestamp => ts.to_owned(),
            Piece::Id => id.to_owned(),
            Piece::Header(name) => header(name),
        };
        let separator: String = pieces[i + 1..]
            .iter()
            .map_while(|p| match p {
                Piece::Text(c) => Some(*c),
                _ => None,
            })
            .collect();
        !separator.is_empty() && value.contains(&separator)
    })
}

/// The content a template signs, with each placeholder's value.
fn expand(
    pieces: &[Piece<'_>],
    body: &[u8],
    ts: &str,
    id: &str,
    header: &dyn Fn(&str) -> String,
) -> Vec<u8> {
    let mut content = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(c) => content.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            Piece::Body => content.extend_from_slice(body),
            Piece::Timestamp => content.extend_from_slice(ts.as_bytes()),
            Piece::Id => content.extend_from_slice(id.as_bytes()),
            Piece::Header(name) => content.extend_from_slice(header(name).as_bytes()),
        }
    }
    content
}

/// The generic HMAC scheme: six lines (the template, the signature header, its prefix, `hex`
/// or `base64`, the timestamp header and the id header; an empty line for none), then a
/// request. `GenericHmac::new` answers as the documented grammar says; `sign` signs the
/// template filled in; an accepted request carries the HMAC of the template filled in with its
/// own body and headers, under a configured key, and proves its id and timestamp.
pub fn hmac_template(data: &[u8]) {
    check_hmac_template(data);
}

pub(super) fn check_hmac_template(data: &[u8]) -> bool {
    let mut lines = data.splitn(7, |&b| b == b'\n');
    let mut fields = Vec::with_capacity(6);
    for _ in 0..6 {
        let line = lines.next().unwrap_or_default();
        let Ok(text) = std::str::from_utf8(line.strip_suffix(b"\r").unwrap_or(line)) else {
            return false;
        };
        fields.push(text);
    }
    let (headers, body) = split(lines.next().unwrap_or_default());
    let config = config_of(&fields);
    let scheme = GenericHmac::new(config.clone());
    let model = expected_config(&config);
    assert_eq!(scheme.as_ref().err(), model.as_ref().err(), "{config:?}");
    let Ok(scheme) = scheme else {
        return false;
    };
    let pieces = pieces(&config.template).expect("a template GenericHmac accepts");
    let secrets = TEMPLATE_KEYS
        .iter()
        .fold(Secrets::new(), |s, (id, secret)| {
            s.with_hmac_id(*id, Secret::new(*secret))
        });
    check_signing(&scheme, &config, &pieces, &secrets, body);
    let Some(proof) = checked(&scheme, &headers, body, &secrets, at(SLACK_NOW), true) else {
        return false;
    };
    check_accepted(&config, &pieces, &headers, body, &proof);
    true
}

/// The configuration six lines give: template, header, prefix, encoding, timestamp and id
/// headers (an empty line: none).
fn config_of(fields: &[&str]) -> HmacConfig {
    let optional = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    HmacConfig {
        template: fields[0].to_owned(),
        header: fields[1].to_owned(),
        prefix: optional(fields[2]),
        encoding: match fields[3] {
            "base64" => Encoding::Base64,
            _ => Encoding::Hex,
        },
        timestamp_header: optional(fields[4]),
        id_header: optional(fields[5]),
        window: Window::default(),
    }
}

/// The key a test key id names.
fn template_key(id: &str) -> HmacKey {
    let found = TEMPLATE_KEYS.iter().find(|k| k.0 == id);
    HmacKey::from(Secret::new(found.expect("a configured key").1))
}

/// `content`'s MAC in the configured encoding.
fn mac_of(config: &HmacConfig, key: &HmacKey, content: &[u8]) -> String {
    match config.encoding {
        Encoding::Hex => mac_hex(key, content),
        Encoding::Base64 => mac_base64(key, content),
    }
}

/// What the scheme signs: the model's MAC, or a refusal only where the model cannot sign
/// either; and what it signs verifies.
fn check_signing(
    scheme: &GenericHmac,
    config: &HmacConfig,
    pieces: &[Piece],
    secrets: &Secrets,
    body: &[u8],
) {
    let prefix = config.prefix.as_deref().unwrap_or_default();
    let now = at(SLACK_NOW);
    let signs_a_header = pieces.iter().any(|p| matches!(p, Piece::Header(_)));
    let ts = SLACK_NOW.to_string();
    match scheme.sign(
        body,
        Signer::new(&hmac_key(&template_key("slack")), now, Some(DELIVERY)),
    ) {
        Err(error) => {
            let unfit = HeaderValue::from_bytes(prefix.as_bytes()).is_err();
            let shifts = ambiguous(pieces, &ts, DELIVERY, &|_| String::new());
            assert!(signs_a_header || unfit || shifts, "cannot sign: {error}");
        }
        Ok(own) => {
            assert!(!signs_a_header, "signed a template with {{header:…}}");
            let content = expand(pieces, body, &ts, DELIVERY, &|_| String::new());
            let expected = format!(
                "{prefix}{}",
                mac_of(config, &template_key("slack"), &content)
            );
            assert_eq!(own[0].1, expected, "{}", config.template);
            let names = [Some(&config.header), config.timestamp_header.as_ref()];
            let names = [names[0], names[1], config.id_header.as_ref()];
            let names: Vec<_> = names.into_iter().flatten().collect();
            let distinct = (1..names.len()).all(|i| !names[..i].contains(&names[i]));
            let visible = prefix
                .bytes()
                .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
            if distinct && visible {
                round_trip(scheme, Ok(own), secrets, body, now, "slack");
            }
        }
    }
}

/// That an accepted request was signed as the model signs, with no value holding its
/// separator, and that its proof says what the request proved.
fn check_accepted(
    config: &HmacConfig,
    pieces: &[Piece],
    headers: &HeaderMap,
    body: &[u8],
    proof: &Proof,
) {
    let prefix = config.prefix.as_deref().unwrap_or_default();
    let value = one(headers, &config.header).expect("an accepted signature");
    let ts = config.timestamp_header.as_deref();
    let ts = ts.map(|h| one(headers, h).expect("an accepted timestamp"));
    let id = config.id_header.as_deref().and_then(|h| one(headers, h));
    let header = |name: &str| one(headers, name).expect("a signed header").to_owned();
    let (ts_text, id_text) = (ts.unwrap_or_default(), id.unwrap_or_default());
    assert!(
        !ambiguous(pieces, ts_text, id_text, &header),
        "accepted a value holding its separator, for {}",
        config.template
    );
    let content = expand(pieces, body, ts_text, id_text, &header);
    let key_id = proof.key_id.as_deref().expect("a named key");
    let mac = mac_of(config, &template_key(key_id), &content);
    let encoded = value.strip_prefix(prefix).expect("an accepted prefix");
    let signed = match config.encoding {
        Encoding::Hex => encoded.eq_ignore_ascii_case(&mac),
        Encoding::Base64 => encoded == mac,
    };
    assert!(signed, "accepted {value} for {}", config.template);
    let proof_is = Proof {
        key_id: proof.key_id.clone(),
        delivery_id: id.map(str::to_owned),
        event_type: None,
        signed_at: ts.map(|t| at(t.parse().expect("an accepted timestamp"))),
    };
    assert_eq!(*proof, proof_is, "{}", config.template);
}
