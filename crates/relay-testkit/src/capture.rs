//! The captured DSS requests, byte for byte, and what they were signed with.

use std::time::SystemTime;

use bytes::Bytes;

/// The `Date` every capture was signed with.
pub const DATE: &str = "Fri, 15 Nov 2019 20:24:11 GMT";
/// The DSS test suite's HMAC secret, which signed the captures.
pub const SECRET: &str = "ribos0me";
/// Every capture, by name.
pub const NAMES: [&str; 3] = [
    "v2-json-post",
    "v1-json-post-custom-keyid",
    "v2-multipart-put",
];

/// The captures' `Date` as a time, for a clock pinned to it.
pub fn time() -> SystemTime {
    httpdate::parse_http_date(DATE).expect("a valid date")
}

/// The raw request, as it crossed the wire.
pub fn raw(name: &str) -> &'static [u8] {
    match name {
        "v2-json-post" => include_bytes!("../../relay-core/tests/data/dss/v2-json-post.http"),
        "v1-json-post-custom-keyid" => {
            include_bytes!("../../relay-core/tests/data/dss/v1-json-post-custom-keyid.http")
        }
        "v2-multipart-put" => {
            include_bytes!("../../relay-core/tests/data/dss/v2-multipart-put.http")
        }
        other => panic!("no capture {other:?}; captures are {NAMES:?}"),
    }
}

/// The body of the capture.
pub fn body(name: &str) -> &'static [u8] {
    let raw = raw(name);
    &raw[raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header end")
        + 4..]
}

/// The capture as the request the relay receives.
pub fn request(name: &str) -> http::Request<Bytes> {
    let raw = raw(name);
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(offset) = parsed.parse(raw).expect("a valid capture") else {
        panic!("incomplete capture {name}");
    };
    let mut builder = http::Request::builder()
        .method(parsed.method.expect("a method"))
        .uri(parsed.path.expect("a target"));
    for h in parsed.headers.iter() {
        builder = builder.header(h.name, h.value);
    }
    builder
        .body(Bytes::copy_from_slice(&raw[offset..]))
        .expect("a valid request")
}

/// The payload the capture carries: the body, or the `payload` field of a multipart body.
pub fn payload(name: &str) -> &'static [u8] {
    match name {
        // The multipart capture carries the v2 JSON capture's body in its payload field.
        "v2-multipart-put" => body("v2-json-post"),
        other => body(other),
    }
}
