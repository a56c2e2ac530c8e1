//! Sources: one relay answering for several senders, each on its own paths, verified with its
//! own scheme and keys, identified by its own dedup key, routed by `$source`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use relay_core::schemes::GITHUB;
use relay_core::schemes::slack::Slack;
use relay_core::schemes::standard_webhooks::StandardWebhooks;
use relay_core::schemes::{Scheme, Signer, SigningKey};
use relay_core::verify::Secret;
use relay_core::{Relay, Sink};
use relay_testkit::capture;
use relay_testkit::config::ConfigFile;
use relay_testkit::sinks::{RecordingSink, relay};
use relay_testkit::{capture_clock, status_and_code};
use sha2::Digest as _;

const GITHUB_SECRET: &str = "It's a Secret to Everybody";
/// A Standard Webhooks secret: `whsec_` and the base64 of the key.
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Three sources on three paths, each routed by `$source` to a sink of its own, and a Slack
/// source for form bodies.
const CONFIG: &str = r#"
routes = [
    { name = "dss", match = { "$source" = ["dss"] }, to = ["bundles"] },
    { name = "pushes", match = { "$source" = ["github"], repository = { full_name = ["octo/relay"] } }, to = ["code"] },
    { name = "invoices", match = { "$source" = ["billing"], type = [{ prefix = "invoice." }] }, to = ["invoices"] },
    { name = "commands", match = { "$source" = ["slack"], command = ["/deploy"] }, to = ["chat"] },
]

[sources]
dss = { scheme = "dss", paths = ["/dss/notify"] }
github = { scheme = "github", paths = ["/github"], secret_env = "TEST_GITHUB_SECRET" }
billing = { scheme = "standard-webhooks", paths = ["/billing", "/billing/v2"], secret_env = "TEST_SW_SECRET" }
slack = { scheme = "slack", paths = ["/slack"], secret_env = "TEST_SLACK_SECRET" }

[sinks]
bundles = { type = "file", path = "bundles.jsonl" }
code = { type = "file", path = "code.jsonl" }
invoices = { type = "file", path = "invoices.jsonl" }
chat = { type = "file", path = "chat.jsonl" }
"#;

struct Sinks {
    bundles: Arc<RecordingSink>,
    code: Arc<RecordingSink>,
    invoices: Arc<RecordingSink>,
    chat: Arc<RecordingSink>,
}

impl Sinks {
    fn counts(&self) -> [usize; 4] {
        [&self.bundles, &self.code, &self.invoices, &self.chat].map(|s| s.messages().len())
    }
}

/// `sources` (a `relay.toml` table of sources) with one file sink `out` every notification is
/// routed to.
fn to_out(sources: &str) -> String {
    format!(
        "{sources}\n[sinks.out]\ntype = \"file\"\npath = \"-\"\n\n[[routes]]\nname = \"all\"\nto = [\"out\"]\n"
    )
}

/// A relay of `sources`, their secrets from `vars`, routing every notification to one recording
/// sink.
fn relay_to_out(sources: &str, vars: &[(&str, &str)]) -> (Relay, Arc<RecordingSink>) {
    let config = ConfigFile::new(&to_out(sources))
        .load(vars)
        .unwrap_or_else(|e| panic!("{e}"));
    let out = RecordingSink::new("out");
    let sinks = [("out", Arc::clone(&out) as Arc<dyn Sink>)];
    (relay(config, &sinks, capture_clock()), out)
}

fn relay_with_sources() -> (Relay, Sinks, ConfigFile) {
    let file = ConfigFile::new(CONFIG);
    let config = file
        .load(&[
            ("RELAY_HMAC_SECRET", capture::SECRET),
            ("TEST_GITHUB_SECRET", GITHUB_SECRET),
            ("TEST_SW_SECRET", SW_SECRET),
            ("TEST_SLACK_SECRET", SLACK_SECRET),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let sinks = Sinks {
        bundles: RecordingSink::new("bundles"),
        code: RecordingSink::new("code"),
        invoices: RecordingSink::new("invoices"),
        chat: RecordingSink::new("chat"),
    };
    let named: Vec<(&str, Arc<dyn Sink>)> = vec![
        ("bundles", Arc::clone(&sinks.bundles) as Arc<dyn Sink>),
        ("code", Arc::clone(&sinks.code) as Arc<dyn Sink>),
        ("invoices", Arc::clone(&sinks.invoices) as Arc<dyn Sink>),
        ("chat", Arc::clone(&sinks.chat) as Arc<dyn Sink>),
    ];
    (relay(config, &named, capture_clock()), sinks, file)
}

fn hmac_key(secret: &str) -> SigningKey {
    SigningKey::Hmac {
        key_id: None,
        secret: Secret::new(secret).into(),
    }
}

/// A request to `path` with `body`, signed by `scheme` with `secret` at the captures' time.
fn signed(
    path: &str,
    content_type: &str,
    body: &str,
    scheme: &dyn Scheme,
    secret: &str,
    id: Option<&str>,
    extra: &[(&str, &str)],
) -> Request<Bytes> {
    let headers = relay_testkit::requests::scheme_headers(
        scheme,
        path,
        body.as_bytes(),
        &hmac_key(secret),
        capture::time(),
        id,
    );
    let mut builder = Request::post(path).header("content-type", content_type);
    for (name, value) in &headers {
        builder = builder.header(name, value);
    }
    for (name, value) in extra {
        builder = builder.header(*name, *value);
    }
    builder
        .body(Bytes::copy_from_slice(body.as_bytes()))
        .unwrap()
}

const PUSH: &str = r#"{"ref": "refs/heads/main", "repository": {"full_name": "octo/relay"}}"#;
const INVOICE: &str = r#"{"type": "invoice.paid", "data": {"id": "in_1"}}"#;

fn push(delivery: &str) -> Request<Bytes> {
    github_push(&[("x-github-delivery", delivery), ("x-github-event", "push")])
}

/// The push, signed for the GitHub source, with the unsigned headers `headers`.
fn github_push(headers: &[(&str, &str)]) -> Request<Bytes> {
    let json = "application/json";
    signed("/github", json, PUSH, &GITHUB, GITHUB_SECRET, None, headers)
}

fn invoice(path: &str, id: &str) -> Request<Bytes> {
    signed(
        path,
        "application/json",
        INVOICE,
        &StandardWebhooks::default(),
        SW_SECRET,
        Some(id),
        &[],
    )
}

fn answer(outcome: &relay_core::Outcome) -> (u16, String) {
    status_and_code(outcome)
}

/// Asserts that the configuration `toml` with the variables `vars` is refused, saying `says`:
/// everything it says.
fn assert_refused(toml: &str, vars: &[(&str, &str)], says: &str) -> String {
    let refused = ConfigFile::new(toml).load(vars).unwrap_err().to_string();
    assert!(refused.contains(says), "{refused}");
    refused
}

/// Asserts the status and error code (empty for none) of `relay`'s answer to `request`.
async fn assert_answers(relay: &Relay, request: Request<Bytes>, (status, code): (u16, &str)) {
    let outcome = relay.accept(request).await;
    assert_eq!(answer(&outcome), (status, code.to_owned()), "{outcome:?}");
}

#[tokio::test]
async fn three_sources_on_three_paths_each_reach_their_own_destination() {
    let (relay, sinks, _file) = relay_with_sources();

    let outcome = relay.accept(capture::request("v2-json-post")).await;
    assert_eq!(answer(&outcome), (202, String::new()), "{outcome:?}");
    let outcome = relay
        .accept(push("72d3162e-cc78-11e3-81ab-4c9367dc0958"))
        .await;
    assert_eq!(answer(&outcome), (202, String::new()), "{outcome:?}");
    let outcome = relay
        .accept(invoice("/billing/v2", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"))
        .await;
    assert_eq!(answer(&outcome), (202, String::new()), "{outcome:?}");
    assert_eq!(sinks.counts(), [1, 1, 1, 0]);

    // Each payload byte for byte, with its source's attributes.
    let dss = &sinks.bundles.messages()[0];
    assert_eq!(&dss.payload[..], capture::payload("v2-json-post"));
    assert_eq!(dss.attributes.get("relay.source"), Some("dss"));
    assert!(dss.attributes.get("dss.bundle_uuid").is_some());
    let code = &sinks.code.messages()[0];
    assert_eq!(&code.payload[..], PUSH.as_bytes());
    assert_eq!(code.attributes.get("relay.source"), Some("github"));
    assert_eq!(code.attributes.get("relay.event_type"), Some("push"));
    assert_eq!(
        code.attributes.get("relay.delivery_id"),
        Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
    );
    assert_eq!(code.attributes.get("dss.bundle_uuid"), None);
    let invoices = &sinks.invoices.messages()[0];
    assert_eq!(&invoices.payload[..], INVOICE.as_bytes());
    assert_eq!(
        invoices.attributes.get("relay.event_type"),
        Some("invoice.paid")
    );
    assert_eq!(
        invoices.attributes.get("relay.delivery_id"),
        Some("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W")
    );

    // A push from another repository, and an event that is not an invoice, are filtered.
    let other = PUSH.replace("octo/relay", "octo/other");
    let request = signed(
        "/github",
        "application/json",
        &other,
        &GITHUB,
        GITHUB_SECRET,
        None,
        &[("x-github-delivery", "d-2")],
    );
    let outcome = relay.accept(request).await;
    let body: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
    assert_eq!(
        (outcome.status.as_u16(), body["status"].as_str()),
        (202, Some("filtered"))
    );
    assert_eq!(sinks.counts(), [1, 1, 1, 0]);
}

#[tokio::test]
async fn a_request_signed_for_another_source_is_refused() {
    let (relay, sinks, _file) = relay_with_sources();
    let cases = [
        // GitHub's signature with the billing source's secret.
        (
            "github signed with another key",
            signed(
                "/github",
                "application/json",
                PUSH,
                &GITHUB,
                SW_SECRET,
                None,
                &[("x-github-delivery", "d-1")],
            ),
            (401, "bad_signature"),
        ),
        // A correctly signed GitHub delivery sent to the billing source's path.
        (
            "github on the billing path",
            {
                let mut r = push("d-1");
                *r.uri_mut() = "/billing".parse().unwrap();
                r
            },
            (401, "missing_signature"),
        ),
        // The billing source's event on GitHub's path.
        (
            "standard webhooks on the github path",
            invoice("/github", "msg_1"),
            (401, "missing_signature"),
        ),
        // The DSS capture on GitHub's path.
        (
            "dss on the github path",
            {
                let mut r = capture::request("v2-json-post");
                *r.uri_mut() = "/github".parse().unwrap();
                r
            },
            (401, "missing_signature"),
        ),
        // A GitHub delivery on the DSS's path.
        (
            "github on the dss path",
            {
                let mut r = push("d-1");
                *r.uri_mut() = "/dss/notify".parse().unwrap();
                r
            },
            (401, "missing_authorization"),
        ),
        // No source answers on this path.
        (
            "unknown path",
            {
                let mut r = push("d-1");
                *r.uri_mut() = "/gitlab".parse().unwrap();
                r
            },
            (404, "unknown_path"),
        ),
    ];
    for (name, request, (status, code)) in cases {
        let outcome = relay.accept(request).await;
        assert_eq!(answer(&outcome), (status, code.to_owned()), "{name}");
    }
    assert_eq!(sinks.counts(), [0, 0, 0, 0]);
}

#[tokio::test]
async fn standard_webhooks_refuses_a_stale_timestamp_and_a_tampered_body() {
    let (relay, sinks, _file) = relay_with_sources();
    let old = capture::time() - Duration::from_secs(3600);
    let headers = StandardWebhooks::default()
        .sign(
            INVOICE.as_bytes(),
            Signer::new(&hmac_key(SW_SECRET), old, Some("msg_1")),
        )
        .unwrap();
    let mut builder = Request::post("/billing").header("content-type", "application/json");
    for (name, value) in &headers {
        builder = builder.header(name, value);
    }
    let stale = builder
        .body(Bytes::from_static(INVOICE.as_bytes()))
        .unwrap();
    assert_answers(&relay, stale, (401, "stale_timestamp")).await;

    let mut tampered = invoice("/billing", "msg_1");
    *tampered.body_mut() = Bytes::from(INVOICE.replace("in_1", "in_2"));
    assert_answers(&relay, tampered, (401, "bad_signature")).await;
    assert_eq!(sinks.counts(), [0, 0, 0, 0]);
}

#[tokio::test]
async fn form_bodies_route_on_their_fields_and_are_forwarded_as_sent() {
    let (relay, sinks, _file) = relay_with_sources();
    let form = "token=x&command=%2Fdeploy&text=api+prod&user_id=U1";
    let slack = |content_type, body| {
        signed(
            "/slack",
            content_type,
            body,
            &Slack::default(),
            SLACK_SECRET,
            None,
            &[],
        )
    };
    let request = slack("application/x-www-form-urlencoded", form);
    assert_answers(&relay, request, (202, "")).await;
    let chat = sinks.chat.messages();
    assert_eq!(&chat[0].payload[..], form.as_bytes());
    assert_eq!(chat[0].attributes.get("relay.source"), Some("slack"));

    // A JSON body that does not parse is refused after its signature checked.
    let request = slack("application/json", "{not json");
    assert_answers(&relay, request, (400, "invalid_json")).await;
    assert_eq!(sinks.counts(), [0, 0, 0, 1]);
}

#[tokio::test]
async fn each_source_has_its_own_dedup_key_in_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = relay_core::ledger::SqliteLedger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let (relay, sinks, _file) = relay_with_sources();
    let relay = relay.with_ledger(Arc::new(ledger));

    let first = relay.accept(push("d-1")).await;
    assert_eq!(answer(&first), (202, String::new()));
    // GitHub does not sign X-GitHub-Delivery: a push is known by its body, so the capture sent
    // again with new delivery ids, or none, is the same event, and nothing is published again.
    let github_key = relay_core::notification::source_dedup_key(
        "github",
        &hex::encode(sha2::Sha256::digest(PUSH.as_bytes())),
    );
    for delivery in ["d-2", "d-3", "d-4"] {
        let again = relay.accept(push(delivery)).await;
        let body: serde_json::Value = serde_json::from_slice(&again.body).unwrap();
        assert_eq!(body["status"], "duplicate", "{delivery}: {body}");
        assert_eq!(body["dedup_key"].as_str(), Some(github_key.as_str()));
    }
    let unlabelled = relay.accept(github_push(&[])).await;
    let body: serde_json::Value = serde_json::from_slice(&unlabelled.body).unwrap();
    assert_eq!(body["status"], "duplicate", "{body}");
    // Standard Webhooks signs webhook-id: the billing source's events are known by it, and
    // another source's event with the same id is another event.
    let outcome = relay.accept(invoice("/billing", "same-id")).await;
    let other: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
    assert_eq!(other["status"], "published", "{other}");
    assert_eq!(
        other["dedup_key"].as_str(),
        Some(relay_core::notification::source_dedup_key("billing", "same-id").as_str())
    );
    let again = relay.accept(invoice("/billing", "same-id")).await;
    let body: serde_json::Value = serde_json::from_slice(&again.body).unwrap();
    assert_eq!(body["status"], "duplicate", "{body}");
    assert_eq!(sinks.counts(), [0, 1, 1, 0]);
}

/// Shopify, and a generic HMAC source whose template does not sign its `id_header`: a captured
/// request sent again with new, unsigned delivery ids publishes nothing new with the ledger,
/// and the id stays an attribute.
#[tokio::test]
async fn a_capture_sent_again_with_new_unsigned_ids_is_a_duplicate() {
    use relay_core::schemes::SHOPIFY;
    use relay_core::schemes::hmac::{GenericHmac, HmacConfig};
    let (relay, out) = relay_to_out(
        "[sources.shop]\nscheme = \"shopify\"\npaths = [\"/shop\"]\nsecret_env = \"S\"\n\n[sources.generic]\nscheme = \"hmac\"\npaths = [\"/hmac\"]\nsecret_env = \"S\"\nid_header = \"x-delivery\"\n",
        &[("S", GITHUB_SECRET)],
    );
    let dir = tempfile::tempdir().unwrap();
    let ledger = relay_core::ledger::SqliteLedger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let relay = relay.with_ledger(Arc::new(ledger));
    let generic = GenericHmac::new(HmacConfig::body_only("x-signature")).unwrap();
    for (path, scheme, id_header) in [
        ("/shop", &SHOPIFY as &dyn Scheme, "x-shopify-webhook-id"),
        ("/hmac", &generic as &dyn Scheme, "x-delivery"),
    ] {
        let before = out.messages().len();
        for (i, id) in ["first", "new-1", "new-2", "new-3"].into_iter().enumerate() {
            let request = signed(
                path,
                "application/json",
                INVOICE,
                scheme,
                GITHUB_SECRET,
                None,
                &[(id_header, id)],
            );
            let body: serde_json::Value =
                serde_json::from_slice(&relay.accept(request).await.body).unwrap();
            let expected = if i == 0 { "published" } else { "duplicate" };
            assert_eq!(body["status"], expected, "{path} {id}: {body}");
        }
        let messages = out.messages();
        assert_eq!(messages.len(), before + 1, "{path}: published once");
        let message = messages.last().unwrap();
        assert_eq!(
            message.attributes.get("relay.delivery_id"),
            Some("first"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_dss_notification_through_a_named_source_keeps_its_dedup_key() {
    let (named, _sinks, _file) = relay_with_sources();
    let (alone, _) = relay_testkit::capture_relay(&[]);
    let a = named.accept(capture::request("v2-json-post")).await;
    let b = alone.accept(capture::request("v2-json-post")).await;
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&a.body).unwrap(),
        serde_json::from_slice(&b.body).unwrap(),
    );
    assert_eq!(a["dedup_key"], b["dedup_key"]);
    assert!(
        a["dedup_key"].as_str().is_some_and(|k| k.len() == 64),
        "{a}"
    );
}

#[test]
fn a_source_that_cannot_work_is_refused_at_start() {
    let cases = [
        (
            "[sources.gh]\nscheme = \"github\"\npaths = [\"/gh\"]\n",
            "set secret_env",
        ),
        (
            "[sources.gh]\nscheme = \"github\"\npaths = [\"/gh\"]\nsecret_env = \"UNSET_SECRET\"\n",
            "UNSET_SECRET is not set",
        ),
        (
            "[sources.gh]\nscheme = \"gitlab\"\n",
            "unknown variant `gitlab`",
        ),
        ("[sources.gh]\npaths = [\"/gh\"]\n", "has no scheme"),
        (
            "[sources.a]\nscheme = \"dss\"\npaths = [\"/x\"]\n[sources.b]\nscheme = \"dss\"\npaths = [\"/x\"]\n",
            "named by the sources \"a\" and \"b\"",
        ),
        (
            "[sources.a]\nscheme = \"dss\"\n[sources.b]\nscheme = \"dss\"\n",
            "at most one source may take every path",
        ),
        (
            "[sources.s]\nscheme = \"stripe\"\nsecret_env = \"SET\"\ndedup_key = \"delivery-id\"\n",
            "gives no delivery id",
        ),
        (
            "[sources.s]\nscheme = \"stripe\"\nsecret_env = \"SET\"\nprefix = \"sha256=\"\n",
            "does not read prefix",
        ),
        // A dedup key from what the sender does not sign: a capture with a new value would be
        // published again.
        (
            "[sources.gh]\nscheme = \"github\"\nsecret_env = \"SET\"\ndedup_key = \"delivery-id\"\n",
            "the github scheme does not sign its delivery id",
        ),
        (
            "[sources.s]\nscheme = \"shopify\"\nsecret_env = \"SET\"\ndedup_key = \"header:x-shopify-webhook-id\"\n",
            "does not sign that header",
        ),
        (
            "[sources.s]\nscheme = \"hmac\"\nsecret_env = \"SET\"\nid_header = \"x-id\"\ndedup_key = \"delivery-id\"\n",
            "or sign {id} in the template",
        ),
        (
            "[sources.s]\nscheme = \"hmac\"\nsecret_env = \"SET\"\ntemplate = \"{timestamp}.{body}\"\n",
            "no header for it",
        ),
        (
            "[sources.s]\nscheme = \"hmac\"\nsecret_env = \"SET\"\ntimestamp_header = \"x-ts\"\n",
            "the template does not sign {timestamp}",
        ),
        (
            "[sources.s]\nscheme = \"hmac\"\nsecret_env = \"SET\"\nid_header = \"x-id\"\ntemplate = \"{id}{body}\"\n",
            "{id} and {body} side by side",
        ),
        (
            "[sources.s]\nscheme = \"slack\"\nsecret_env = \"SET\"\nwindow_secs = 0\n",
            "window_secs must be at least 1",
        ),
        (
            "[sources.s]\nscheme = \"github\"\nsecret_env = \"SET\"\ndedup_key = \"uuid\"\n",
            "expected \"delivery-id\"",
        ),
        (
            "[sources.s]\nscheme = \"dss\"\npaths = [\"dss\"]\n",
            "must start with /",
        ),
        (
            "[sources.s]\nscheme = \"standard-webhooks\"\nsecret_env = \"BAD_KEY\"\n",
            "32 bytes of base64",
        ),
    ];
    for (text, expected) in cases {
        let file = ConfigFile::new(&to_out(text));
        let errors = file
            .load(&[
                ("RELAY_HMAC_SECRET", "k"),
                ("SET", "a-secret"),
                ("BAD_KEY", "whpk_dGVzdA=="),
            ])
            .expect_err(text)
            .to_string();
        assert!(
            errors.contains(expected),
            "{text}: expected {expected:?} in\n{errors}"
        );
        assert!(!errors.contains("a-secret"), "{errors}");
    }
}

#[test]
fn sources_without_the_dss_need_no_dss_key() {
    let file = ConfigFile::new(&to_out(
        "[sources.gh]\nscheme = \"github\"\nsecret_env = \"GH\"\n",
    ));
    let config = file.load(&[("GH", "s")]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.sources.len(), 1);
    assert!(!config.sources[0].has_timestamp());
    // A DSS source without its own keys still needs the relay's.
    let dss = to_out("[sources.dss]\nscheme = \"dss\"\n");
    assert_refused(&dss, &[], "no HMAC key is configured");
}

#[tokio::test]
async fn another_sources_archived_event_is_replayed_as_it_arrived() {
    use relay_core::archive::{Archive, DirArchive, Record};
    use relay_core::relay::{ReplayPlan, ReplayRecord, ReplayTo, Replayed};
    let dir = tempfile::tempdir().unwrap();
    let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(dir.path()).unwrap());
    let (relay, sinks, _file) = relay_with_sources();
    let relay = relay.with_archive(Arc::clone(&archive), relay_testkit::archive::key());
    assert_answers(&relay, push("d-9"), (202, "")).await;
    let hour = relay_core::archive::hour_prefix(capture::time());
    let keys = archive.list(&hour).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes = archive.get(&keys[0]).await.unwrap().unwrap();
    let record = Record::open(&relay_testkit::archive::key(), &bytes).unwrap();
    assert_eq!(record.attribute("relay.source"), Some("github"));
    // Whoever reads the archive cannot send the push again: its signature is not kept.
    let headers = record.request["headers"].as_object().unwrap();
    assert!(headers.get("x-hub-signature-256").is_none(), "{headers:?}");
    assert!(headers.get("x-github-event").is_some(), "{headers:?}");
    assert!(
        record
            .dropped_headers
            .iter()
            .any(|h| h == "x-hub-signature-256"),
        "{:?}",
        record.dropped_headers
    );

    let plan = ReplayPlan {
        to: ReplayTo::Routes,
        record: ReplayRecord::Unrecorded,
        dry_run: false,
    };
    let replayed = relay.replay(&record, &plan).await.unwrap();
    assert!(matches!(replayed, Replayed::Sent { .. }), "{replayed:?}");
    let code = sinks.code.messages();
    assert_eq!(code.len(), 2);
    assert_eq!(code[1].payload, code[0].payload);
    assert_eq!(code[1].dedup_key, code[0].dedup_key);
    for name in ["relay.source", "relay.event_type", "relay.delivery_id"] {
        assert_eq!(
            code[1].attributes.get(name),
            code[0].attributes.get(name),
            "{name}"
        );
    }
    assert_eq!(code[1].attributes.get("relay.replayed"), Some("true"));
}

#[tokio::test]
async fn a_destinations_own_attributes_outrank_the_dss_sources_name() {
    let file = ConfigFile::new(
        r#"
[sources.dss]
scheme = "dss"

[sinks.q]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
extra_attributes = { team = "atlas" }

[[routes]]
name = "all"
to = ["q"]
"#,
    );
    let config = file
        .load(&[("RELAY_HMAC_SECRET", capture::SECRET)])
        .unwrap_or_else(|e| panic!("{e}"));
    let q = RecordingSink::new("q");
    let relay = relay(
        config,
        &[("q", Arc::clone(&q) as Arc<dyn Sink>)],
        capture_clock(),
    );
    // Eight attributes of the capture's own; with the attempt header nine, then the extra.
    let plain = capture::request("v2-json-post");
    let mut attempt = capture::request("v2-json-post");
    attempt
        .headers_mut()
        .insert("x-dss-notify-attempt", http::HeaderValue::from_static("1"));
    for request in [plain, attempt] {
        assert_answers(&relay, request, (202, "")).await;
    }
    let messages = q.messages();
    let names = |i: usize| -> Vec<String> {
        messages[i]
            .attributes
            .iter()
            .map(|(n, _)| n.to_owned())
            .collect()
    };
    assert_eq!(names(0).len(), 10);
    assert_eq!(
        names(0)[8..],
        ["team".to_owned(), "relay.source".to_owned()]
    );
    // At SQS's ten, the source's name is the one left out, never the destination's own.
    assert_eq!(names(1).len(), 10);
    assert_eq!(names(1).last().map(String::as_str), Some("team"));
    assert!(!names(1).iter().any(|n| n == "relay.source"));
}

#[tokio::test]
async fn fifo_ids_of_another_sources_events() {
    let file = ConfigFile::new(
        r#"
[sources.github]
scheme = "github"
secret_env = "TEST_GITHUB_SECRET"

[sinks.plain]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo"

[sinks.by_repo]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/repos.fifo"
message_group_id = "{$source}:{repository.full_name}"

[[routes]]
name = "all"
to = ["plain", "by_repo"]
"#,
    );
    let config = file
        .load(&[("TEST_GITHUB_SECRET", GITHUB_SECRET)])
        .unwrap_or_else(|e| panic!("{e}"));
    let (plain, by_repo) = (RecordingSink::new("plain"), RecordingSink::new("by_repo"));
    let relay = relay(
        config,
        &[
            ("plain", Arc::clone(&plain) as Arc<dyn Sink>),
            ("by_repo", Arc::clone(&by_repo) as Arc<dyn Sink>),
        ],
        capture_clock(),
    );
    assert_answers(&relay, push("d-1"), (202, "")).await;
    // The default group, `{subscription_id}`, is the source's name for an event that has none.
    let message = &plain.messages()[0];
    assert_eq!(message.group_id.as_deref(), Some("github"));
    assert_eq!(
        message.dedup_id.as_deref(),
        Some(message.dedup_key.as_str())
    );
    assert_eq!(
        by_repo.messages()[0].group_id.as_deref(),
        Some("github:octo/relay")
    );
}

#[tokio::test]
async fn a_sources_keys_may_come_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("github.secret");
    std::fs::write(&secret, format!("{GITHUB_SECRET}\n")).unwrap();
    let (relay, out) = relay_to_out(
        &format!(
            "[sources.github]\nscheme = \"github\"\nsecret_file = \"{}\"\n",
            secret.display()
        ),
        &[],
    );
    assert_answers(&relay, push("d-1"), (202, "")).await;
    assert_eq!(out.messages().len(), 1);

    // Two places for one secret, and a file that is not there, are refused.
    for (text, expected) in [
        (
            format!(
                "[sources.github]\nscheme = \"github\"\nsecret_env = \"X\"\nsecret_file = \"{}\"\n",
                secret.display()
            ),
            "set one of secret_env, secret_file and secret_arn",
        ),
        (
            "[sources.github]\nscheme = \"github\"\nsecret_file = \"/nonexistent/secret\"\n"
                .to_owned(),
            "secret_file /nonexistent/secret cannot be read",
        ),
    ] {
        let errors = assert_refused(&to_out(&text), &[("X", "x")], expected);
        assert!(!errors.contains(GITHUB_SECRET), "{errors}");
    }
}

/// The `{id}.{body}` shift: a captured request (id `d-9`, body `{"order":1,"amount":1.5}`) sent
/// again with the boundary moved into the body (id `d-9.{"order":1,"amount":1`, body `5}`) signs
/// the same bytes; the id holds the template's separator, and the request is refused 401.
#[tokio::test]
async fn a_signed_value_holding_its_separator_is_refused() {
    use relay_core::schemes::hmac::{GenericHmac, HmacConfig};
    let (relay, out) = relay_to_out(
        "[sources.generic]\nscheme = \"hmac\"\npaths = [\"/hmac\"]\nsecret_env = \"S\"\ntemplate = \"{id}.{body}\"\nid_header = \"x-id\"\n",
        &[("S", GITHUB_SECRET)],
    );
    let mut scheme = HmacConfig::body_only("x-signature");
    scheme.template = "{id}.{body}".into();
    scheme.id_header = Some("x-id".into());
    let scheme = GenericHmac::new(scheme).unwrap();
    let body = r#"{"order":1,"amount":1.5}"#;
    let captured = signed(
        "/hmac",
        "application/json",
        body,
        &scheme,
        GITHUB_SECRET,
        Some("d-9"),
        &[],
    );
    let signature = captured.headers()["x-signature"].clone();
    assert_answers(&relay, captured, (202, "")).await;

    let shifted = Request::post("/hmac")
        .header("content-type", "text/plain")
        .header("x-signature", signature)
        .header("x-id", r#"d-9.{"order":1,"amount":1"#)
        .body(Bytes::from_static(b"5}"))
        .unwrap();
    assert_answers(&relay, shifted, (401, "ambiguous_signed_value")).await;
    assert_eq!(out.messages().len(), 1, "only the captured request");

    // A template whose body is not last is refused at start.
    let generic = to_out(
        "[sources.generic]\nscheme = \"hmac\"\nsecret_env = \"S\"\ntemplate = \"{body}.{timestamp}\"\ntimestamp_header = \"x-ts\"\n",
    );
    assert_refused(&generic, &[("S", GITHUB_SECRET)], "must end with {body}");
}

/// Two RFC 9421 sources on two paths with one key: a request signed for the first, sent to the
/// second, is refused where the signature must cover `@method` and `@path` (the default), and
/// taken where a source requires `content-digest` alone (the explicit old behaviour). A
/// signature that covers only `content-digest` is refused by the default.
#[tokio::test]
async fn a_request_signed_for_one_rfc9421_source_is_refused_by_another() {
    use relay_core::schemes::rfc9421::Rfc9421;
    let sources = |required: &str| {
        format!(
            "[sources.a]\nscheme = \"rfc9421\"\npaths = [\"/a\"]\nsecret_env = \"K\"\n{required}\n[sources.b]\nscheme = \"rfc9421\"\npaths = [\"/b\"]\nsecret_env = \"K\"\n{required}"
        )
    };
    let keys = r#"{"k1": "one key for two sources"}"#;
    let signer = SigningKey::Hmac {
        key_id: Some("k1".into()),
        secret: Secret::new("one key for two sources").into(),
    };
    let request = |signed_for: &str, sent_to: &str, scheme: &Rfc9421| {
        let headers = relay_testkit::requests::scheme_headers(
            scheme,
            signed_for,
            INVOICE.as_bytes(),
            &signer,
            capture::time(),
            None,
        );
        let mut builder = Request::post(sent_to).header("content-type", "application/json");
        for (name, value) in &headers {
            builder = builder.header(name, value);
        }
        builder
            .body(Bytes::from_static(INVOICE.as_bytes()))
            .unwrap()
    };
    let start = |required: &str| relay_to_out(&sources(required), &[("K", keys)]);

    let (strict, out) = start("");
    let default = Rfc9421::default();
    assert_answers(&strict, request("/a", "/a", &default), (202, "")).await;
    assert_answers(
        &strict,
        request("/a", "/b", &default),
        (401, "bad_signature"),
    )
    .await;
    let digest_only = Rfc9421 {
        required: vec!["content-digest".into()],
        ..Rfc9421::default()
    };
    assert_answers(
        &strict,
        request("/a", "/b", &digest_only),
        (401, "incomplete_signed_headers"),
    )
    .await;
    assert_eq!(out.messages().len(), 1);

    let (loose, out) = start("required_components = [\"content-digest\"]\n");
    assert_answers(&loose, request("/a", "/b", &digest_only), (202, "")).await;
    assert_eq!(out.messages().len(), 1, "the old behaviour, asked for");

    let path_only = sources("required_components = [\"@path\"]\n");
    assert_refused(
        &path_only,
        &[("K", keys)],
        "must include \"content-digest\"",
    );
}

/// A route on `X-GitHub-Event`, which GitHub does not sign, is refused at start without the
/// opt-in: the push body sent with `X-GitHub-Event: release` would take the releases route.
#[test]
fn a_route_on_an_unsigned_header_needs_the_opt_in() {
    let config = |opt_in: &str| {
        format!(
            "[sources.github]\nscheme = \"github\"\npaths = [\"/github\"]\nsecret_env = \"S\"\n\n[sinks.out]\ntype = \"file\"\npath = \"-\"\n\n[[routes]]\nname = \"releases\"\nmatch = {{ \"$request\" = {{ headers = {{ x-github-event = [\"release\"] }} }} }}\nto = [\"out\"]\n{opt_in}"
        )
    };
    let says = "route \"releases\", match: matches on $request";
    let refused = assert_refused(&config(""), &[("S", GITHUB_SECRET)], says);
    assert!(refused.contains("add accept_unsigned = true"), "{refused}");
    ConfigFile::new(&config("accept_unsigned = true\n"))
        .load(&[("S", GITHUB_SECRET)])
        .unwrap_or_else(|e| panic!("{e}"));
}
