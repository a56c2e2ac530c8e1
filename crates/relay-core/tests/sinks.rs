//! How routes and sink results become answers, through `Relay` with injected sinks: every
//! routed sink must acknowledge, failures choose 502 or 503, and nothing is published when one
//! routed sink cannot take the notification.

use http_body_util::Full;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use relay_core::{Outcome, Relay, Sink};
use relay_testkit::capture::SECRET;
use relay_testkit::{
    ConfigFile, FailingSink, RecordingSink, Signer, StuckSink, capture_clock, config, relay,
    status_and_code, v2,
};

/// Three routes to two sinks: creates go to both, deletions to `b`, a Glioblastoma project
/// to `a` (also reached by creates), and the rest is filtered out.
const ROUTED: &str = r#"
[relay]
hmac_secret = "ribos0me"

[[routes]]
name = "creates"
match = { event_type = ["CREATE"] }
to = ["a", "b"]

[[routes]]
name = "deletions"
match = { event_type = ["DELETE"] }
to = ["b"]

[[routes]]
name = "glioblastoma"
match = { project = [{ prefix = "Glio" }] }
to = ["a"]

[sinks.a]
type = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/a.fifo"
message_group_id = "{match.bundle_uuid}"
attributes = ["relay.dedup_key", "dss.event_type"]

[sinks.b]
type = "pubsub"
topic = "projects/p/topics/dss-b"
ordering_key = "{project}"
"#;

fn routed(a: &Arc<RecordingSink>, b: &Arc<RecordingSink>) -> Relay {
    let file = ConfigFile::new(ROUTED);
    let config = file.load(&[]).expect("a valid configuration");
    let (a, b): (Arc<dyn Sink>, Arc<dyn Sink>) = (Arc::clone(a) as _, Arc::clone(b) as _);
    relay(config, &[("a", a), ("b", b)], capture_clock())
}

fn notification(event_type: &str, project: Option<&str>) -> String {
    let project = project
        .map(|p| format!(r#", "project": "{p}""#))
        .unwrap_or_default();
    v2(event_type).replace(
        r#""subscription_id": "s""#,
        &format!(r#""subscription_id": "s"{project}"#),
    )
}

fn signed(body: &str) -> http::Request<bytes::Bytes> {
    Signer::capture("k").json(body)
}

fn body(outcome: &Outcome) -> serde_json::Value {
    serde_json::from_slice(&outcome.body).unwrap()
}

#[tokio::test]
async fn routes_pick_the_sinks_and_a_shared_sink_is_reached_once() {
    let (a, b) = (RecordingSink::new("a"), RecordingSink::new("b"));
    let relay = routed(&a, &b);

    // A Glioblastoma CREATE matches "creates" and "glioblastoma": `a` once, `b` once.
    let outcome = relay
        .accept(signed(&notification("CREATE", Some("Glioblastoma"))))
        .await;
    assert_eq!(outcome.status, StatusCode::ACCEPTED);
    assert_eq!(body(&outcome)["deliveries"].as_array().unwrap().len(), 2);
    assert_eq!((a.messages().len(), b.messages().len()), (1, 1));

    let outcome = relay
        .accept(signed(&notification("DELETE", Some("x"))))
        .await;
    assert_eq!(outcome.status, StatusCode::ACCEPTED);
    assert_eq!(
        (a.messages().len(), b.messages().len()),
        (1, 2),
        "deletions reach b only"
    );

    // Each sink shapes its own message: a's attribute selection and group id, b's ordering key.
    let (to_a, to_b) = (&a.messages()[0], &b.messages()[0]);
    let names: Vec<&str> = to_a.attributes.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["relay.dedup_key", "dss.event_type"]);
    assert_eq!(
        (to_a.group_id.as_deref(), to_a.ordering_key.as_deref()),
        (Some("u"), None)
    );
    assert_eq!(
        (to_b.group_id.as_deref(), to_b.ordering_key.as_deref()),
        (None, Some("Glioblastoma"))
    );
    assert_eq!(
        to_b.attributes.len(),
        7,
        "b sends every attribute the notification has"
    );
}

#[tokio::test]
async fn a_notification_no_route_wants_is_filtered_with_202() {
    let (a, b) = (RecordingSink::new("a"), RecordingSink::new("b"));
    let relay = routed(&a, &b);
    let outcome = relay.accept(signed(&notification("TOMBSTONE", None))).await;
    assert_eq!(outcome.status, StatusCode::ACCEPTED);
    assert_eq!(body(&outcome)["status"], "filtered");
    assert_eq!(body(&outcome)["dedup_key"].as_str().map(str::len), Some(64));
    assert!(a.messages().is_empty() && b.messages().is_empty());
}

#[tokio::test]
async fn a_template_one_routed_sink_cannot_fill_is_502_and_no_sink_is_called() {
    let (a, b) = (RecordingSink::new("a"), RecordingSink::new("b"));
    let relay = routed(&a, &b);
    // A CREATE without `project`: b's ordering key cannot be filled; a could take it.
    let outcome = relay.accept(signed(&notification("CREATE", None))).await;
    assert_eq!(status_and_code(&outcome), (502, "sink_failed".to_owned()));
    assert!(
        a.messages().is_empty() && b.messages().is_empty(),
        "nothing was published"
    );
}

/// A relay whose `file` and `sqs` sinks (every notification to both) are `sinks`.
fn to_both(pairs: &[(&str, &str)], first: Arc<dyn Sink>, second: Arc<dyn Sink>) -> Relay {
    let mut all = vec![
        ("RELAY_HMAC_SECRET", SECRET),
        ("RELAY_FILE_SINK", "-"),
        (
            "RELAY_SQS_QUEUE_URL",
            "https://sqs.eu-west-1.amazonaws.com/1/q",
        ),
    ];
    all.extend_from_slice(pairs);
    relay(
        config(&all),
        &[("file", first), ("sqs", second)],
        capture_clock(),
    )
}

#[tokio::test]
async fn one_failing_sink_fails_the_request() {
    let ok: Arc<dyn Sink> = RecordingSink::new("ok");
    let retry: Arc<dyn Sink> = FailingSink::new("flaky", true);
    let broken: Arc<dyn Sink> = FailingSink::new("broken", false);

    let outcome = to_both(&[], Arc::clone(&ok), Arc::clone(&retry))
        .accept(signed(&v2("CREATE")))
        .await;
    assert_eq!(
        status_and_code(&outcome),
        (503, "sink_unavailable".to_owned())
    );
    assert_eq!(outcome.headers["retry-after"], "5");

    let outcome = to_both(&[], ok, Arc::clone(&broken))
        .accept(signed(&v2("CREATE")))
        .await;
    assert_eq!(status_and_code(&outcome), (502, "sink_failed".to_owned()));

    // Retrying cannot fix a permanent failure, so it decides the status.
    let outcome = to_both(&[], retry, broken)
        .accept(signed(&v2("CREATE")))
        .await;
    assert_eq!(outcome.status, StatusCode::BAD_GATEWAY);
    assert!(
        !String::from_utf8_lossy(&outcome.body).contains("simulated"),
        "no internal detail leaks"
    );
}

#[tokio::test]
async fn a_sink_that_never_answers_gets_503_by_the_deadline() {
    let ok: Arc<dyn Sink> = RecordingSink::new("ok");
    let quick = to_both(
        &[("RELAY_SINK_TIMEOUT_MS", "300")],
        Arc::clone(&ok),
        Arc::new(StuckSink),
    );
    let started = Instant::now();
    let outcome = quick.accept(signed(&v2("CREATE"))).await;
    assert_eq!(outcome.status, StatusCode::SERVICE_UNAVAILABLE);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // A platform deadline earlier than the sink timeout wins.
    let late = to_both(&[], ok, Arc::new(StuckSink));
    let started = Instant::now();
    let deadline = Some(Instant::now() + Duration::from_millis(200));
    let outcome = late
        .handle(signed(&v2("CREATE")).map(Full::new), deadline)
        .await;
    assert_eq!(outcome.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn too_large_for_one_sink_is_413_before_any_sink_is_called() {
    let (file, queue) = (RecordingSink::new("file"), RecordingSink::new("queue"));
    let relay = to_both(
        &[("RELAY_SQS_MAX_MESSAGE_BYTES", "300")],
        Arc::<RecordingSink>::clone(&file),
        Arc::<RecordingSink>::clone(&queue),
    );
    let big = v2("CREATE").replace(r#""s""#, &format!("\"{}\"", "s".repeat(200)));
    let outcome = relay.accept(signed(&big)).await;
    assert_eq!(
        status_and_code(&outcome),
        (413, "message_too_large".to_owned())
    );
    assert!(file.messages().is_empty() && queue.messages().is_empty());
}

#[tokio::test]
async fn a_deadline_already_passed_is_503_and_no_sink_is_called() {
    let (file, queue) = (RecordingSink::new("file"), RecordingSink::new("queue"));
    let relay = to_both(
        &[],
        Arc::<RecordingSink>::clone(&file),
        Arc::<RecordingSink>::clone(&queue),
    );
    let outcome = relay
        .handle(signed(&v2("CREATE")).map(Full::new), Some(Instant::now()))
        .await;
    assert_eq!(
        status_and_code(&outcome),
        (503, "deadline_passed".to_owned())
    );
    assert_eq!(outcome.headers["retry-after"], "5");
    assert!(file.messages().is_empty() && queue.messages().is_empty());
}

/// A writer that keeps each write apart.
#[derive(Clone, Default)]
struct Writes(Arc<std::sync::Mutex<Vec<String>>>);

impl std::io::Write for Writes {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(data).into_owned();
        self.0.lock().unwrap().push(text);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// On Lambda a request is one `Relay::invoke`: its metric lines are written, in one write, by
/// the time it returns, with nothing left for the adapter to flush.
#[tokio::test]
async fn an_invocation_writes_its_metric_lines_before_it_returns() {
    let (a, b) = (RecordingSink::new("a"), RecordingSink::new("b"));
    let file = ConfigFile::new(&format!("{ROUTED}\n"));
    let config = file
        .load(&[("RELAY_METRICS", "emf")])
        .expect("a valid configuration");
    let (sa, sb): (Arc<dyn Sink>, Arc<dyn Sink>) = (Arc::clone(&a) as _, Arc::clone(&b) as _);
    let writes = Writes::default();
    let held = Arc::new(relay_core::metrics::Held::new(writes.clone()));
    let relay = relay(config, &[("a", sa), ("b", sb)], capture_clock()).holding_metrics(held);
    let request = signed(&notification("CREATE", Some("x"))).map(Full::new);
    let outcome = relay.invoke(request, None).await;
    assert_eq!(outcome.status, StatusCode::ACCEPTED);
    let writes = writes.0.lock().unwrap().clone();
    assert_eq!(writes.len(), 1, "one write: {writes:?}");
    let answered = writes[0]
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|line| line["Status"] == "202");
    assert!(answered, "the answer's line: {writes:?}");
}
