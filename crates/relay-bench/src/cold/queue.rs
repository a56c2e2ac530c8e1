//! The loopback SQS-protocol endpoint of the cold starts, over TLS with a certificate from a
//! private CA made at run time (which the relay trusts through `SSL_CERT_FILE`), or over plain
//! HTTP. It answers `SendMessage`, `SendMessageBatch` and `GetQueueAttributes` (the JSON
//! protocol, as relay-testkit's `fake_sqs` does, which owns its plain listener) and keeps every
//! message body it accepted, so that a run can check each notification arrived exactly once.

use relay_testkit::loopback::AwsCall;
use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// The queue's name in its URL.
const QUEUE: &str = "relay-bench";

/// A private CA and a certificate for 127.0.0.1 that it signed, ready to serve.
#[derive(Clone)]
pub(crate) struct Tls {
    acceptor: TlsAcceptor,
    /// The CA's certificate, PEM.
    pub(crate) ca_pem: String,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Makes a CA (ECDSA P-256) and a server certificate for the address 127.0.0.1.
    pub(crate) fn generate() -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "relay-bench private CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().expect("a CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("a CA certificate");
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("a SAN");
        leaf.distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        leaf.use_authority_key_identifier_extension = true;
        let leaf_key = KeyPair::generate().expect("a server key");
        let leaf_cert = leaf
            .signed_by(&leaf_key, &issuer)
            .expect("a server certificate");

        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let chain = vec![CertificateDer::from(leaf_cert.der().to_vec())];
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a server configuration");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            ca_pem: ca_cert.pem(),
        }
    }

    /// Writes the file `SSL_CERT_FILE` names: the system's CA bundle, when this machine has
    /// one, then the private CA, so the relay loads as many roots as it would on Lambda.
    pub(crate) fn write_bundle(&self, path: &Path) {
        let system = [
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/pki/tls/certs/ca-bundle.crt",
        ]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
        std::fs::write(path, format!("{system}\n{}", self.ca_pem)).expect("the CA bundle");
    }
}

/// A running endpoint, stopped when dropped.
#[derive(Debug)]
pub(crate) struct Queue {
    /// `https://127.0.0.1:<port>` or `http://…`.
    pub(crate) endpoint: String,
    state: Arc<Mutex<Seen>>,
    server: JoinHandle<()>,
}

/// What the endpoint saw.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seen {
    /// Every message body accepted, in order.
    pub(crate) bodies: Vec<String>,
    /// Calls it refused, with why.
    pub(crate) refused: Vec<String>,
    /// Calls that publish nothing (`GetQueueAttributes`), by operation.
    pub(crate) other: Vec<String>,
    /// Calls, TLS handshakes that failed included.
    pub(crate) calls: usize,
}

impl Queue {
    /// Starts the endpoint on a free loopback port, over TLS when `tls` is given.
    pub(crate) async fn start(tls: Option<&Tls>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("an address");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let state = Arc::new(Mutex::new(Seen::default()));
        let serving = Arc::clone(&state);
        let acceptor = tls.map(|t| t.acceptor.clone());
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&serving);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(stream) => serve(stream, state).await,
                            Err(e) => {
                                let mut seen = state.lock().expect("not poisoned");
                                seen.calls += 1;
                                seen.refused.push(format!("TLS handshake: {e}"));
                            }
                        },
                        None => serve(stream, state).await,
                    }
                });
            }
        });
        Self {
            endpoint: format!("{scheme}://{addr}"),
            state,
            server,
        }
    }

    /// The URL of the queue on this endpoint.
    pub(crate) fn queue_url(&self) -> String {
        format!("{}/123456789012/{QUEUE}", self.endpoint)
    }

    /// What it saw so far.
    pub(crate) fn seen(&self) -> Seen {
        self.state.lock().expect("not poisoned").clone()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve<S>(stream: S, state: Arc<Mutex<Seen>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| answer(Arc::clone(&state), request));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn answer(
    state: Arc<Mutex<Seen>>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let AwsCall { target, input } = AwsCall::read(request).await;
    let mut seen = state.lock().expect("not poisoned");
    seen.calls += 1;
    let reply = match target.as_str() {
        "AmazonSQS.SendMessage" => {
            seen.bodies
                .push(input["MessageBody"].as_str().unwrap_or_default().to_owned());
            json!({"MessageId": format!("m-{}", seen.bodies.len()), "MD5OfMessageBody": ""})
        }
        "AmazonSQS.SendMessageBatch" => {
            let entries = input["Entries"].as_array().map_or(&[][..], Vec::as_slice);
            let mut successful = Vec::new();
            for entry in entries {
                seen.bodies
                    .push(entry["MessageBody"].as_str().unwrap_or_default().to_owned());
                successful.push(json!({"Id": entry["Id"], "MessageId": format!("m-{}", seen.bodies.len()), "MD5OfMessageBody": ""}));
            }
            json!({"Successful": successful, "Failed": []})
        }
        // What a relay that opens its connections at start asks first.
        "AmazonSQS.GetQueueAttributes" => {
            seen.other.push(target.clone());
            let arn = format!("arn:aws:sqs:us-east-1:123456789012:{QUEUE}");
            json!({"Attributes": {"QueueArn": arn}})
        }
        other => {
            seen.refused.push(format!("unexpected call {other:?}"));
            let error = json!({"__type": "com.amazonaws.sqs#InvalidAction", "message": other});
            return Ok(respond(400, &error));
        }
    };
    Ok(respond(200, &reply))
}

fn respond(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    relay_testkit::loopback::aws_reply(status, body)
}
