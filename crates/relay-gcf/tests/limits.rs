//! relay-gcf against hostile and broken clients, through the real binary on loopback: stalled
//! headers and bodies, oversized budgets, HTTP/2 prior knowledge.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Server;
use relay_testkit::capture;

/// Reads what the server sends until it closes or `wait` passes; `None` if still open.
fn read_until_closed(stream: &mut TcpStream, wait: Duration) -> Option<String> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Some(String::from_utf8_lossy(&received).into_owned()),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(String::from_utf8_lossy(&received).into_owned());
            }
            Err(_) => return None,
        }
    }
}

/// Sends one complete request and returns the answer: head and body, read by its length.
fn exchange(server: &Server, request: &[u8]) -> String {
    let mut stream = server.connect();
    stream.write_all(request).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = stream.read(&mut buffer).expect("an answer within 10 s");
        received.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        let Some(end) = text.find("\r\n\r\n") else {
            assert!(n > 0, "closed before an answer: {text:?}");
            continue;
        };
        let length = text[..end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            })
            .unwrap_or(0);
        if n == 0 || received.len() >= end + 4 + length {
            return text;
        }
    }
}

fn head(content_length: usize) -> String {
    format!(
        "POST / HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
}

/// A connection whose request stops after the first byte of a 100-byte body.
fn stalled_body(server: &Server) -> TcpStream {
    let mut stream = server.connect();
    stream
        .write_all(format!("{}{{", head(100)).as_bytes())
        .unwrap();
    stream
}

#[test]
fn stalled_and_greedy_clients_leave_room_for_a_notification() {
    let server = Server::start(&[]);
    let started = Instant::now();
    let mut stalled = Vec::new();
    // 300 connections stalled in their headers.
    for _ in 0..300 {
        let mut s = server.connect();
        s.write_all(b"POST / HTTP/1.1\r\nHost: relay\r\nContent-")
            .unwrap();
        stalled.push(s);
    }
    // 20 stalled in their bodies.
    for _ in 0..20 {
        let mut s = server.connect();
        s.write_all(format!("{}{{\"subscr", head(4000)).as_bytes())
            .unwrap();
        stalled.push(s);
    }
    // 150 holding 1 MiB bodies, one byte short of what they declared.
    let senders: Vec<_> = (0..150)
        .map(|_| {
            let mut s = server.connect();
            std::thread::spawn(move || {
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = s.write_all(head(1 << 20).as_bytes());
                let _ = s.write_all(&vec![b' '; (1 << 20) - 1]);
                s
            })
        })
        .collect();
    stalled.extend(senders.into_iter().map(|t| t.join().unwrap()));

    let asked = Instant::now();
    let answer = exchange(&server, capture::raw("v2-json-post"));
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "answered after {:?}",
        asked.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let rss_mib = server.peak_rss_kib() / 1024;
    assert!(rss_mib <= 160, "peak RSS {rss_mib} MiB");

    // Every stalled connection is answered or closed within 40 s of being opened.
    for mut s in stalled {
        let left = Duration::from_secs(40)
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        assert!(
            read_until_closed(&mut s, left).is_some(),
            "still open after {:?}",
            started.elapsed()
        );
    }
    eprintln!(
        "peak RSS {rss_mib} MiB; all stalled connections ended after {:?}",
        started.elapsed()
    );
}

#[test]
fn slow_bodies_hold_their_place_only_as_long_as_their_bytes_justify() {
    // With the defaults: more slow senders than the old limit of 256 requests in flight, each
    // declaring 4 KB and sending 100 bytes.
    let server = Server::start(&[]);
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut s = server.connect();
        s.write_all(format!("{}{}", head(4096), " ".repeat(100)).as_bytes())
            .unwrap();
        slow.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let answer = exchange(&server, capture::raw("v2-json-post"));
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "answered after {:?}",
        asked.elapsed()
    );
    // 100 bytes justify a second's grace and a little more, not the 20 s body timeout.
    for mut s in slow {
        let answer = read_until_closed(&mut s, Duration::from_secs(3)).expect("ended");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
}

#[test]
fn a_burst_beyond_the_old_request_limit_is_acknowledged_whole() {
    let server = Server::start(&[]);
    // 600 complete notifications opened at once, twice the old limit of requests in flight.
    let mut streams: Vec<TcpStream> = (0..600).map(|_| server.connect()).collect();
    for s in &mut streams {
        s.write_all(capture::raw("v2-json-post")).unwrap();
    }
    for mut s in streams {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).expect("an answer");
        assert_eq!(&head, b"HTTP/1.1 202", "{}", String::from_utf8_lossy(&head));
    }
}

#[test]
fn timeouts_close_idle_connections_and_answer_slow_bodies_with_408() {
    let vars = [
        ("RELAY_HEADER_TIMEOUT_MS", "500"),
        ("RELAY_BODY_TIMEOUT_MS", "500"),
    ];
    let server = Server::start(&vars);
    // Nothing sent: closed after the header timeout.
    let mut silent = server.connect();
    assert_eq!(
        read_until_closed(&mut silent, Duration::from_secs(3)).as_deref(),
        Some("")
    );
    // Kept alive after one answer, then idle: closed too.
    let mut idle = server.connect();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
        .unwrap();
    let answered = read_until_closed(&mut idle, Duration::from_secs(3)).expect("closed when idle");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    // A body that stops: 408 in the JSON error shape.
    let mut slow = stalled_body(&server);
    let answer = read_until_closed(&mut slow, Duration::from_secs(3)).expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""code":"request_timeout""#), "{answer}");
}

#[test]
fn beyond_the_budget_is_503_overloaded_before_the_body_is_read() {
    let server = Server::start(&[
        ("RELAY_MAX_CONCURRENT_REQUESTS", "1"),
        ("RELAY_BODY_TIMEOUT_MS", "5000"),
    ]);
    let _holder = stalled_body(&server);
    std::thread::sleep(Duration::from_millis(200));
    let answer = exchange(&server, head(100).as_bytes());
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 5"),
        "{answer}"
    );
    assert!(answer.contains(r#""code":"overloaded""#), "{answer}");
}

#[test]
fn http2_prior_knowledge_gets_no_http2_answer() {
    let server = Server::start(&[]);
    let mut stream = server.connect();
    // The HTTP/2 connection preface, then an empty SETTINGS frame.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .unwrap();
    let answer = read_until_closed(&mut stream, Duration::from_secs(5)).expect("closed");
    // An HTTP/2 server would answer with a SETTINGS frame (type 4) first.
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 "),
        "{answer:?}"
    );
}
