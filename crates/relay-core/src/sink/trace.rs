//! A request's trace context, passed on with each of its messages so that a trace does not end
//! at the relay: the W3C `traceparent` (and `tracestate`) the sender sent, else the X-Ray trace
//! header (`X-Amzn-Trace-Id`, which the Lambda adapter sets to the invocation's own trace id).
//! SQS takes it as the `AWSTraceHeader` system attribute (X-Ray's form), Pub/Sub as the
//! `googclient_traceparent` attribute and SNS as a `traceparent` attribute (W3C's form). A
//! header that does not parse is ignored, never refused.

use std::fmt::Write as _;

/// The W3C header.
const TRACEPARENT: &str = "traceparent";
/// The W3C vendors' header, passed on with a valid `traceparent` only.
const TRACESTATE: &str = "tracestate";
/// X-Ray's header.
pub const XRAY_HEADER: &str = "x-amzn-trace-id";

/// The longest `tracestate` passed on (the W3C's: vendors keep at least 512 characters).
const MAX_TRACESTATE: usize = 512;

/// A trace and the span the relay's messages are children of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    trace_id: String,
    /// 16 lowercase hex digits, not all zero: the caller's span. An X-Ray header may have none.
    parent_id: Option<String>,
    /// Whether the caller records the trace; unknown when an X-Ray header does not say.
    sampled: Option<bool>,
    /// The `tracestate` that came with a `traceparent`.
    tracestate: Option<String>,
}

impl TraceContext {
    /// The request's trace context: its `traceparent` (with its `tracestate`) when that
    /// parses, else its X-Ray header when that does, else none.
    pub fn from_headers(headers: &http::HeaderMap) -> Option<Self> {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(context) = text(TRACEPARENT).and_then(Self::from_traceparent) {
            let tracestate = text(TRACESTATE)
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE)
                .filter(|s| s.bytes().all(|b| (0x20..0x7f).contains(&b)));
            return Some(Self {
                tracestate: tracestate.map(str::to_owned),
                ..context
            });
        }
        text(XRAY_HEADER).and_then(Self::from_xray)
    }

    /// `version-traceid-parentid-flags`, version 00 exactly, a later version by its first four
    /// fields (as the W3C asks of a reader that knows only 00); `ff` is invalid.
    fn from_traceparent(text: &str) -> Option<Self> {
        let text = text.trim();
        let mut fields = text.split('-');
        let version = fields.next()?;
        let (trace_id, parent_id, flags) = (fields.next()?, fields.next()?, fields.next()?);
        let later = fields.next();
        let valid_version = is_hex(version, 2) && version != "ff";
        if !valid_version || (version == "00" && (later.is_some() || text.len() != 55)) {
            return None;
        }
        if !is_id(trace_id, 32) || !is_id(parent_id, 16) || !is_hex(flags, 2) {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id: trace_id.to_owned(),
            parent_id: Some(parent_id.to_owned()),
            sampled: Some(flags & 1 == 1),
            tracestate: None,
        })
    }

    /// `Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=<0|1|?>`, in any order, other fields
    /// ignored; `Root` required.
    fn from_xray(text: &str) -> Option<Self> {
        let (mut root, mut parent_id, mut sampled) = (None, None, None);
        for field in text.split(';').map(str::trim).filter(|f| !f.is_empty()) {
            let (key, value) = field.split_once('=')?;
            match key {
                "Root" => {
                    let (time, unique) = value.strip_prefix("1-")?.split_once('-')?;
                    let trace_id = format!("{time}{unique}");
                    root = (is_hex(time, 8) && is_id(&trace_id, 32)).then_some(trace_id);
                }
                "Parent" => parent_id = Some(value).filter(|p| is_id(p, 16)).map(str::to_owned),
                "Sampled" => {
                    sampled = match value {
                        "1" => Some(true),
                        "0" => Some(false),
                        _ => None,
                    }
                }
                _ => {}
            }
        }
        Some(Self {
            trace_id: root?,
            parent_id,
            sampled,
            tracestate: None,
        })
    }

    /// The trace id, 32 hex digits: what the relay's log line and answer name.
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// The W3C `traceparent` of the relay's messages, when the caller's span is known.
    pub fn traceparent(&self) -> Option<String> {
        let parent = self.parent_id.as_ref()?;
        let flags = u8::from(self.sampled == Some(true));
        Some(format!("00-{}-{parent}-{flags:02x}", self.trace_id))
    }

    /// The `tracestate` that came with the `traceparent`.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The X-Ray trace header (`AWSTraceHeader`): the W3C trace id's first 8 digits are its
    /// epoch seconds, the other 24 its unique part.
    pub fn xray_header(&self) -> String {
        let (time, unique) = self.trace_id.split_at(8);
        let mut header = format!("Root=1-{time}-{unique}");
        if let Some(parent) = &self.parent_id {
            let _ = write!(header, ";Parent={parent}");
        }
        if let Some(sampled) = self.sampled {
            let _ = write!(header, ";Sampled={}", u8::from(sampled));
        }
        header
    }
}

/// `text` is `digits` lowercase hex digits.
fn is_hex(text: &str, digits: usize) -> bool {
    text.len() == digits && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `text` is `digits` lowercase hex digits, not all zero (an invalid id in both formats).
fn is_id(text: &str, digits: usize) -> bool {
    is_hex(text, digits) && text.bytes().any(|b| b != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_passes_on_in_both_forms() {
        let context = TraceContext::from_headers(&headers(&[
            (TRACEPARENT, PARENT),
            (TRACESTATE, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ]))
        .unwrap();
        assert_eq!(context.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.traceparent().as_deref(), Some(PARENT));
        assert_eq!(
            context.tracestate(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        assert_eq!(
            context.xray_header(),
            "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
        );
        // A later version is read by its first four fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes";
        let context = TraceContext::from_headers(&headers(&[(TRACEPARENT, later)])).unwrap();
        assert_eq!(
            context.traceparent().as_deref(),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
        );
    }

    #[test]
    fn an_xray_header_passes_on_and_a_traceparent_wins_over_it() {
        let xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let context = TraceContext::from_headers(&headers(&[(XRAY_HEADER, xray)])).unwrap();
        assert_eq!(context.xray_header(), xray);
        assert_eq!(
            context.traceparent().as_deref(),
            Some("00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
        );
        // API Gateway's header may carry the root alone: no traceparent then.
        let root = "Root=1-5759e988-bd862e3fe1be46a994272793";
        let context = TraceContext::from_headers(&headers(&[(XRAY_HEADER, root)])).unwrap();
        assert_eq!(context.xray_header(), root);
        assert_eq!(context.traceparent(), None);
        let both =
            TraceContext::from_headers(&headers(&[(XRAY_HEADER, xray), (TRACEPARENT, PARENT)]));
        assert_eq!(both.unwrap().trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn a_malformed_header_is_ignored() {
        let parents = [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ]
        .map(|value| (TRACEPARENT, value));
        let xrays = [
            "Parent=53995c3f42cd8ad8;Sampled=1",
            "Root=2-5759e988-bd862e3fe1be46a994272793",
            "Root=1-5759e988-bd862e3f",
            "Root=1-00000000-000000000000000000000000",
            "garbage",
        ]
        .map(|value| (XRAY_HEADER, value));
        for bad in parents.into_iter().chain(xrays) {
            assert_eq!(
                TraceContext::from_headers(&headers(&[bad])),
                None,
                "{bad:?}"
            );
        }
        // A tracestate too long, or not text, is left behind; the traceparent still passes.
        let long = "a=".to_owned() + &"b".repeat(600);
        for state in [long.as_str(), "x=\u{7f}"] {
            let mut pairs = headers(&[(TRACEPARENT, PARENT)]);
            if let Ok(value) = http::HeaderValue::from_str(state) {
                pairs.insert(TRACESTATE, value);
            }
            let context = TraceContext::from_headers(&pairs).unwrap();
            assert_eq!(context.tracestate(), None, "{state:?}");
        }
    }
}
