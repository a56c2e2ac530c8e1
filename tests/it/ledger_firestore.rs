//! The Firestore ledger against Google's Firestore emulator, through the production code path
//! (`ledger::open` with `FIRESTORE_EMULATOR_HOST`): the conformance suite, the calls each step
//! costs (counted by a loopback proxy in front of the emulator), two relays sharing a
//! collection, a document that cannot be read, and the answers to a closed port, a throttled or
//! failing service, a hanging one and a refusal.

use std::time::Duration;

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_core::cloud::Cloud;
use relay_core::ledger::{
    self, Claimed, FirestoreLedger, Grant, Ledger, LedgerError, LedgerUrl, Lookup,
};
use relay_testkit::ledger::{
    T0, acked_at, attempt, claim, conformance, entry, fresh_identity, held,
    one_claim_granted_among, settle, try_claim,
};

use crate::common::{CountingProxy, unique};

const DATABASE: &str = "(default)";

pub(crate) fn emulator_host() -> String {
    std::env::var("FIRESTORE_EMULATOR_HOST").expect("source infra/local/env.sh")
}

pub(crate) fn project() -> String {
    std::env::var("PUBSUB_PROJECT_ID").unwrap_or_else(|_| "test-project".into())
}

/// A collection no other test uses, and its `firestore://` URL.
pub(crate) fn collection() -> (String, LedgerUrl) {
    let name = unique("ledger");
    let url = format!("firestore://{}/{DATABASE}/{name}", project())
        .parse()
        .unwrap();
    (name, url)
}

#[tokio::test]
async fn the_firestore_ledger_follows_the_rules() {
    let _ = emulator_host();
    let (_, url) = collection();
    let ledger = ledger::open(&url, &Cloud::default())
        .await
        .expect("the ledger opens");
    conformance(ledger).await;
}

/// A loopback proxy in front of the emulator that records the method of every call (`commit`,
/// `batchGet`, `runQuery`) passing through it.
struct CallLog(CountingProxy);

impl CallLog {
    async fn start() -> Self {
        Self(CountingProxy::to(&format!("http://{}", emulator_host())).await)
    }

    /// The host and port the ledger is to reach the emulator at.
    fn host(&self) -> &str {
        self.0.url.trim_start_matches("http://")
    }

    /// The methods of the calls since the last take, in order, joined by commas.
    fn take(&self) -> String {
        let paths = self.0.take();
        let methods: Vec<&str> = paths
            .iter()
            .map(|p| p.rsplit(':').next().unwrap_or_default())
            .collect();
        methods.join(",")
    }
}

#[tokio::test]
async fn a_new_claim_is_one_call_and_its_settlement_one() {
    let log = CallLog::start().await;
    let (name, _) = collection();
    let ledger = FirestoreLedger::emulator(log.host(), &project(), DATABASE, &name).unwrap();
    let id = fresh_identity();
    let t = T0;

    let first = attempt(t, &["q1", "q2"]);
    assert!(matches!(
        claim(&ledger, &id, &first).await,
        Claimed::Granted(Grant { attempt: 0, .. })
    ));
    assert_eq!(log.take(), "commit", "a new notification's claim");
    settle(&ledger, &id, &first, 0, &[("q1", true), ("q2", false)]).await;
    assert_eq!(log.take(), "commit", "its settlement");

    // A retry: the create fails, then a read and a conditional write.
    let retry = attempt(t + 60_000, &["q1", "q2"]);
    let acked = acked_at(&ledger, &id, &retry, 1).await;
    assert_eq!(acked.keys().collect::<Vec<_>>(), ["q1"]);
    assert_eq!(log.take(), "commit,batchGet,commit", "a retry's claim");
    settle(&ledger, &id, &retry, 1, &[("q2", true)]).await;
    assert_eq!(log.take(), "commit", "its settlement");

    let duplicate = attempt(t + 120_000, &["q1", "q2"]);
    let acked = acked_at(&ledger, &id, &duplicate, 2).await;
    assert_eq!(acked.len(), 2);
    assert_eq!(log.take(), "commit,batchGet,commit", "a duplicate");

    // A claim refused by a live lease writes nothing.
    let (other, holder) = held(&ledger, &["q1"]).await;
    log.take();
    assert!(matches!(
        claim(&ledger, &other, &attempt(t + 1, &["q1"])).await,
        Claimed::Busy { .. }
    ));
    assert_eq!(log.take(), "commit,batchGet", "a claim that loses");

    // A settlement after another write to the entry: its commit fails, then a read and a commit.
    let takeover = attempt(t + 7_001, &["q1"]);
    claim(&ledger, &other, &takeover).await;
    log.take();
    settle(&ledger, &other, &holder, 0, &[("q1", true)]).await;
    assert_eq!(log.take(), "commit,batchGet,commit", "a late settlement");
    // A settlement on another instance than its claim's: a read and a commit.
    let elsewhere = FirestoreLedger::emulator(log.host(), &project(), DATABASE, &name).unwrap();
    settle(&elsewhere, &other, &takeover, 1, &[("q1", true)]).await;
    assert_eq!(
        log.take(),
        "batchGet,commit",
        "a settlement on another instance"
    );
    let settled = entry(&ledger, &other).await;
    assert_eq!(log.take(), "batchGet", "a lookup by key");
    assert_eq!(settled.acks["q1"].attempt, 0);
    assert!(settled.leases.is_empty());

    let found = ledger
        .find(&Lookup::Bundle(other.bundle_uuid.clone()))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(log.take(), "runQuery", "a lookup by bundle");
}

#[tokio::test]
async fn a_settlement_does_not_recreate_a_deleted_entry() {
    let (name, _) = collection();
    let ledger = FirestoreLedger::emulator(&emulator_host(), &project(), DATABASE, &name).unwrap();
    let id = fresh_identity();
    let first = attempt(T0, &["q1"]);
    claim(&ledger, &id, &first).await;
    raw(
        "POST",
        ":commit",
        &serde_json::json!({ "writes": [{ "delete": document_name(&name, &id.dedup_key) }] }),
    )
    .await;
    settle(&ledger, &id, &first, 0, &[("q1", true)]).await;
    let found = ledger
        .find(&Lookup::Key {
            key: id.dedup_key.clone(),
            bundle: None,
        })
        .await;
    assert!(found.unwrap().is_empty(), "the settlement wrote nothing");
}

#[tokio::test]
async fn two_relays_sharing_a_collection_grant_one_claim() {
    let _ = emulator_host();
    let (_, url) = collection();
    let a = ledger::open(&url, &Cloud::default()).await.unwrap();
    let b = ledger::open(&url, &Cloud::default()).await.unwrap();
    one_claim_granted_among(a, b, 40).await;
}

fn document_name(collection: &str, key: &str) -> String {
    format!(
        "projects/{}/databases/{DATABASE}/documents/{collection}/{key}",
        project()
    )
}

/// One call to the emulator's REST API, outside the store; it must succeed.
pub(crate) async fn raw(method: &str, suffix: &str, body: &serde_json::Value) {
    let client: Client<HttpConnector, http_body_util::Full<bytes::Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let url = format!(
        "http://{}/v1/projects/{}/databases/{DATABASE}/documents{suffix}",
        emulator_host(),
        project()
    );
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", "Bearer owner")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap().into())
        .unwrap();
    let status = client.request(request).await.unwrap().status().as_u16();
    assert_eq!(status, 200, "{method} {suffix}");
}

#[tokio::test]
async fn a_document_that_is_not_an_entry_is_corrupt() {
    let (name, _) = collection();
    let key = fresh_identity().dedup_key;
    raw(
        "POST",
        ":commit",
        &serde_json::json!({ "writes": [{ "update": {
            "name": document_name(&name, &key),
            "fields": {
                "bundle_uuid": { "stringValue": "b" },
                "state": { "stringValue": "{not json" },
            },
        }}]}),
    )
    .await;
    let ledger = FirestoreLedger::emulator(&emulator_host(), &project(), DATABASE, &name).unwrap();
    let error = ledger
        .find(&Lookup::Key {
            key: key.clone(),
            bundle: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LedgerError::Corrupt { key: k, .. } if *k == key),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_closed_port_is_unavailable() {
    let host = format!("127.0.0.1:{}", relay_testkit::free_port());
    let ledger = FirestoreLedger::emulator(&host, "p", DATABASE, "ledger").unwrap();
    let error = try_claim(&ledger).await.unwrap_err();
    assert!(matches!(error, LedgerError::Unavailable(_)), "{error:?}");
    let error = ledger.find(&Lookup::Bundle("b".into())).await.unwrap_err();
    assert!(matches!(error, LedgerError::Unavailable(_)), "{error:?}");
}

/// A loopback server answering every call with `status` and a Google error body of `code`, or
/// never answering when `status` is 0; its `host:port`.
async fn answering(status: u16, code: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().fallback(move || async move {
        if status == 0 {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let body = format!(
            r#"{{"error":{{"code":{status},"message":"from the test","status":"{code}"}}}}"#
        );
        http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (host, server)
}

#[tokio::test]
async fn a_throttled_failing_or_hanging_service_is_unavailable_and_a_refusal_is_refused() {
    for (status, code) in [
        (429, "RESOURCE_EXHAUSTED"),
        (503, "UNAVAILABLE"),
        (500, "INTERNAL"),
        (504, "DEADLINE_EXCEEDED"),
        (0, "hangs"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
    ] {
        let (host, server) = answering(status, code).await;
        let ledger = FirestoreLedger::emulator(&host, "p", DATABASE, "ledger").unwrap();
        let error = tokio::time::timeout(Duration::from_secs(10), try_claim(&ledger))
            .await
            .unwrap_or_else(|_| panic!("{code}: no answer within 10 s"))
            .unwrap_err();
        match status {
            403 | 404 => assert!(
                matches!(error, LedgerError::Refused(_)),
                "{code}: {error:?}"
            ),
            _ => assert!(
                matches!(error, LedgerError::Unavailable(_)),
                "{code}: {error:?}"
            ),
        }
        server.abort();
    }
}
