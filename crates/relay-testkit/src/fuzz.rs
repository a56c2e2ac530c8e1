//! The fuzz targets' bodies, shared with the test that replays the named seeds and regressions
//! on the stable toolchain. Each takes arbitrary bytes, must never panic on them, and asserts an
//! invariant that would show a real fault.

use std::sync::OnceLock;

use bytes::Bytes;
use relay_core::config::FileConfig;
use relay_core::route::{Input, Pattern};
use relay_core::verify::{self, FixedClock, KeyRing, Policy, Secret, SignedRequest};

use super::capture;

/// The `Authorization` parser: an accepted header names a non-empty keyId it contains.
pub fn signature_header(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(key_id) = verify::parse_authorization(text) {
        assert!(!key_id.is_empty() && text.contains(key_id), "{text:?}");
    }
}

/// Verification end to end over `Authorization`, `Date` and `Digest` lines and a body: a
/// request is accepted only when it carries exactly the signature and digest the key gives.
pub fn verification(data: &[u8]) {
    let mut parts = data.splitn(4, |&b| b == b'\n');
    let (authorization, date, digest) = (parts.next(), parts.next(), parts.next());
    let body = parts.next().unwrap_or_default();
    let mut headers = http::HeaderMap::new();
    for (name, value) in [
        ("authorization", authorization),
        ("date", date),
        ("digest", digest),
    ] {
        if let Some(value) = value.and_then(|v| http::HeaderValue::from_bytes(v).ok()) {
            headers.insert(name, value);
        }
    }
    let uri = http::Uri::from_static("/");
    let request = SignedRequest {
        method: &http::Method::POST,
        uri: &uri,
        headers: &headers,
        body,
    };
    let keys = KeyRing::new(
        [("k".to_owned(), Secret::new(capture::SECRET))].into(),
        None,
    );
    let policy = Policy {
        max_clock_skew: None,
        allow_unsigned: false,
    };
    if verify::verify(request, &keys, &policy, &FixedClock(capture::time())).is_ok() {
        let date = headers["date"].to_str().expect("verified headers are text");
        let at = httpdate::parse_http_date(date).unwrap_or(capture::time());
        let expected =
            verify::sign("k", &Secret::new(capture::SECRET), at, body).expect("a valid keyId");
        assert_eq!(
            headers["digest"], expected.digest,
            "accepted with a digest that is not the body's"
        );
        let given = headers["authorization"].to_str().unwrap_or_default();
        let signature = |v: &str| {
            v.split("signature=\"")
                .nth(1)
                .map(|s| s.split('"').next().unwrap_or_default().to_owned())
        };
        assert_eq!(
            signature(given),
            signature(expected.authorization.to_str().unwrap_or_default()),
            "accepted a signature the key did not make"
        );
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

/// Multipart and JSON intake over a `Content-Type` line and a body: the payload is always
/// bytes of the body itself, never a rewritten copy.
pub fn intake(data: &[u8]) {
    let (content_type, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let mut headers = http::HeaderMap::new();
    if let Ok(value) = http::HeaderValue::from_bytes(content_type) {
        headers.insert("content-type", value);
    }
    let body = Bytes::copy_from_slice(body);
    let result = runtime().block_on(relay_core::intake::extract_payload(
        &headers,
        body.clone(),
        "payload",
    ));
    if let Ok(payload) = result {
        let inside = payload.is_empty() || body.windows(payload.len()).any(|w| w == payload);
        assert!(inside, "the payload is not a slice of the body");
    }
}

/// Notification parsing: an accepted payload has the required fields and a hex dedup key.
pub fn notification(data: &[u8]) {
    if let Ok(n) = relay_core::Notification::parse(Bytes::copy_from_slice(data)) {
        assert!(
            n.subscription_id().is_some_and(|s| !s.is_empty())
                && n.bundle_uuid().is_some_and(|b| !b.is_empty())
        );
        assert!(n.dedup_key().len() == 64 && n.dedup_key().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            n.payload().as_ref(),
            data,
            "the payload is kept byte for byte"
        );
    }
}

/// Pattern compilation and matching over a pattern and a document separated by a NUL byte:
/// `matches` and `first_failure` always agree.
pub fn pattern(data: &[u8]) {
    let (pattern, document) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"{}"[..]),
    };
    let (Ok(pattern), Ok(document)) = (
        serde_json::from_slice::<serde_json::Value>(pattern),
        serde_json::from_slice::<serde_json::Value>(document),
    ) else {
        return;
    };
    if let Ok(compiled) = Pattern::compile(&pattern) {
        let request = serde_json::json!({"path": "/", "query": {}, "headers": {}});
        let input = Input::new(&document, &request);
        assert_eq!(
            compiled.matches(&input),
            compiled.first_failure(&input).is_none(),
            "{pattern}"
        );
    }
}

/// The configuration document: an error gives a place and never the text of a line. The
/// lines checked are assignments (`key = value`): a line of free text could be the parser's
/// own wording, which the message rightly contains.
pub fn config_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = FileConfig::parse(text) {
        let message = error.to_string();
        assert!(
            message.starts_with(|c: char| c.is_ascii_digit()),
            "no place: {message}"
        );
        let assignments = text
            .lines()
            .map(str::trim)
            .filter(|l| l.len() >= 24 && l.contains(" = "));
        for line in assignments {
            assert!(
                !message.contains(line),
                "the line {line:?} is echoed in {message}"
            );
        }
    }
}

/// The trace context of `headers`, never a panic: what it passes on reads back as itself.
fn trace_context(headers: &http::HeaderMap) -> Option<relay_core::sink::TraceContext> {
    use relay_core::sink::TraceContext;
    let context = TraceContext::from_headers(headers)?;
    let again = |name: &str, value: String| {
        let headers = http::HeaderMap::from_iter([(
            http::HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
            http::HeaderValue::from_str(&value).expect("a header value"),
        )]);
        TraceContext::from_headers(&headers).expect("it reads back")
    };
    if let Some(traceparent) = context.traceparent() {
        assert_eq!(
            again("traceparent", traceparent).trace_id(),
            context.trace_id()
        );
    }
    let xray = again(relay_core::sink::XRAY_HEADER, context.xray_header());
    assert_eq!(xray.trace_id(), context.trace_id());
    Some(context)
}

/// An archive record of a request: header lines (`name: value`), a blank line, the body. What
/// the record keeps holds no header that may carry a credential or a signature, only headers of
/// the allow-list or one a route names (`x-route-named`); kept and dropped name every header;
/// sealed, the record opens to itself, and no byte of it can change unnoticed.
pub fn archive_record(data: &[u8]) {
    use relay_core::archive::{KEPT_HEADERS, Record, is_secret_header};
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &b""[..]),
    };
    let mut headers = http::HeaderMap::new();
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(&line[..colon]),
            http::HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    let request = relay_core::route::request_document("/", None, &headers);
    let all: std::collections::BTreeSet<String> = request["headers"]
        .as_object()
        .expect("headers")
        .keys()
        .cloned()
        .collect();
    let message = relay_core::Message {
        payload: Bytes::copy_from_slice(body),
        attributes: Default::default(),
        dedup_key: "fuzz".into(),
        group_id: None,
        dedup_id: None,
        ordering_key: None,
        received_at: std::time::SystemTime::UNIX_EPOCH,
        trace: trace_context(&headers).map(std::sync::Arc::new),
    };
    let named = std::collections::BTreeSet::from(["x-route-named".to_owned()]);
    let record = Record::of(&message, request, &named);
    let kept: std::collections::BTreeSet<String> = record.request["headers"]
        .as_object()
        .expect("headers")
        .keys()
        .cloned()
        .collect();
    for name in &kept {
        assert!(!is_secret_header(name), "kept {name}");
        assert!(
            KEPT_HEADERS.contains(&name.as_str()) || named.contains(name),
            "kept {name}, neither allowed nor named"
        );
    }
    let dropped: std::collections::BTreeSet<String> =
        record.dropped_headers.iter().cloned().collect();
    assert_eq!(
        kept.union(&dropped).cloned().collect::<Vec<_>>(),
        all.iter().cloned().collect::<Vec<_>>()
    );
    assert!(kept.is_disjoint(&dropped));
    let key = crate::archive::key();
    let sealed = key.seal(&record.to_bytes());
    assert_eq!(Record::open(&key, &sealed).expect("its own seal"), record);
    let at = data.iter().map(|&b| usize::from(b)).sum::<usize>() % sealed.len();
    let mut changed = sealed.clone();
    changed[at] ^= 0x20;
    assert!(
        Record::open(&key, &changed).is_err(),
        "byte {at} changed unnoticed"
    );
}

/// A destination's transform: a program on the first line, a JSON document after it (or, when
/// it is not JSON, its text as a string). Compiling and running never panic; a body is compact
/// JSON within the size limit; a run ends within its time limit and a generous margin.
/// Programs that repeat a string (`*`) are left out: jaq allocates a repetition in one step,
/// which no time limit can stop (docs/destinations.md says so).
pub fn transform(data: &[u8]) {
    use relay_core::transform::{Limits, Program};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (source, document) = text.split_once('\n').unwrap_or((text, "null"));
    if source.contains('*') {
        return;
    }
    let document = serde_json::from_str(document)
        .unwrap_or_else(|_| serde_json::Value::String(document.to_owned()));
    let Ok(program) = Program::compile(source) else {
        return;
    };
    let limits = Limits {
        timeout: std::time::Duration::from_millis(10),
        max_output: 4096,
    };
    let started = std::time::Instant::now();
    let result = program.run(&document, limits);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{source:?} ran for {:?}",
        started.elapsed()
    );
    if let Ok(body) = result {
        assert!(body.len() <= limits.max_output, "{source:?}");
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&body);
        assert!(
            parsed.is_ok(),
            "{source:?} wrote {:?}",
            String::from_utf8_lossy(&body)
        );
    }
}
