//! `serve`'s shutdown, in process: connections the kernel completed before the shutdown are
//! answered, not reset when the listener closes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use relay_testkit::capture;

const CONNECTIONS: usize = 16;

#[tokio::test(flavor = "current_thread")]
async fn connections_waiting_to_be_accepted_when_shutdown_comes_are_answered() {
    let (relay, sink) = relay_testkit::capture_relay(&[]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();

    // The server has not run yet: every handshake completes in the kernel's queue, and the
    // runtime has seen none of them.
    let clients: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            stream.write_all(capture::raw("v2-json-post")).unwrap();
            stream
        })
        .collect();

    // The shutdown is due from the first poll.
    let server = tokio::spawn(relay_gcf::serve(
        listener,
        Arc::new(relay),
        std::future::ready(()),
    ));
    let answers = tokio::task::spawn_blocking(move || {
        clients
            .into_iter()
            .map(|mut stream| {
                let mut answer = Vec::new();
                // A reset shows as an error here, or as an empty answer.
                let _ = stream.read_to_end(&mut answer);
                String::from_utf8_lossy(&answer).into_owned()
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    server.await.unwrap();

    for answer in &answers {
        assert!(answer.starts_with("HTTP/1.1 202"), "{answer:?}");
    }
    assert_eq!(sink.messages().len(), CONNECTIONS);
}
