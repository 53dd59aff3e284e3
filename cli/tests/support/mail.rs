//! A real SMTP server for the mail tests (`smtp_sink.py`, on Debian's python3-aiosmtpd) as
//! a child process, what it received, and a `perfbisect server` child that mails to it.
#![allow(dead_code)] // each test uses a different part

use crate::common::{API_TOKEN, ENROLL_TOKEN, EXE, Lab};
use perfbisect_cli::demo::wait_healthy;
use perfbisect_cli::processes::{Process, free_port};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const PYTHON: &str = "/usr/bin/python3";
pub const FROM: &str = "perfbisect robot <robot@perfbisect.example>";

/// One message the SMTP server accepted.
#[derive(Debug, Clone, Deserialize)]
pub struct Received {
    pub mail_from: String,
    pub rcpt_tos: Vec<String>,
    pub raw: String,
    pub headers: Vec<(String, String)>,
    pub content_type: String,
    pub text: Option<String>,
    pub html: Option<String>,
    /// Every leaf MIME part, in order.
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// One leaf MIME part as Python's email package decodes it.
#[derive(Debug, Clone, Deserialize)]
pub struct Part {
    pub content_type: String,
    pub transfer_encoding: String,
    pub filename: Option<String>,
    pub content: String,
}

impl Received {
    /// The values of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The one value of a header; panics when it is missing or repeated.
    pub fn header(&self, name: &str) -> &str {
        match self.header_all(name).as_slice() {
            [v] => v,
            other => panic!("header {name}: {other:?} in {:#?}", self.headers),
        }
    }
}

pub struct Sink {
    pub dir: PathBuf,
    pub port: u16,
    _process: Process,
}

impl Sink {
    /// Starts the server with extra flags (`--hold`, `--reject N`, `--refuse`).
    pub fn start(lab: &Lab, name: &str, flags: &[&str]) -> Sink {
        let dir = lab.path().join(name);
        let port = free_port().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/smtp_sink.py");
        assert!(
            Command::new(PYTHON)
                .args(["-c", "import aiosmtpd"])
                .status()
                .is_ok_and(|s| s.success()),
            "the mail tests need Debian's python3-aiosmtpd (scripts/test-packages)"
        );
        let mut cmd = Command::new(PYTHON);
        cmd.arg(&script)
            .arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(&dir)
            .args(flags);
        let mut process =
            Process::spawn(name, cmd, &lab.path().join(format!("{name}.log"))).unwrap();
        let start = Instant::now();
        while !dir.join("ready").exists() {
            assert!(
                !process.has_exited(),
                "the SMTP sink exited: {}",
                lab.log(name)
            );
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the SMTP sink did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Sink {
            dir,
            port,
            _process: process,
        }
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every message received so far, in order.
    pub fn messages(&self) -> Vec<Received> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
            .collect()
    }

    /// Waits until at least `n` messages arrived.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.messages();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < limit,
                "{} of {n} messages within {limit:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Lets a `--hold` sink answer the held message.
    pub fn release(&self) {
        std::fs::write(self.dir.join("release"), "").unwrap();
    }
}

/// `perfbisect server` as `Lab::server` starts it, plus mail settings in `env`.
pub async fn server_with_mail(lab: &Lab, lease_secs: u64, env: &[(&str, String)]) -> Process {
    let mut cmd = Command::new(EXE);
    cmd.arg("server")
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", lab.port))
        .arg("--data-dir")
        .arg(lab.path().join("server"))
        .env("PERFBISECT_API_TOKEN", API_TOKEN)
        .env("PERFBISECT_ENROLL_TOKEN", ENROLL_TOKEN)
        .env("PERFBISECT_LEASE_SECS", lease_secs.to_string())
        .env("DATABASE_URL", &lab.db_url)
        .env("PERFBISECT_MAIL_FROM", FROM);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Process::spawn("server", cmd, &lab.path().join("server.log")).unwrap();
    wait_healthy(&lab.api, &mut p, Duration::from_secs(120))
        .await
        .unwrap();
    p
}

/// GET with the API token; (status, body).
pub async fn get(lab: &Lab, path: &str) -> (u16, String) {
    let resp = reqwest::Client::new()
        .get(format!("{}{path}", lab.api.base()))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The outbox rows of a bisect, as the API shows them.
pub async fn outbox(lab: &Lab, bisect: i64) -> Vec<serde_json::Value> {
    let (status, body) = get(lab, &format!("/api/v1/outbox?bisect={bisect}")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Waits until the bisect's final mail reaches `state`.
pub async fn until_mail_state(
    lab: &Lab,
    bisect: i64,
    state: &str,
    limit: Duration,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let rows = outbox(lab, bisect).await;
        if let Some(r) = rows
            .iter()
            .find(|r| r["event"] != "started" && r["state"] == state)
        {
            return r.clone();
        }
        assert!(
            start.elapsed() < limit,
            "no mail of bisect {bisect} became {state} within {limit:?}: {rows:#?}\n{}",
            lab.log("server")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
