//! Every rejection the relay makes: one row per bad input, with the status and error code it must
//! get. Each row runs through the same entry point the adapters call; none may panic, and none
//! may reach a sink.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use relay_core::verify::{Secret, sign};
use relay_testkit::capture::{self, DATE as CAPTURE_DATE, SECRET as CAPTURE_SECRET};
use relay_testkit::{assert_accepted, capture_clock, capture_relay, config, status_and_code};

fn error_code(outcome: &relay_core::Outcome) -> String {
    status_and_code(outcome).1
}

/// Asserts that `outcome` has the status and error code of the row `name`, and never shows
/// `secret`.
#[track_caller]
fn assert_refused(
    outcome: &relay_core::Outcome,
    (name, status, code): (&str, StatusCode, &str),
    secret: &str,
) {
    let body = String::from_utf8_lossy(&outcome.body);
    let got = (outcome.status, error_code(outcome));
    assert_eq!((got.0, got.1.as_str()), (status, code), "{name}: {body}");
    assert!(!body.contains(secret), "{name}");
}

const GOOD: &str = r#"{"subscription_id": "8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11", "event_type": "CREATE", "match": {"bundle_uuid": "c86309f6-e5b7-4698-abb6-b81644573bff", "bundle_version": "2019-11-15T202303.689105Z"}}"#;
const BOUNDARY: &str = "2769baffc4f24cbc83ced26aa0c2f712";

/// A change to the signed headers.
type Tweak = fn(&mut HeaderMap);

/// How a row builds its request.
struct Row {
    name: String,
    method: Method,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    /// Applied after signing; may replace or add headers.
    tweak: Tweak,
    /// Headers set (or, with `None`, removed) after the tweak.
    headers: Vec<(&'static str, Option<String>)>,
    status: StatusCode,
    code: &'static str,
}

fn form(parts: &[(&str, &str)]) -> Vec<u8> {
    let mut body = String::new();
    for (name, value) in parts {
        body.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    body.push_str(&format!("--{BOUNDARY}--\r\n"));
    body.into_bytes()
}

fn set(headers: &mut HeaderMap, name: &'static str, value: &str) {
    headers.insert(
        HeaderName::from_static(name),
        HeaderValue::from_str(value).unwrap(),
    );
}

/// `name`'s value with `from` replaced by `to`.
fn replace_in(headers: &mut HeaderMap, name: &'static str, from: &str, to: &str) {
    let value = headers[name].to_str().unwrap().replace(from, to);
    set(headers, name, &value);
}

fn append(headers: &mut HeaderMap, name: &'static str, value: &str) {
    headers.append(
        HeaderName::from_static(name),
        HeaderValue::from_str(value).unwrap(),
    );
}

/// Sends `name` a second time, with the value it has.
fn duplicate(headers: &mut HeaderMap, name: &'static str) {
    let value = headers[name].clone();
    headers.append(name, value);
}

/// Re-signs the current Date and Digest headers with the capture key, as a sender with a
/// different header list or algorithm would.
fn resign(headers: &mut HeaderMap, params: &str, signed: &[&str]) {
    use base64::Engine as _;
    use hmac::{KeyInit, Mac};
    let lines: Vec<String> = signed
        .iter()
        .map(|n| format!("{n}: {}", headers[*n].to_str().unwrap()))
        .collect();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(CAPTURE_SECRET.as_bytes()).unwrap();
    mac.update(lines.join("\n").as_bytes());
    let sig = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    set(
        headers,
        "authorization",
        &format!("Signature {params},signature=\"{sig}\""),
    );
}

const KEY: &str = r#"keyId="hca-dss:s",algorithm="hmac-sha256""#;

fn json(body: &str) -> (Option<&'static str>, Vec<u8>) {
    (Some("application/json"), body.as_bytes().to_vec())
}

fn rows() -> Vec<Row> {
    let none: Tweak = |_| {};
    let row =
        |name: &str, (content_type, body): (Option<&'static str>, Vec<u8>), tweak, status, code| {
            Row {
                name: name.to_owned(),
                method: Method::POST,
                content_type,
                body,
                tweak,
                headers: Vec::new(),
                status,
                code,
            }
        };
    let mp = "multipart/form-data; boundary=2769baffc4f24cbc83ced26aa0c2f712";
    vec![
        // Methods.
        Row {
            method: Method::DELETE,
            ..row(
                "DELETE",
                json(GOOD),
                none,
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            )
        },
        Row {
            method: Method::PATCH,
            ..row(
                "PATCH",
                json(GOOD),
                none,
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            )
        },
        Row {
            method: Method::OPTIONS,
            ..row(
                "OPTIONS",
                json(GOOD),
                none,
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            )
        },
        Row {
            method: Method::from_bytes(b"PROPFIND").unwrap(),
            ..row(
                "extension method",
                json(GOOD),
                none,
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            )
        },
        // Size.
        row(
            "huge Content-Length",
            json(GOOD),
            |h| set(h, "content-length", "10737418240"),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        row(
            "body one byte over the limit",
            json(&format!("{GOOD}{}", " ".repeat(1_048_577 - GOOD.len()))),
            none,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        // Authorization.
        row(
            "no Authorization",
            json(GOOD),
            |h| {
                h.remove("authorization");
            },
            StatusCode::UNAUTHORIZED,
            "missing_authorization",
        ),
        row(
            "lowercase signature scheme",
            json(GOOD),
            |h| {
                let v = h["authorization"]
                    .to_str()
                    .unwrap()
                    .replacen("Signature", "signature", 1);
                set(h, "authorization", &v);
            },
            StatusCode::UNAUTHORIZED,
            "unsupported_scheme",
        ),
        row(
            "Bearer token",
            json(GOOD),
            |h| set(h, "authorization", "Bearer abc"),
            StatusCode::UNAUTHORIZED,
            "unsupported_scheme",
        ),
        row(
            "empty Authorization",
            json(GOOD),
            |h| set(h, "authorization", ""),
            StatusCode::UNAUTHORIZED,
            "unsupported_scheme",
        ),
        row(
            "unterminated quote",
            json(GOOD),
            |h| {
                set(
                    h,
                    "authorization",
                    r#"Signature keyId="k,algorithm="hmac-sha256""#,
                )
            },
            StatusCode::UNAUTHORIZED,
            "malformed_signature",
        ),
        row(
            "unquoted value",
            json(GOOD),
            |h| {
                set(
                    h,
                    "authorization",
                    r#"Signature keyId=k,algorithm="hmac-sha256",signature="x""#,
                )
            },
            StatusCode::UNAUTHORIZED,
            "malformed_signature",
        ),
        row(
            "repeated parameter",
            json(GOOD),
            |h| {
                let v = h["authorization"].to_str().unwrap().replacen(
                    "Signature ",
                    "Signature keyId=\"other\",",
                    1,
                );
                set(h, "authorization", &v);
            },
            StatusCode::UNAUTHORIZED,
            "malformed_signature",
        ),
        row(
            "empty keyId",
            json(GOOD),
            |h| {
                resign(
                    h,
                    r#"keyId="",algorithm="hmac-sha256",headers="date digest""#,
                    &["date", "digest"],
                )
            },
            StatusCode::UNAUTHORIZED,
            "malformed_signature",
        ),
        row(
            "no signature parameter",
            json(GOOD),
            |h| {
                set(
                    h,
                    "authorization",
                    &format!("Signature {KEY},headers=\"date digest\""),
                )
            },
            StatusCode::UNAUTHORIZED,
            "malformed_signature",
        ),
        row(
            "unknown algorithm",
            json(GOOD),
            |h| {
                resign(
                    h,
                    r#"keyId="k",algorithm="hmac-sha512",headers="date digest""#,
                    &["date", "digest"],
                )
            },
            StatusCode::UNAUTHORIZED,
            "unsupported_algorithm",
        ),
        row(
            "rsa algorithm",
            json(GOOD),
            |h| {
                resign(
                    h,
                    r#"keyId="k",algorithm="rsa-sha256",headers="date digest""#,
                    &["date", "digest"],
                )
            },
            StatusCode::UNAUTHORIZED,
            "unsupported_algorithm",
        ),
        row(
            "only date signed",
            json(GOOD),
            |h| resign(h, &format!("{KEY},headers=\"date\""), &["date"]),
            StatusCode::UNAUTHORIZED,
            "incomplete_signed_headers",
        ),
        row(
            "only digest signed",
            json(GOOD),
            |h| resign(h, &format!("{KEY},headers=\"digest\""), &["digest"]),
            StatusCode::UNAUTHORIZED,
            "incomplete_signed_headers",
        ),
        row(
            "no headers parameter (defaults to date)",
            json(GOOD),
            |h| resign(h, KEY, &["date"]),
            StatusCode::UNAUTHORIZED,
            "incomplete_signed_headers",
        ),
        row(
            "signed Date header missing",
            json(GOOD),
            |h| {
                h.remove("date");
            },
            StatusCode::UNAUTHORIZED,
            "missing_signed_header",
        ),
        row(
            "signed Digest header missing",
            json(GOOD),
            |h| {
                h.remove("digest");
            },
            StatusCode::UNAUTHORIZED,
            "missing_signed_header",
        ),
        row(
            "non-ASCII Date",
            json(GOOD),
            |h| {
                h.insert(
                    "date",
                    HeaderValue::from_bytes(b"Fri, 15 Nov 2019 20:24:11 \xc7MT").unwrap(),
                );
            },
            StatusCode::UNAUTHORIZED,
            "invalid_header",
        ),
        row(
            "wrong key",
            json(GOOD),
            |h| {
                let sig = sign(
                    "hca-dss:s",
                    &Secret::new("em0sobir"),
                    capture::time(),
                    GOOD.as_bytes(),
                )
                .unwrap();
                h.insert("authorization", sig.authorization);
            },
            StatusCode::UNAUTHORIZED,
            "bad_signature",
        ),
        row(
            "signature not base64",
            json(GOOD),
            |h| {
                set(
                    h,
                    "authorization",
                    &format!("Signature {KEY},headers=\"date digest\",signature=\"***\""),
                )
            },
            StatusCode::UNAUTHORIZED,
            "bad_signature",
        ),
        row(
            "signature of another date",
            json(GOOD),
            |h| set(h, "date", "Fri, 15 Nov 2019 20:24:12 GMT"),
            StatusCode::UNAUTHORIZED,
            "bad_signature",
        ),
        row(
            "SHA-512 digest",
            json(GOOD),
            |h| {
                set(h, "digest", "SHA-512=AAAA");
                resign(
                    h,
                    &format!("{KEY},headers=\"date digest\""),
                    &["date", "digest"],
                );
            },
            StatusCode::UNAUTHORIZED,
            "unsupported_digest",
        ),
        row(
            "digest of another body",
            json(GOOD),
            |h| {
                set(h, "digest", &relay_core::verify::digest_header(b"{}"));
                resign(
                    h,
                    &format!("{KEY},headers=\"date digest\""),
                    &["date", "digest"],
                );
            },
            StatusCode::UNAUTHORIZED,
            "digest_mismatch",
        ),
        row(
            "unparseable Date",
            json(GOOD),
            |h| {
                set(h, "date", "yesterday");
                resign(
                    h,
                    &format!("{KEY},headers=\"date digest\""),
                    &["date", "digest"],
                );
            },
            StatusCode::UNAUTHORIZED,
            "invalid_date",
        ),
        row(
            "stale Date",
            json(GOOD),
            |h| {
                set(h, "date", "Fri, 15 Nov 2019 20:10:00 GMT");
                resign(
                    h,
                    &format!("{KEY},headers=\"date digest\""),
                    &["date", "digest"],
                );
            },
            StatusCode::UNAUTHORIZED,
            "stale_date",
        ),
        row(
            "Date in the future",
            json(GOOD),
            |h| {
                set(h, "date", "Fri, 15 Nov 2019 20:40:00 GMT");
                resign(
                    h,
                    &format!("{KEY},headers=\"date digest\""),
                    &["date", "digest"],
                );
            },
            StatusCode::UNAUTHORIZED,
            "future_date",
        ),
        // Content type.
        row(
            "no Content-Type",
            (None, GOOD.into()),
            none,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "missing_content_type",
        ),
        row(
            "text/plain",
            (Some("text/plain"), GOOD.into()),
            none,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        row(
            "form-urlencoded",
            (
                Some("application/x-www-form-urlencoded"),
                b"payload=%7B%7D".to_vec(),
            ),
            none,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        row(
            "garbage Content-Type",
            (Some("json please"), GOOD.into()),
            none,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        row(
            "duplicate Content-Type",
            json(GOOD),
            |h| append(h, "content-type", "application/json"),
            StatusCode::BAD_REQUEST,
            "duplicate_header",
        ),
        // JSON payloads.
        row(
            "empty body",
            json(""),
            none,
            StatusCode::BAD_REQUEST,
            "empty_payload",
        ),
        row(
            "whitespace body",
            json(" \r\n "),
            none,
            StatusCode::BAD_REQUEST,
            "empty_payload",
        ),
        row(
            "JSON array instead of object",
            json(&format!("[{GOOD}]")),
            none,
            StatusCode::BAD_REQUEST,
            "not_an_object",
        ),
        row(
            "JSON string",
            json(r#""notification""#),
            none,
            StatusCode::BAD_REQUEST,
            "not_an_object",
        ),
        row(
            "JSON null",
            json("null"),
            none,
            StatusCode::BAD_REQUEST,
            "not_an_object",
        ),
        row(
            "truncated JSON",
            json(&GOOD[..GOOD.len() - 1]),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        row(
            "trailing garbage",
            json(&format!("{GOOD}}}")),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        row(
            "non-UTF-8 body",
            (
                Some("application/json"),
                b"{\"subscription_id\": \"\xff\xfe\"}".to_vec(),
            ),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        row(
            "byte order mark",
            (
                Some("application/json"),
                [b"\xef\xbb\xbf".as_slice(), GOOD.as_bytes()].concat(),
            ),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        row(
            "missing subscription_id",
            json(r#"{"match": {"bundle_uuid": "u", "bundle_version": "v"}}"#),
            none,
            StatusCode::BAD_REQUEST,
            "missing_field",
        ),
        row(
            "subscription_id is a number",
            json(
                r#"{"subscription_id": 222, "match": {"bundle_uuid": "u", "bundle_version": "v"}}"#,
            ),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        row(
            "empty subscription_id",
            json(
                r#"{"subscription_id": "", "match": {"bundle_uuid": "u", "bundle_version": "v"}}"#,
            ),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        row(
            "missing match",
            json(r#"{"subscription_id": "s"}"#),
            none,
            StatusCode::BAD_REQUEST,
            "missing_field",
        ),
        row(
            "match is a string",
            json(r#"{"subscription_id": "s", "match": "u"}"#),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        row(
            "missing match.bundle_uuid",
            json(r#"{"subscription_id": "s", "match": {"bundle_version": "v"}}"#),
            none,
            StatusCode::BAD_REQUEST,
            "missing_field",
        ),
        row(
            "bundle_version is null",
            json(
                r#"{"subscription_id": "s", "match": {"bundle_uuid": "u", "bundle_version": null}}"#,
            ),
            none,
            StatusCode::BAD_REQUEST,
            "missing_field",
        ),
        row(
            "event_type is a list",
            json(
                r#"{"subscription_id": "s", "event_type": ["CREATE"], "match": {"bundle_uuid": "u", "bundle_version": "v"}}"#,
            ),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        // Multipart payloads.
        row(
            "multipart without boundary",
            (Some("multipart/form-data"), form(&[("payload", GOOD)])),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_multipart",
        ),
        row(
            "truncated multipart",
            (Some(mp), {
                let f = form(&[("foo", "bar"), ("payload", GOOD)]);
                f[..f.len() - 40].to_vec()
            }),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_multipart",
        ),
        row(
            "multipart with another boundary",
            (
                Some("multipart/form-data; boundary=other"),
                form(&[("payload", GOOD)]),
            ),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_multipart",
        ),
        row(
            "multipart that is not multipart",
            (Some(mp), GOOD.into()),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_multipart",
        ),
        row(
            "missing payload field",
            (Some(mp), form(&[("foo", "bar"), ("file", GOOD)])),
            none,
            StatusCode::BAD_REQUEST,
            "missing_payload_field",
        ),
        row(
            "payload field twice",
            (Some(mp), form(&[("payload", GOOD), ("payload", GOOD)])),
            none,
            StatusCode::BAD_REQUEST,
            "duplicate_payload_field",
        ),
        row(
            "payload field not JSON",
            (Some(mp), form(&[("payload", "hello")])),
            none,
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        row(
            "payload field empty",
            (Some(mp), form(&[("payload", "")])),
            none,
            StatusCode::BAD_REQUEST,
            "empty_payload",
        ),
    ]
}

/// Families of rows written as loops: every required and optional field with every wrong JSON
/// type, every non-object document, truncations, content types, `Authorization` forms,
/// duplicated headers, methods and empty bodies.
fn generated_rows() -> Vec<Row> {
    let plain =
        |name: String, content_type: Option<&'static str>, body: Vec<u8>, status, code| Row {
            name,
            method: Method::POST,
            content_type,
            body,
            tweak: |_| {},
            headers: Vec::new(),
            status,
            code,
        };
    let bad_request = StatusCode::BAD_REQUEST;
    let json_row = |name: String, body: String, code| {
        plain(
            name,
            Some("application/json"),
            body.into_bytes(),
            bad_request,
            code,
        )
    };
    let document = |subscription: &str, match_: &str, extra: &str| {
        format!(r#"{{"subscription_id": {subscription}, "match": {match_}{extra}}}"#)
    };
    let good_match = r#"{"bundle_uuid": "u", "bundle_version": "v"}"#;
    let wrong_types = [
        ("null", "null"),
        ("a number", "7"),
        ("an empty string", r#""""#),
        ("an array", r#"["s"]"#),
        ("an object", r#"{"s": 1}"#),
        ("a boolean", "true"),
    ];
    let mut rows = Vec::new();
    for (what, value) in wrong_types {
        let code = if value == "null" {
            "missing_field"
        } else {
            "invalid_field"
        };
        rows.push(json_row(
            format!("subscription_id is {what}"),
            document(value, good_match, ""),
            code,
        ));
        for field in ["bundle_uuid", "bundle_version"] {
            let match_ = good_match.replace(
                &format!(r#""{field}": "{}""#, &field[7..8]),
                &format!(r#""{field}": {value}"#),
            );
            rows.push(json_row(
                format!("match.{field} is {what}"),
                document(r#""s""#, &match_, ""),
                code,
            ));
        }
        if value != "null" {
            for field in ["event_type", "transaction_id"] {
                let extra = format!(r#", "{field}": {value}"#);
                rows.push(json_row(
                    format!("{field} is {what}"),
                    document(r#""s""#, good_match, &extra),
                    "invalid_field",
                ));
            }
        }
    }
    for field in ["bundle_uuid", "bundle_version"] {
        let match_ = good_match
            .replace(&format!(r#""{field}": "{}", "#, &field[7..8]), "")
            .replace(&format!(r#", "{field}": "{}""#, &field[7..8]), "");
        rows.push(json_row(
            format!("match.{field} missing"),
            document(r#""s""#, &match_, ""),
            "missing_field",
        ));
    }
    // Not an object where one must be: the `match` field, and the whole document.
    for (what, in_match, document_itself) in [
        ("an array", Some("[]"), "[1, 2]"),
        ("a string", Some(r#""u""#), r#""x""#),
        ("a number", Some("1"), "12"),
        ("null", None, "null"),
        ("a boolean", Some("false"), "true"),
    ] {
        if let Some(value) = in_match {
            rows.push(json_row(
                format!("match is {what}"),
                document(r#""s""#, value, ""),
                "invalid_field",
            ));
        }
        rows.push(json_row(
            format!("the document is {what}"),
            document_itself.to_owned(),
            "not_an_object",
        ));
    }
    for cut in [1, 2, 10, 30, 60, 90, 120, 150, 180, GOOD.len() - 2] {
        rows.push(json_row(
            format!("JSON cut after {cut} bytes"),
            GOOD[..cut].to_owned(),
            "invalid_json",
        ));
    }
    rows.push(json_row(
        "nesting deeper than the parser allows".into(),
        "[".repeat(5000),
        "invalid_json",
    ));
    rows.push(json_row(
        "a single quote string".into(),
        GOOD.replace('"', "'"),
        "invalid_json",
    ));
    rows.push(json_row(
        "a comment".into(),
        format!("/* c */ {GOOD}"),
        "invalid_json",
    ));
    for blank in ["", " ", "\n\t ", "\r\n"] {
        rows.push(json_row(
            format!("a body of {blank:?}"),
            blank.to_owned(),
            "empty_payload",
        ));
    }
    for content_type in [
        "text/plain",
        "application/xml",
        "application/x-www-form-urlencoded",
        "application/jsonx",
        "text/json",
        "image/png",
        "multipart/mixed; boundary=b",
    ] {
        rows.push(plain(
            format!("Content-Type {content_type}"),
            Some(content_type),
            GOOD.into(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ));
    }
    for (what, value, code) in [
        ("Basic", "Basic ZHNzOnNlY3JldA==", "unsupported_scheme"),
        ("Bearer", "Bearer abc", "unsupported_scheme"),
        (
            "lower-case scheme",
            r#"signature keyId="hca-dss:s",algorithm="hmac-sha256",signature="x""#,
            "unsupported_scheme",
        ),
        ("scheme only", "Signature ", "malformed_signature"),
        (
            "no algorithm",
            r#"Signature keyId="hca-dss:s",signature="x""#,
            "malformed_signature",
        ),
        (
            "no signature",
            r#"Signature keyId="hca-dss:s",algorithm="hmac-sha256""#,
            "malformed_signature",
        ),
        (
            "an unclosed quote",
            r#"Signature keyId="hca-dss:s,algorithm="hmac-sha256",signature="x"#,
            "malformed_signature",
        ),
        (
            "semicolons",
            r#"Signature keyId="hca-dss:s";algorithm="hmac-sha256";signature="x""#,
            "malformed_signature",
        ),
        (
            "rsa-sha256",
            r#"Signature keyId="hca-dss:s",algorithm="rsa-sha256",headers="date digest",signature="x""#,
            "unsupported_algorithm",
        ),
        (
            "HMAC-SHA256 in capitals",
            r#"Signature keyId="hca-dss:s",algorithm="HMAC-SHA256",headers="date digest",signature="x""#,
            "unsupported_algorithm",
        ),
        (
            "a signature that is not base64",
            r#"Signature keyId="hca-dss:s",algorithm="hmac-sha256",headers="date digest",signature="%%%""#,
            "bad_signature",
        ),
        (
            "an empty signature",
            r#"Signature keyId="hca-dss:s",algorithm="hmac-sha256",headers="date digest",signature="""#,
            "bad_signature",
        ),
    ] {
        let mut row = json_row(format!("Authorization: {what}"), GOOD.to_owned(), code);
        row.status = StatusCode::UNAUTHORIZED;
        row.headers.push(("authorization", Some(value.to_owned())));
        rows.push(row);
    }
    for header in ["authorization", "date", "digest"] {
        let mut row = json_row(format!("{header} removed"), GOOD.to_owned(), "");
        row.headers.push((header, None));
        (row.status, row.code) = match header {
            "authorization" => (StatusCode::UNAUTHORIZED, "missing_authorization"),
            _ => (StatusCode::UNAUTHORIZED, "missing_signed_header"),
        };
        rows.push(row);
    }
    let duplicated: [(&str, Tweak); 3] = [
        ("Authorization", |h| duplicate(h, "authorization")),
        ("Date", |h| append(h, "date", CAPTURE_DATE)),
        ("Digest", |h| duplicate(h, "digest")),
    ];
    for (header, tweak) in duplicated {
        let mut row = json_row(
            format!("duplicate {header}"),
            GOOD.to_owned(),
            "duplicate_header",
        );
        (row.status, row.tweak) = (StatusCode::UNAUTHORIZED, tweak);
        rows.push(row);
    }
    for declared in ["1048577", "10737418240"] {
        let mut row = json_row(
            format!("Content-Length {declared}"),
            GOOD.to_owned(),
            "body_too_large",
        );
        row.status = StatusCode::PAYLOAD_TOO_LARGE;
        row.headers
            .push(("content-length", Some(declared.to_owned())));
        rows.push(row);
    }
    let mp = "multipart/form-data; boundary=2769baffc4f24cbc83ced26aa0c2f712";
    for (what, content_type, body, code) in [
        (
            "without a boundary",
            "multipart/form-data",
            form(&[("payload", GOOD)]),
            "invalid_multipart",
        ),
        (
            "with another boundary",
            "multipart/form-data; boundary=other",
            form(&[("payload", GOOD)]),
            "invalid_multipart",
        ),
        ("with an empty body", mp, Vec::new(), "invalid_multipart"),
        (
            "whose payload is an array",
            mp,
            form(&[("payload", "[1]")]),
            "not_an_object",
        ),
        (
            "whose payload lacks match",
            mp,
            form(&[("payload", r#"{"subscription_id": "s"}"#)]),
            "missing_field",
        ),
    ] {
        rows.push(plain(
            format!("multipart {what}"),
            Some(content_type),
            body,
            bad_request,
            code,
        ));
    }
    for method in ["TRACE", "CONNECT", "MKCOL"] {
        let mut row = json_row(
            format!("method {method}"),
            GOOD.to_owned(),
            "method_not_allowed",
        );
        (row.method, row.status) = (
            Method::from_bytes(method.as_bytes()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
        );
        rows.push(row);
    }
    rows
}

fn request(row: &Row) -> http::Request<Bytes> {
    let mut headers = HeaderMap::new();
    if let Some(ct) = row.content_type {
        set(&mut headers, "content-type", ct);
    }
    set(&mut headers, "content-length", &row.body.len().to_string());
    let sig = sign(
        "hca-dss:s",
        &Secret::new(CAPTURE_SECRET),
        capture::time(),
        &row.body,
    )
    .unwrap();
    headers.insert("date", sig.date);
    headers.insert("digest", sig.digest);
    headers.insert("authorization", sig.authorization);
    (row.tweak)(&mut headers);
    for (name, value) in &row.headers {
        match value {
            Some(value) => set(&mut headers, name, value),
            None => drop(headers.remove(*name)),
        }
    }
    let mut req = http::Request::new(Bytes::from(row.body.clone()));
    *req.method_mut() = row.method.clone();
    *req.uri_mut() = "/dss/notify?replica=aws".parse().unwrap();
    *req.headers_mut() = headers;
    req
}

#[tokio::test]
async fn every_bad_input_gets_its_documented_status_and_code() {
    let mut rows = rows();
    rows.extend(generated_rows());
    assert!(rows.len() >= 150, "{} rows", rows.len());
    let (relay, sink) = capture_relay(&[]);
    for row in &rows {
        let outcome = relay.accept(request(row)).await;
        assert_refused(&outcome, (&row.name, row.status, row.code), CAPTURE_SECRET);
        let body: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{}",
            row.name
        );
    }
    assert!(
        sink.messages().is_empty(),
        "no rejected input reached a sink"
    );
}

#[tokio::test]
async fn unknown_key_id_is_refused_without_a_catch_all_secret() {
    let (relay, _) = capture_relay(&[]);
    // With the catch-all secret any keyId verifies.
    let base = Row {
        name: "any keyId".to_owned(),
        headers: Vec::new(),
        method: Method::POST,
        content_type: Some("application/json"),
        body: GOOD.into(),
        tweak: |h| {
            resign(
                h,
                r#"keyId="stranger",algorithm="hmac-sha256",headers="date digest""#,
                &["date", "digest"],
            )
        },
        status: StatusCode::ACCEPTED,
        code: "",
    };
    assert_eq!(
        relay.accept(request(&base)).await.status,
        StatusCode::ACCEPTED
    );
    let keys = config(&[
        ("RELAY_HMAC_KEYS", r#"{"hca-dss:s": "ribos0me"}"#),
        ("RELAY_FILE_SINK", "-"),
    ]);
    let named_only = relay_testkit::relay(keys, &[], capture_clock());
    let outcome = named_only.accept(request(&base)).await;
    assert_eq!(
        (outcome.status, error_code(&outcome).as_str()),
        (StatusCode::UNAUTHORIZED, "unknown_key_id")
    );
    assert!(outcome.headers.contains_key("www-authenticate"));
}

#[tokio::test]
async fn good_inputs_in_every_shape_are_published() {
    let (relay, sink) = capture_relay(&[]);
    let mp = "multipart/form-data; boundary=2769baffc4f24cbc83ced26aa0c2f712";
    let ok = |method, content_type, body: Vec<u8>| Row {
        name: "ok".to_owned(),
        method,
        content_type: Some(content_type),
        body,
        tweak: |_| {},
        headers: Vec::new(),
        status: StatusCode::ACCEPTED,
        code: "",
    };
    for row in [
        ok(Method::POST, "application/json", GOOD.into()),
        ok(Method::PUT, "application/json; charset=utf-8", GOOD.into()),
        ok(Method::PUT, mp, form(&[("payload", GOOD)])),
        ok(
            Method::POST,
            mp,
            form(&[("foo", "bar"), ("payload", GOOD), ("baz", "")]),
        ),
    ] {
        let outcome = relay.accept(request(&row)).await;
        assert_accepted(&outcome);
    }
    let messages = sink.messages();
    assert_eq!(messages.len(), 4);
    assert!(messages.iter().all(|m| m.payload == GOOD.as_bytes()));
}

#[tokio::test]
async fn health_and_method_headers() {
    let (relay, _) = capture_relay(&[]);
    for (method, body) in [(Method::GET, r#"{"status":"ok"}"#), (Method::HEAD, "")] {
        let mut req = http::Request::new(Bytes::new());
        *req.method_mut() = method;
        *req.uri_mut() = "/any/path?x=1".parse().unwrap();
        let outcome = relay.accept(req).await;
        assert_eq!(outcome.status, StatusCode::OK);
        assert_eq!(outcome.body, body, "a HEAD answer has no body");
    }
    let mut req = http::Request::new(Bytes::new());
    *req.method_mut() = Method::DELETE;
    let outcome = relay.accept(req).await;
    assert_eq!(outcome.headers["allow"], "GET, HEAD, POST, PUT");
}

/// The sources every scheme's rejections are checked on, each on its own path.
fn sources() -> String {
    relay_testkit::config::every_scheme("") + GENERIC_SOURCES
}

/// A generic HMAC source signing only a delivery id, and the sink.
const GENERIC_SOURCES: &str = r#"
[sources.generic_id]
scheme = "hmac"
paths = ["/hmac-id"]
secret_env = "SOURCE_SECRET"
template = "{id}.{body}"
id_header = "x-delivery"

[sinks.out]
type = "file"
path = "-"

[[routes]]
name = "all"
to = ["out"]
"#;

const SOURCE_SECRET: &str = "source-secret";
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SOURCE_BODY: &str = r#"{"id": "evt_1", "type": "thing.happened"}"#;

/// One request to a source, signed by its scheme, then changed.
struct SourceRow {
    name: &'static str,
    path: &'static str,
    body: &'static str,
    /// How far from the relay's clock the sender signed.
    signed_at: i64,
    /// Applied after signing.
    tweak: Tweak,
    /// Sent in place of the signed body.
    tampered: Option<&'static str>,
    status: StatusCode,
    code: &'static str,
}

fn source_rows() -> Vec<SourceRow> {
    use StatusCode as S;
    let row = |name, path, tweak: Tweak, code| SourceRow {
        name,
        path,
        body: SOURCE_BODY,
        signed_at: 0,
        tweak,
        tampered: None,
        status: S::UNAUTHORIZED,
        code,
    };
    let unchanged: Tweak = |_| {};
    vec![
        SourceRow {
            status: S::NOT_FOUND,
            ..row(
                "no source on the path",
                "/gitlab",
                unchanged,
                "unknown_path",
            )
        },
        row(
            "github: no signature",
            "/github",
            |h| {
                h.remove("x-hub-signature-256");
            },
            "missing_signature",
        ),
        row(
            "github: not hex",
            "/github",
            |h| set(h, "x-hub-signature-256", "sha256=zz"),
            "malformed_signature",
        ),
        row(
            "github: no sha256= prefix",
            "/github",
            |h| replace_in(h, "x-hub-signature-256", "sha256=", ""),
            "malformed_signature",
        ),
        row(
            "github: signature twice",
            "/github",
            |h| duplicate(h, "x-hub-signature-256"),
            "duplicate_header",
        ),
        row(
            "github: signature not ASCII",
            "/github",
            |h| {
                h.insert(
                    "x-hub-signature-256",
                    HeaderValue::from_bytes(b"sha256=\xff").unwrap(),
                );
            },
            "invalid_header",
        ),
        row(
            "github: another secret",
            "/github",
            |h| {
                set(
                    h,
                    "x-hub-signature-256",
                    &format!("sha256={}", "0".repeat(64)),
                );
            },
            "bad_signature",
        ),
        // GitHub's delivery id is not signed, so an event is known by its body: a push
        // without X-GitHub-Delivery is taken. Stripe's is the signed event's `id`.
        SourceRow {
            body: "{\"type\": \"invoice.paid\"}",
            status: S::BAD_REQUEST,
            ..row(
                "stripe: no event id",
                "/stripe",
                |_| {},
                "missing_dedup_key",
            )
        },
        SourceRow {
            body: "{\"id\": ",
            status: S::BAD_REQUEST,
            ..row(
                "github: a JSON body that does not parse",
                "/github",
                unchanged,
                "invalid_json",
            )
        },
        row(
            "shopify: another secret",
            "/shopify",
            |h| {
                set(
                    h,
                    "x-shopify-hmac-sha256",
                    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                );
            },
            "bad_signature",
        ),
        row(
            "stripe: no t",
            "/stripe",
            |h| {
                let v = h["stripe-signature"].to_str().unwrap();
                let v = v
                    .split(',')
                    .filter(|p| !p.starts_with("t="))
                    .collect::<Vec<_>>()
                    .join(",");
                set(h, "stripe-signature", &v);
            },
            "malformed_signature",
        ),
        SourceRow {
            signed_at: -3600,
            ..row(
                "stripe: an hour old",
                "/stripe",
                unchanged,
                "stale_timestamp",
            )
        },
        row(
            "slack: no timestamp",
            "/slack",
            |h| {
                h.remove("x-slack-request-timestamp");
            },
            "missing_signed_header",
        ),
        row(
            "slack: a timestamp that is not a number",
            "/slack",
            |h| {
                set(h, "x-slack-request-timestamp", "yesterday");
            },
            "invalid_timestamp",
        ),
        row(
            "sw: no webhook-id",
            "/sw",
            |h| {
                h.remove("webhook-id");
            },
            "missing_signed_header",
        ),
        SourceRow {
            signed_at: 3600,
            ..row("sw: an hour ahead", "/sw", unchanged, "future_timestamp")
        },
        row(
            "sw: no version",
            "/sw",
            |h| set(h, "webhook-signature", "c2lnbmF0dXJl"),
            "malformed_signature",
        ),
        row(
            "rfc9421: no Signature-Input",
            "/rfc9421",
            |h| {
                h.remove("signature-input");
            },
            "missing_signature",
        ),
        row(
            "rfc9421: an algorithm it does not take",
            "/rfc9421",
            |h| replace_in(h, "signature-input", "hmac-sha256", "rsa-pss-sha512"),
            "unsupported_algorithm",
        ),
        row(
            "rfc9421: content-digest not covered",
            "/rfc9421",
            |h| replace_in(h, "signature-input", "\"content-digest\"", ""),
            "incomplete_signed_headers",
        ),
        row(
            "rfc9421: Content-Digest of another body",
            "/rfc9421",
            |h| {
                set(
                    h,
                    "content-digest",
                    &relay_core::schemes::rfc9421::content_digest(b"{}"),
                );
            },
            "bad_signature",
        ),
        SourceRow {
            tampered: Some(r#"{"id": "evt_2", "type": "thing.happened"}"#),
            ..row(
                "rfc9421: another body",
                "/rfc9421",
                unchanged,
                "digest_mismatch",
            )
        },
        SourceRow {
            tampered: Some(r#"{"id": "evt_2", "type": "thing.happened"}"#),
            ..row(
                "github: another body",
                "/github",
                unchanged,
                "bad_signature",
            )
        },
        SourceRow {
            tampered: Some(r#"{"id": "evt_2", "type": "thing.happened"}"#),
            ..row(
                "stripe: another body",
                "/stripe",
                unchanged,
                "bad_signature",
            )
        },
        row(
            "hmac: no timestamp header",
            "/hmac",
            |h| {
                h.remove("x-acme-timestamp");
            },
            "missing_signed_header",
        ),
        // `{id}.{body}`: an id holding the separator could move the boundary into the body.
        row(
            "hmac: an id holding the template's separator",
            "/hmac-id",
            |h| set(h, "x-delivery", "d-1.{\"order\""),
            "ambiguous_signed_value",
        ),
    ]
}

fn source_request(row: &SourceRow) -> http::Request<Bytes> {
    use relay_core::schemes::{Scheme, SigningKey};
    let (scheme, secret, id): (Box<dyn Scheme>, &str, Option<&str>) = match row.path {
        "/github" | "/gitlab" => (Box::new(relay_core::schemes::GITHUB), SOURCE_SECRET, None),
        "/shopify" => (Box::new(relay_core::schemes::SHOPIFY), SOURCE_SECRET, None),
        "/stripe" => (
            Box::new(relay_core::schemes::stripe::Stripe::default()),
            SOURCE_SECRET,
            None,
        ),
        "/slack" => (
            Box::new(relay_core::schemes::slack::Slack::default()),
            SOURCE_SECRET,
            None,
        ),
        "/sw" => (
            Box::new(relay_core::schemes::standard_webhooks::StandardWebhooks::default()),
            SW_SECRET,
            Some("msg_1"),
        ),
        "/rfc9421" => (
            Box::new(relay_core::schemes::rfc9421::Rfc9421::default()),
            SOURCE_SECRET,
            None,
        ),
        "/hmac" => {
            let config = relay_testkit::config::generic_hmac();
            let scheme = relay_core::schemes::hmac::GenericHmac::new(config).unwrap();
            (Box::new(scheme), SOURCE_SECRET, Some("d-1"))
        }
        "/hmac-id" => {
            let mut config = relay_core::schemes::hmac::HmacConfig::body_only("x-signature");
            config.template = "{id}.{body}".into();
            config.id_header = Some("x-delivery".into());
            let scheme = relay_core::schemes::hmac::GenericHmac::new(config).unwrap();
            (Box::new(scheme), SOURCE_SECRET, Some("d-1"))
        }
        other => panic!("no scheme for {other}"),
    };
    let at = capture::time().checked_add_signed_secs(row.signed_at);
    let key = SigningKey::Hmac {
        key_id: (row.path == "/rfc9421").then(|| "k1".to_owned()),
        secret: Secret::new(secret).into(),
    };
    let mut headers = HeaderMap::new();
    headers.extend(relay_testkit::requests::scheme_headers(
        scheme.as_ref(),
        row.path,
        row.body.as_bytes(),
        &key,
        at,
        id,
    ));
    match row.path {
        "/github" | "/gitlab" => set(&mut headers, "x-github-delivery", "d-1"),
        "/shopify" => set(&mut headers, "x-shopify-webhook-id", "d-1"),
        _ => {}
    }
    set(&mut headers, "content-type", "application/json");
    (row.tweak)(&mut headers);
    let sent = row.tampered.unwrap_or(row.body);
    let mut request = http::Request::post(row.path)
        .body(Bytes::from_static(sent.as_bytes()))
        .unwrap();
    *request.headers_mut() = headers;
    request
}

/// `SystemTime` moved by a signed number of seconds.
trait AddSigned {
    fn checked_add_signed_secs(self, secs: i64) -> Self;
}

impl AddSigned for std::time::SystemTime {
    fn checked_add_signed_secs(self, secs: i64) -> Self {
        let d = std::time::Duration::from_secs(secs.unsigned_abs());
        if secs < 0 { self - d } else { self + d }
    }
}

#[tokio::test]
async fn every_source_rejection_gets_its_documented_status_and_code() {
    let file = relay_testkit::config::ConfigFile::new(&sources());
    let config = file
        .load(&[
            ("RELAY_HMAC_SECRET", CAPTURE_SECRET),
            ("SOURCE_SECRET", SOURCE_SECRET),
            ("SW_SECRET", SW_SECRET),
            ("RFC9421_KEYS", "{\"k1\": \"source-secret\"}"),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let sink = relay_testkit::sinks::RecordingSink::new("out");
    let relay = relay_testkit::sinks::relay(
        config,
        &[(
            "out",
            std::sync::Arc::clone(&sink) as std::sync::Arc<dyn relay_core::Sink>,
        )],
        capture_clock(),
    );
    // Each scheme's request as signed is accepted: the rows fail for what they change.
    for path in [
        "/github", "/shopify", "/stripe", "/slack", "/sw", "/rfc9421", "/hmac", "/hmac-id",
    ] {
        let row = SourceRow {
            name: "as signed",
            path,
            body: SOURCE_BODY,
            signed_at: 0,
            tweak: |_| {},
            tampered: None,
            status: StatusCode::ACCEPTED,
            code: "",
        };
        assert_accepted(&relay.accept(source_request(&row)).await);
    }
    assert_eq!(sink.messages().len(), 8);
    let rows = source_rows();
    for row in &rows {
        let outcome = relay.accept(source_request(row)).await;
        assert_refused(&outcome, (row.name, row.status, row.code), SOURCE_SECRET);
    }
    assert_eq!(
        sink.messages().len(),
        8,
        "no rejected input reached the sink"
    );
}
