//! What every integration test needs: unique names, queue clients, a relay-gcf server on
//! loopback, and signed DSS notifications.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_core::verify::{Secret, sign};
use relay_core::{Config, Relay};

pub(crate) const KEY_ID: &str = "it-key";
pub(crate) const SECRET: &str = "integration-secret";

/// A name no other test uses.
pub(crate) fn unique(prefix: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A v2 notification as the DSS serialized it.
pub(crate) fn v2(subscription: &str, bundle: &str, event: &str, transaction: &str) -> String {
    format!(
        r#"{{"bundle_url": "https://dss.data.humancellatlas.org/v1/bundles/{bundle}?version=2019-11-15T202303.689105Z", "dss_api": "https://dss.data.humancellatlas.org", "subscription_id": "{subscription}", "event_timestamp": "2019-11-15T202411.123456Z", "event_type": "{event}", "match": {{"bundle_uuid": "{bundle}", "bundle_version": "2019-11-15T202303.689105Z"}}, "transaction_id": "{transaction}"}}"#
    )
}

/// A v1 notification with attachments, as the DSS serialized it.
pub(crate) fn v1(subscription: &str, bundle: &str) -> String {
    format!(
        r#"{{"transaction_id": "9d0eb75c-d950-4e62-b685-4f20c8569410", "subscription_id": "{subscription}", "es_query": {{"query": {{"match_all": {{}}}}}}, "match": {{"bundle_uuid": "{bundle}", "bundle_version": "2018-06-04T225830.079725Z"}}, "attachments": {{"sample_id": ["b1829a9d"], "submitter_id": null}}}}"#
    )
}

/// How a request body carries the notification.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Encoding {
    Json,
    Multipart,
}

/// The DSS's request for a payload: content type, body and signature headers.
pub(crate) fn dss_request(
    url: &str,
    payload: &str,
    encoding: Encoding,
) -> http::Request<Full<Bytes>> {
    let (content_type, body) = match encoding {
        Encoding::Json => ("application/json".to_owned(), payload.as_bytes().to_vec()),
        Encoding::Multipart => {
            let b = "2769baffc4f24cbc83ced26aa0c2f712";
            let body = format!(
                "--{b}\r\nContent-Disposition: form-data; name=\"foo\"\r\n\r\nbar\r\n--{b}\r\nContent-Disposition: form-data; name=\"payload\"\r\n\r\n{payload}\r\n--{b}--\r\n"
            );
            (
                format!("multipart/form-data; boundary={b}"),
                body.into_bytes(),
            )
        }
    };
    let signature = sign(KEY_ID, &Secret::new(SECRET), SystemTime::now(), &body).unwrap();
    http::Request::put(url)
        .header("content-type", content_type)
        .header("date", signature.date)
        .header("digest", signature.digest)
        .header("authorization", signature.authorization)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// Sends a request and returns the status and JSON body.
pub(crate) async fn send(request: http::Request<Full<Bytes>>) -> (u16, serde_json::Value) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let response = client.request(request).await.expect("relay answered");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// Sends each payload in its encoding and checks that the relay published it to its one sink,
/// whose name starts with `kind:`, with a message id.
pub(crate) async fn publish_each(
    url: &str,
    payloads: &[String],
    encodings: &[Encoding],
    kind: &str,
) {
    for (payload, encoding) in payloads.iter().zip(encodings) {
        let (status, body) = send(dss_request(url, payload, *encoding)).await;
        assert_eq!(status, 202, "{body}");
        let delivery = &body["deliveries"][0];
        // The sink the variables name after its kind, and what it delivers to.
        assert_eq!(delivery["sink"], kind, "{body}");
        assert!(
            delivery["resource"].as_str().is_some_and(|r| !r.is_empty()),
            "{body}"
        );
        assert!(delivery["message_id"].is_string(), "{body}");
    }
}

/// A relay configuration from the given `RELAY_*` variables, the test key, and the rest of the
/// environment (`PUBSUB_EMULATOR_HOST`) as production reads it.
pub(crate) fn config(vars: &[(&str, &str)]) -> Config {
    require_emulator_env();
    let keys = format!(r#"{{"{KEY_ID}": "{SECRET}"}}"#);
    Config::from_vars(|name| {
        if name == "RELAY_HMAC_KEYS" {
            return Some(keys.clone());
        }
        match vars.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => Some((*v).to_owned()),
            None if name.starts_with("RELAY_") => None,
            None => std::env::var(name).ok(),
        }
    })
    .expect("valid test configuration")
}

/// Serves relay-gcf's app on a free loopback port; returns its callback URL.
pub(crate) async fn serve(relay: Relay) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/dss/notify?replica=aws",
        listener.local_addr().unwrap()
    );
    let app = relay_gcf::app(Arc::new(relay));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// relay-gcf built exactly as in production, from configuration variables.
pub(crate) async fn gcf(vars: &[(&str, &str)]) -> String {
    serve(
        Relay::from_config(config(vars))
            .await
            .expect("relay starts"),
    )
    .await
}

/// relay-gcf as in production, except that its SQS and SNS clients are built from `sdk` (an
/// endpoint the test controls: a proxy that counts calls, a closed port, a server that hangs).
pub(crate) async fn gcf_with(vars: &[(&str, &str)], sdk: &aws_config::SdkConfig) -> String {
    let config = config(vars);
    let mut sinks = Vec::new();
    for sink in &config.sinks {
        let clients = relay_core::sink::Clients::with_aws(sdk, config.batch_wait);
        sinks.push(sink.target.build(clients).await.expect("the sink builds"));
    }
    let mut sinks = sinks.into_iter();
    let clock = Arc::new(relay_core::verify::SystemClock);
    serve(Relay::with_sinks(
        config,
        |_| sinks.next().expect("one per sink"),
        clock,
    ))
    .await
}

/// The test environment must point every client at the emulators; without it the SDK would
/// look for real credentials and endpoints.
pub(crate) fn require_emulator_env() {
    for name in [
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "PUBSUB_EMULATOR_HOST",
    ] {
        assert!(
            std::env::var_os(name).is_some(),
            "{name} is not set: source infra/local/env.sh"
        );
    }
}

pub(crate) async fn sdk() -> aws_config::SdkConfig {
    require_emulator_env();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(relay_core::cloud::aws_http_client())
        .load()
        .await
}

pub(crate) async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk().await)
}

pub(crate) async fn create_queue(sqs: &aws_sdk_sqs::Client, fifo: bool) -> String {
    let name = unique("dss");
    create_named_queue(sqs, &if fifo { format!("{name}.fifo") } else { name }).await
}

/// Creates the queue `name` (FIFO when it ends in `.fifo`); returns its URL.
pub(crate) async fn create_named_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    let mut request = sqs.create_queue().queue_name(name);
    if name.ends_with(".fifo") {
        request = request.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    let created = request.send().await.expect("the queue is created");
    created.queue_url().expect("a queue URL").to_owned()
}

/// Receives (and deletes) until `want` messages arrived, then keeps listening for `linger` to
/// catch any extra copies.
pub(crate) async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    want: usize,
    linger: Duration,
) -> Vec<Message> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now > deadline || quiet_until.is_some_and(|q| now > q) {
            return got;
        }
        let output = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        for message in output.messages() {
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(message.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
            got.push(message.clone());
        }
        if got.len() >= want && quiet_until.is_none() {
            quiet_until = Some(Instant::now() + linger);
        }
    }
}

/// A String message attribute of an SQS message.
pub(crate) fn attribute<'m>(message: &'m Message, name: &str) -> Option<&'m str> {
    message.message_attributes()?.get(name)?.string_value()
}

/// The production AWS configuration (`load_aws_config`), sending to `endpoint` instead of the
/// one in the environment (whose `AWS_ENDPOINT_URL*` would otherwise win).
pub(crate) async fn sdk_via(endpoint: &str, deadline: Duration) -> aws_config::SdkConfig {
    require_emulator_env();
    relay_core::cloud::load_aws_config(deadline)
        .await
        .to_builder()
        .service_config(NoServiceEnv)
        .endpoint_url(endpoint)
        .build()
}

/// Reads no service-specific setting from the environment.
#[derive(Debug)]
struct NoServiceEnv;

impl aws_types::service_config::LoadServiceConfig for NoServiceEnv {
    fn load_config(&self, _: aws_types::service_config::ServiceConfigKey<'_>) -> Option<String> {
        None
    }
}

/// A loopback HTTP proxy in front of an emulator that records every call passing through it: the
/// operation an AWS JSON-protocol call names (`UpdateItem` of `x-amz-target`), else its path.
pub(crate) struct CountingProxy {
    pub(crate) url: String,
    paths: Arc<Mutex<Vec<String>>>,
}

impl CountingProxy {
    /// In front of moto (`AWS_ENDPOINT_URL`).
    pub(crate) async fn start() -> Self {
        Self::to(&std::env::var("AWS_ENDPOINT_URL").expect("source infra/local/env.sh")).await
    }

    /// In front of the HTTP endpoint `upstream`.
    pub(crate) async fn to(upstream: &str) -> Self {
        let upstream = upstream.trim_end_matches('/').to_owned();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&paths);
        let client: Client<HttpConnector, axum::body::Body> =
            Client::builder(TokioExecutor::new()).build_http();
        let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
            let (client, upstream, log) = (client.clone(), upstream.clone(), Arc::clone(&log));
            async move {
                let (mut parts, body) = request.into_parts();
                let path = parts
                    .uri
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_owned();
                let operation = (parts.headers.get("x-amz-target"))
                    .and_then(|target| target.to_str().ok()?.rsplit('.').next())
                    .map_or_else(|| path.clone(), str::to_owned);
                log.lock().unwrap().push(operation);
                parts.uri = format!("{upstream}{path}").parse().unwrap();
                let response = client
                    .request(http::Request::from_parts(parts, body))
                    .await
                    .unwrap();
                response.map(axum::body::Body::new)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, paths }
    }

    /// The calls that passed so far.
    pub(crate) fn calls(&self) -> usize {
        self.paths.lock().unwrap().len()
    }

    /// The calls since the last take, in order.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.paths.lock().unwrap())
    }

    /// The production AWS configuration, sending through this proxy.
    pub(crate) async fn sdk(&self, deadline: Duration) -> aws_config::SdkConfig {
        sdk_via(&self.url, deadline).await
    }
}

/// A loopback DynamoDB endpoint answering every call with `status` and the error `error_type`
/// (`ProvisionedThroughputExceededException`, …): its URL, the calls it answered, and its task.
pub(crate) async fn dynamodb_answering(
    status: u16,
    error_type: &'static str,
) -> (String, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = axum::Router::new().fallback(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            let body = format!(
                r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{error_type}","message":"Rate of requests exceeds the allowed throughput."}}"#
            );
            http::Response::builder()
                .status(status)
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amzn-requestid", "it")
                .body(axum::body::Body::from(body))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (endpoint, calls, server)
}
