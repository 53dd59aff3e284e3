//! Slow clients cannot hold the server: connections that send their headers a line at a
//! time (or nothing at all) are closed after the header-read timeout, over real TCP, and
//! the server keeps answering `/healthz` meanwhile and still shuts down gracefully.

mod common;

use perfbisect_server::{api, listen};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SLOW_CLIENTS: usize = 300;

/// A full `GET /healthz` on a fresh connection: the status line.
async fn healthz(addr: std::net::SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_header_connections_are_closed_and_the_server_keeps_answering() {
    let f = common::fixture().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listen::serve(
        listener,
        None,
        api::router(f.state.clone()),
        Duration::from_secs(2),
        async {
            let _ = stopped.await;
        },
    ));
    assert!(healthz(addr).await.contains("200"));

    // Each slow client starts a request and then drips one header line every 200 ms,
    // forever; a third send nothing at all after connecting. Each counts itself when the
    // server closes its connection (end of stream, or a reset while writing).
    let closed = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for i in 0..SLOW_CLIENTS {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let closed = closed.clone();
        clients.push(tokio::spawn(async move {
            let silent = i % 3 == 0;
            if !silent {
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
                    .await
                    .unwrap();
            }
            let mut buf = [0u8; 256];
            loop {
                tokio::select! {
                    r = s.read(&mut buf) => match r {
                        Ok(0) | Err(_) => break,
                        // hyper may answer 408 before closing; keep reading to the end.
                        Ok(_) => continue,
                    },
                    _ = tokio::time::sleep(Duration::from_millis(200)), if !silent => {
                        if s.write_all(b"X-Slow: 1\r\n").await.is_err() {
                            break;
                        }
                    }
                }
            }
            closed.fetch_add(1, Ordering::SeqCst);
        }));
    }

    // While they are held open, the server answers others.
    assert!(
        healthz(addr).await.contains("200"),
        "healthz under slowloris"
    );

    // Every slow connection is closed by the server, well before a client would give up.
    let start = Instant::now();
    while closed.load(Ordering::SeqCst) < SLOW_CLIENTS {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "only {} of {SLOW_CLIENTS} slow connections were closed",
            closed.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for c in clients {
        c.await.unwrap();
    }
    assert!(
        healthz(addr).await.contains("200"),
        "healthz after slowloris"
    );

    // Graceful shutdown still ends the server.
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(60), server)
        .await
        .expect("the server stops after the shutdown signal")
        .unwrap()
        .unwrap();
}
