//! Reports and the outbox in-process, against a real PostgreSQL database (fresh per test):
//! report inputs assembled from stored rows, the report endpoints, the outbox written with
//! the final status, delivery through a fake transport (retries, give-up, crash recovery),
//! subscriptions and per-bisect mail options.

use axum::http::StatusCode;
use perfbisect_report::{Judgement, Outcome, ReportConfig, render};
use perfbisect_server::notify::outbox::{self, Claimed};
use perfbisect_server::notify::sender::{self, Delivery, SendError, Transport};
use perfbisect_server::notify::{MailConfig, MailSettings};
use perfbisect_server::report_input::{self, ReportContext, ReportInputError};
use perfbisect_server::{AppState, api, scheduler};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

mod common;

use common::TOKEN;
const G: &str = "1111111111111111111111111111111111111111";
const C0: &str = "2222222222222222222222222222222222222222";
const C1: &str = "3333333333333333333333333333333333333333";
const C2: &str = "4444444444444444444444444444444444444444";

struct Fixture {
    state: AppState,
    _dir: tempfile::TempDir,
    repo: i64,
    host: i64,
}

async fn fixture() -> Fixture {
    let (mut state, dir) = common::state("http://perfbisect.test").await;
    let pool = state.db.clone();
    state.mail = Arc::new(settings(3));
    let repo: i64 = sqlx::query_scalar(
        "INSERT INTO repositories (name, url) VALUES ('linux', 'https://git.example.org/linux.git') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let machine = json!({"cpu_model": "Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz", "threads": 64,
                         "sockets": 2, "memory_bytes": 256u64 << 30});
    let host: i64 = sqlx::query_scalar(
        "INSERT INTO hosts (name, host_group, machine, token_hash) VALUES ('h1', 'lkp', $1, 'x') RETURNING id",
    )
    .bind(machine)
    .fetch_one(&pool)
    .await
    .unwrap();
    Fixture {
        state,
        _dir: dir,
        repo,
        host,
    }
}

fn settings(max_attempts: i32) -> MailSettings {
    MailConfig {
        mail_from: "robot <robot@perfbisect.example>".into(),
        mail_max_attempts: max_attempts,
        mail_retry_secs: 60,
        mail_headers: vec!["X-Patchwork-Hint: ignore".into()],
        ..MailConfig::default()
    }
    .settings()
    .unwrap()
}

/// A bisect over G..C2 (C0 → C1 → C2) with `testcase`/`metric`, in `status`, culprit C1.
/// Runs: the endpoints, an unpaired C0 outlier, and the paired verification of C1 against C0
/// with `parent`/`culprit` values (and one incomplete culprit run).
async fn bisect(
    f: &Fixture,
    testcase: &str,
    metric: &str,
    status: &str,
    parent: &[f64],
    culprit: &[f64],
) -> i64 {
    let db = &f.state.db;
    let spec = json!({"testcase": testcase, "tbox_group": "lkp", "compiler": "gcc-14", "kconfig": "x86_64-rhel-9.4",
                      "params": {"bs": "4k", "runtime": "300s"},
                      "build": {"command": "make"}, "run": {"command": "run"}});
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO job_specs (hash, spec, yaml, testcase, tbox_group) VALUES ($1, $2, '', $3, 'lkp')
         ON CONFLICT (hash) DO UPDATE SET hash = EXCLUDED.hash RETURNING id",
    )
    .bind(testcase)
    .bind(&spec)
    .bind(testcase)
    .fetch_one(db)
    .await
    .unwrap();
    let assessments = json!([
        {"sha": null, "verdict": "good", "p": null},
        {"sha": C0, "verdict": "good", "p": 0.0},
        {"sha": C1, "verdict": "bad", "p": 0.6},
        {"sha": C2, "verdict": "bad", "p": 0.3},
    ]);
    let found = status == "found";
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO bisects (repository_id, job_spec_id, good_rev, bad_rev, good_sha, bad_sha, metric, confidence,
                              max_runs, notify, status, status_reason, culprit_sha, culprit_confidence, assessments)
         VALUES ($1, $2, 'v6.1', 'master', $3, $4, $5, 0.99, 400, $6, $7, 'the reason', $8, $9, $10) RETURNING id",
    )
    .bind(f.repo)
    .bind(job)
    .bind(G)
    .bind(C2)
    .bind(metric)
    .bind(json!(["dev@example.org"]))
    .bind(status)
    .bind(found.then_some(C1))
    .bind(found.then_some(0.995))
    .bind(assessments)
    .fetch_one(db)
    .await
    .unwrap();
    common::store_line_graph(db, id, G, &[C0, C1, C2]).await;
    for (idx, sha, subject) in [
        (-1, G, "base"),
        (
            0,
            C0,
            "ext4: allow ext4_map_blocks() to start its own transaction handle",
        ),
        (
            1,
            C1,
            "ext4: avoid unnecessary transaction in ext4_map_blocks() for unwritten extents",
        ),
        (2, C2, "fs: later"),
    ] {
        sqlx::query(
            "INSERT INTO bisect_commit_details (bisect_id, idx, sha, subject, author)
             VALUES ($1, $2, $3, $4, 'Jan Kara <jack@suse.cz>')",
        )
        .bind(id)
        .bind(idx)
        .bind(sha)
        .bind(subject)
        .execute(db)
        .await
        .unwrap();
    }
    let other = format!("{metric}.other");
    let run = |v: f64| json!({ metric: v, other.as_str(): 1.0 });
    let task = |sha: &str, pair: Option<&str>| {
        let (sha, pair) = (sha.to_string(), pair.map(str::to_string));
        async move {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO tasks (bisect_id, sha, pair_sha, job_spec_id, host_group, runs, phase, state)
                 VALUES ($1, $2, $3, $4, 'lkp', 3, 'verifying', 'done') RETURNING id",
            )
            .bind(id)
            .bind(sha)
            .bind(pair)
            .bind(job)
            .fetch_one(db)
            .await
            .unwrap()
        }
    };
    let mut uploads: Vec<(i64, &str, bool, Value)> = Vec::new();
    let t_good = task(G, None).await;
    for v in parent {
        uploads.push((t_good, G, true, run(*v)));
    }
    let t_bad = task(C2, None).await;
    for v in culprit {
        uploads.push((t_bad, C2, true, run(*v)));
    }
    // An unpaired run of the parent: the report must not use it when paired runs exist.
    let t_c0 = task(C0, None).await;
    uploads.push((t_c0, C0, true, run(parent[0] * 10.0)));
    let t_pair = task(C1, Some(C0)).await;
    for (p, c) in parent.iter().zip(culprit) {
        uploads.push((t_pair, C1, true, run(*c)));
        uploads.push((t_pair, C0, true, run(*p)));
    }
    uploads.push((t_pair, C1, false, json!({})));
    for (i, (task, sha, completed, metrics)) in uploads.into_iter().enumerate() {
        sqlx::query(
            "INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed, metrics, started_at, finished_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now())",
        )
        .bind(task)
        .bind(id)
        .bind(sha)
        .bind(f.host)
        .bind(i as i32)
        .bind(completed)
        .bind(metrics)
        .execute(db)
        .await
        .unwrap();
    }
    id
}

const FIO_BASE: [f64; 3] = [1218093.0, 1218093.0, 1218093.0];
const FIO_NEW: [f64; 3] = [1885792.0, 1885792.0, 1885792.0];

fn ctx() -> ReportContext {
    ReportContext {
        robot: perfbisect_report::Robot::default(),
        public_url: "http://perfbisect.test".into(),
    }
}

async fn load(f: &Fixture, id: i64) -> Result<report_input::Loaded, ReportInputError> {
    let mut conn = f.state.db.acquire().await.unwrap();
    report_input::load(&mut conn, id, &ctx()).await
}

#[tokio::test]
async fn the_test_machine_is_the_one_that_ran_the_benchmark() {
    // The worker registered from its own machine (64 threads); its runs happened in a VM
    // that reported itself from inside: the report's test machine is the VM.
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "found",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    sqlx::query("UPDATE runs SET environment = $2 WHERE bisect_id = $1")
        .bind(id)
        .bind(
            json!({"host": "worker1-vm", "machine": {"cpu_model": "QEMU Virtual CPU version 2.5+",
                     "threads": 2, "sockets": 1, "memory_bytes": 251u64 << 20}}),
        )
        .execute(&f.state.db)
        .await
        .unwrap();
    let loaded = load(&f, id).await.unwrap();
    assert_eq!(
        loaded.input.machine.describe(),
        "2 threads 1 socket QEMU Virtual CPU version 2.5+ with 251M memory"
    );
}

#[tokio::test]
async fn found_report_uses_the_paired_verification_runs_and_reproduces_the_seed_row() {
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "found",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let loaded = load(&f, id).await.unwrap();
    let Outcome::Found {
        parent, runs, also, ..
    } = &loaded.input.outcome
    else {
        panic!("{:?}", loaded.input.outcome)
    };
    assert_eq!(parent.sha, C0);
    assert_eq!(runs.parent.len(), 3, "the unpaired outlier is left out");
    assert_eq!(runs.culprit.len(), 4);
    assert!(also.is_empty());
    assert_eq!(
        loaded.input.machine.describe(),
        "64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz with 256G memory"
    );
    let judged: Vec<(&str, Judgement)> = loaded
        .input
        .samples
        .iter()
        .map(|s| (s.sha.as_str(), s.judged))
        .collect();
    assert_eq!(
        judged,
        [
            (G, Judgement::Good),
            (C0, Judgement::Good),
            (C1, Judgement::Bad),
            (C2, Judgement::Bad)
        ]
    );
    let report = render(&loaded.input, &ReportConfig::default()).unwrap();
    assert_eq!(
        report.subject,
        "[linux:master] [ext4]  3333333333:  fio.write_iops 54.8% improvement"
    );
    let text = &report.text;
    assert!(
        text.lines()
            .any(|l| l == "   1218093           +54.8%    1885792        fio.write_iops"),
        "{text}"
    );
    assert!(text.contains("\tbs: 4k\n\truntime: 300s\n"), "{text}");
    assert!(text.contains("config: x86_64-rhel-9.4\ncompiler: gcc-14\n"));
    // The incomplete culprit run is counted in the failure block, not in the stats.
    assert!(text.contains("last_state.is_incomplete_run"), "{text}");
}

#[tokio::test]
async fn another_testcase_blamed_on_the_same_commit_is_reported_in_addition() {
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "found",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    bisect(
        &f,
        "aim7",
        "aim7.jobs-per-min",
        "found",
        &[100.0, 101.0, 99.0],
        &[117.0, 118.0, 116.0],
    )
    .await;
    // The same testcase again, and an unfinished one: neither is an addition.
    bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "found",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    bisect(
        &f,
        "hackbench",
        "hackbench.throughput",
        "searching",
        &[1.0; 3],
        &[2.0; 3],
    )
    .await;
    let loaded = load(&f, id).await.unwrap();
    let Outcome::Found { also, .. } = &loaded.input.outcome else {
        panic!()
    };
    let tests: Vec<&str> = also.iter().map(|a| a.job.testcase.as_str()).collect();
    assert_eq!(tests, ["aim7"]);
    let text = render(&loaded.input, &ReportConfig::default())
        .unwrap()
        .text;
    assert!(text.contains("In addition to that"), "{text}");
    assert!(
        text.contains("| aim7: aim7.jobs-per-min 17.0% improvement"),
        "{text}"
    );
}

#[tokio::test]
async fn other_outcomes_get_their_own_reports_and_running_bisects_none() {
    let f = fixture().await;
    let nr = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "not_reproduced",
        &FIO_BASE,
        &FIO_BASE,
    )
    .await;
    let Outcome::NotReproduced {
        good_runs,
        bad_runs,
    } = load(&f, nr).await.unwrap().input.outcome
    else {
        panic!()
    };
    assert_eq!((good_runs.len(), bad_runs.len()), (3, 3));

    let inc = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "inconclusive",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let Outcome::Inconclusive { candidates, target } = load(&f, inc).await.unwrap().input.outcome
    else {
        panic!()
    };
    let listed: Vec<(&str, f64)> = candidates
        .iter()
        .map(|c| (c.commit.sha.as_str(), c.probability))
        .collect();
    assert_eq!((listed, target), (vec![(C1, 0.6), (C2, 0.3)], 0.99));

    let failed = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "failed",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let input = load(&f, failed).await.unwrap().input;
    assert_eq!(
        input.outcome,
        Outcome::Failed {
            reason: "the reason".into()
        }
    );

    let running = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "searching",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    assert!(matches!(
        load(&f, running).await,
        Err(ReportInputError::NotFinished { .. })
    ));
    assert!(matches!(
        load(&f, 999).await,
        Err(ReportInputError::NotFound(999))
    ));
}

async fn call(
    f: &Fixture,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, String) {
    common::request(&f.state, method, path, token, body).await
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or(Value::Null)
}

#[tokio::test]
async fn report_endpoints_serve_text_json_and_eml() {
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "found",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let (s, text) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        text.starts_with("Hello,\n\nperfbisect noticed a 54.8% improvement"),
        "{text}"
    );
    let (s, body) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report?format=json"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let j = json_of(&body);
    assert_eq!(j["kind"], "found");
    assert_eq!(j["text"], text);
    assert!(j["svg_plot"].as_str().unwrap().starts_with("<svg"));
    let (s, _) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report?format=pdf"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report.eml"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, eml) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report.eml"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        eml.contains(&format!(
            "Message-ID: <perfbisect.{id}.preview@perfbisect.example>"
        )),
        "{eml}"
    );
    assert!(eml.contains("To: dev@example.org\r\n"));
    assert!(eml.contains("X-Patchwork-Hint: ignore\r\n"));
    // The preview is the mail as lists get it: text, the job spec attached, no HTML.
    assert!(eml.contains("Content-Type: multipart/mixed"), "{eml}");
    assert!(!eml.contains("text/html") && !eml.contains("quoted-printable"));

    let running = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "verifying",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let (s, _) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{running}/report"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = call(&f, "GET", "/api/v1/bisects/999/report", None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let doc = serde_json::to_value(api::openapi()).unwrap();
    for path in [
        "/api/v1/bisects/{id}/report",
        "/api/v1/bisects/{id}/report.eml",
        "/api/v1/bisects/{id}/mail",
        "/api/v1/outbox",
        "/api/v1/outbox/{id}/retry",
        "/api/v1/subscriptions",
        "/api/v1/subscriptions/{id}",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} missing from OpenAPI"
        );
    }
}

#[tokio::test]
async fn the_final_status_and_its_mail_commit_or_roll_back_together() {
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "verifying",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let rows = || async {
        sqlx::query_as::<_, (String, String, String)>(
            "SELECT event, state, message_key FROM outbox WHERE bisect_id = $1",
        )
        .bind(id)
        .fetch_all(&f.state.db)
        .await
        .unwrap()
    };
    let mut tx = f.state.db.begin().await.unwrap();
    scheduler::finish(
        &mut tx,
        id,
        perfbisect_wire::states::BisectStatus::Found,
        "culprit",
        Some((C1, 0.995)),
    )
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    assert!(rows().await.is_empty());
    let mut tx = f.state.db.begin().await.unwrap();
    scheduler::finish(
        &mut tx,
        id,
        perfbisect_wire::states::BisectStatus::Found,
        "culprit",
        Some((C1, 0.995)),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let got = rows().await;
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0.as_str(), got[0].1.as_str()), ("found", "pending"));
    assert!(got[0].2.starts_with(&format!("perfbisect.{id}.found.")));

    // A cancelled bisect is not mailed.
    let other = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "searching",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let mut tx = f.state.db.begin().await.unwrap();
    scheduler::finish(
        &mut tx,
        other,
        perfbisect_wire::states::BisectStatus::Cancelled,
        "by the user",
        None,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (s, body) = call(&f, "GET", "/api/v1/outbox", Some(TOKEN), None).await;
    assert_eq!(s, StatusCode::OK);
    let list = json_of(&body);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list[0]["bisect_id"], id);
    let (s, _) = call(&f, "GET", "/api/v1/outbox", None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = call(&f, "GET", "/api/v1/outbox?state=lost", Some(TOKEN), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

/// (envelope from, envelope to, message bytes)
type Sent = (String, Vec<String>, Vec<u8>);

/// Records what it was asked to send; fails while `fail` holds errors.
#[derive(Default)]
struct FakeTransport {
    sent: Mutex<Vec<Sent>>,
    fail: Mutex<Vec<SendError>>,
}

impl Transport for FakeTransport {
    async fn send(&self, from: &str, to: &[String], raw: &[u8]) -> Result<(), SendError> {
        if let Some(e) = self.fail.lock().unwrap().pop() {
            return Err(e);
        }
        self.sent
            .lock()
            .unwrap()
            .push((from.into(), to.to_vec(), raw.to_vec()));
        Ok(())
    }
}

async fn finished(f: &Fixture) -> i64 {
    let id = bisect(
        f,
        "fio-basic",
        "fio.write_iops",
        "verifying",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let mut tx = f.state.db.begin().await.unwrap();
    scheduler::finish(
        &mut tx,
        id,
        perfbisect_wire::states::BisectStatus::Found,
        "culprit",
        Some((C1, 0.995)),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    id
}

async fn claim(f: &Fixture) -> Option<Claimed> {
    outbox::claim(&f.state.db, f.state.mail.lease)
        .await
        .unwrap()
}

#[tokio::test]
async fn delivery_goes_to_submitter_and_subscribers_with_threading_headers() {
    let f = fixture().await;
    let (s, body) = call(
        &f,
        "POST",
        "/api/v1/subscriptions",
        Some(TOKEN),
        Some(json!({"email": "fs@example.org", "repository": "linux", "metric": "fio.*_iops"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    call(
        &f,
        "POST",
        "/api/v1/subscriptions",
        Some(TOKEN),
        Some(json!({"email": "other@example.org", "testcase": "aim7"})),
    )
    .await;
    let id = finished(&f).await;
    let (s, _) = call(
        &f,
        "PUT",
        &format!("/api/v1/bisects/{id}/mail"),
        Some(TOKEN),
        Some(json!({"in_reply_to": "<patch.1@example.org>", "headers": [["X-Test", "yes"]]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);

    let fake = FakeTransport::default();
    let c = claim(&f).await.unwrap();
    assert_eq!(
        sender::deliver(&f.state, &f.state.mail, &fake, &c)
            .await
            .unwrap(),
        Delivery::Sent
    );
    let sent = fake.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let (from, to, raw) = &sent[0];
    assert_eq!(from, "robot@perfbisect.example");
    assert_eq!(to, &["dev@example.org", "fs@example.org"]);
    let raw = String::from_utf8_lossy(raw);
    assert!(raw.contains("To: dev@example.org\r\n"), "{raw}");
    assert!(
        !raw.contains("fs@example.org"),
        "a subscriber is Bcc: envelope only"
    );
    assert!(raw.contains("In-Reply-To: <patch.1@example.org>\r\n"));
    assert!(raw.contains("References: <patch.1@example.org>\r\n"));
    assert!(raw.contains("X-Test: yes\r\n") && raw.contains("X-Patchwork-Hint: ignore\r\n"));
    let (_, eml) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report.eml"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(
        eml.as_bytes(),
        sent[0].2.as_slice(),
        "the .eml is the frozen message"
    );
    // The options are part of the frozen message: changing them now would be a lie.
    let (s, _) = call(
        &f,
        "PUT",
        &format!("/api/v1/bisects/{id}/mail"),
        Some(TOKEN),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(
        claim(&f).await.is_none(),
        "sent mails are not claimed again"
    );
}

#[tokio::test]
async fn failed_attempts_back_off_then_give_up_and_stay_visible() {
    let f = fixture().await; // three attempts
    let id = finished(&f).await;
    let fake = FakeTransport::default();
    let temporary = |m: &str| SendError {
        permanent: false,
        message: m.into(),
    };
    *fake.fail.lock().unwrap() = vec![temporary("third"), temporary("second"), temporary("first")];
    let c = claim(&f).await.unwrap();
    assert_eq!(
        sender::deliver(&f.state, &f.state.mail, &fake, &c)
            .await
            .unwrap(),
        Delivery::Retrying
    );
    // Backed off: not due now.
    assert!(claim(&f).await.is_none());
    let (wait,): (f64,) = sqlx::query_as(
        "SELECT extract(epoch FROM next_attempt_at - now())::float8 FROM outbox WHERE bisect_id = $1",
    )
    .bind(id)
    .fetch_one(&f.state.db)
    .await
    .unwrap();
    assert!(
        (50.0..=60.0).contains(&wait),
        "first retry after the base delay: {wait}"
    );
    for expected in [Delivery::Retrying, Delivery::Failed] {
        sqlx::query("UPDATE outbox SET next_attempt_at = now() WHERE bisect_id = $1")
            .bind(id)
            .execute(&f.state.db)
            .await
            .unwrap();
        let c = claim(&f).await.unwrap();
        assert_eq!(
            sender::deliver(&f.state, &f.state.mail, &fake, &c)
                .await
                .unwrap(),
            expected
        );
    }
    let (_, body) = call(
        &f,
        "GET",
        &format!("/api/v1/outbox?bisect={id}"),
        Some(TOKEN),
        None,
    )
    .await;
    let row = &json_of(&body)[0];
    assert_eq!(
        (row["state"].as_str(), row["attempts"].as_i64()),
        (Some("failed"), Some(3))
    );
    assert_eq!(row["last_error"], "third");
    assert!(fake.sent.lock().unwrap().is_empty());
    // Retrying by hand sends the same frozen message.
    let mail = row["id"].as_i64().unwrap();
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/outbox/{mail}/retry"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let c = claim(&f).await.unwrap();
    assert_eq!(c.message_id.as_deref(), row["message_id"].as_str());
    assert_eq!(
        sender::deliver(&f.state, &f.state.mail, &fake, &c)
            .await
            .unwrap(),
        Delivery::Sent
    );
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/outbox/{mail}/retry"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
}

/// Takes the message and never answers: a sender that dies mid-send.
struct Hanging(Arc<tokio::sync::Notify>);

impl Transport for Hanging {
    async fn send(&self, _: &str, _: &[String], _: &[u8]) -> Result<(), SendError> {
        self.0.notify_one();
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_claim_held_by_a_dead_sender_is_taken_over_with_the_same_message() {
    let f = fixture().await;
    let id = finished(&f).await;
    let first = claim(&f).await.unwrap();
    let entered = Arc::new(tokio::sync::Notify::new());
    let dying = {
        let (state, first, entered) = (f.state.clone(), first.clone(), entered.clone());
        tokio::spawn(async move {
            let settings = state.mail.clone();
            sender::deliver(&state, &settings, &Hanging(entered), &first).await
        })
    };
    entered.notified().await;
    dying.abort(); // the crash: the message was handed over, nothing was recorded
    let frozen: (String, Vec<u8>, String) =
        sqlx::query_as("SELECT message_id, raw, state FROM outbox WHERE bisect_id = $1")
            .bind(id)
            .fetch_one(&f.state.db)
            .await
            .unwrap();
    assert_eq!(frozen.2, "sending");
    assert!(
        claim(&f).await.is_none(),
        "nobody takes a row whose lease runs"
    );
    // Time passes: the lease runs out.
    sqlx::query(
        "UPDATE outbox SET lease_expires_at = now() - interval '1 second' WHERE bisect_id = $1",
    )
    .bind(id)
    .execute(&f.state.db)
    .await
    .unwrap();
    let second = claim(&f).await.unwrap();
    assert_eq!(second.attempts, 2);
    assert_eq!(second.message_id.as_deref(), Some(frozen.0.as_str()));
    let fake = FakeTransport::default();
    assert_eq!(
        sender::deliver(&f.state, &f.state.mail, &fake, &second)
            .await
            .unwrap(),
        Delivery::Sent
    );
    assert_eq!(
        fake.sent.lock().unwrap()[0].2,
        frozen.1,
        "same bytes, same Message-ID"
    );
    // The first sender's late result is fenced off by the attempt number.
    assert!(!outbox::mark_sent(&f.state.db, &first).await.unwrap());
}

#[tokio::test]
async fn a_locked_row_is_skipped_by_other_senders() {
    let f = fixture().await;
    let a = finished(&f).await;
    let b = finished(&f).await;
    let mut tx = f.state.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM outbox WHERE bisect_id = $1 FOR UPDATE")
        .bind(a)
        .execute(&mut *tx)
        .await
        .unwrap();
    let c = claim(&f).await.unwrap();
    assert_eq!(
        c.bisect_id, b,
        "the row another replica holds is skipped, not waited for"
    );
    assert!(claim(&f).await.is_none());
    tx.rollback().await.unwrap();
    assert_eq!(claim(&f).await.unwrap().bisect_id, a);
}

#[tokio::test]
async fn subscriptions_are_validated_listed_and_deleted() {
    let f = fixture().await;
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/subscriptions",
        None,
        Some(json!({"email": "a@example.org"})),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, body) = call(
        &f,
        "POST",
        "/api/v1/subscriptions",
        Some(TOKEN),
        Some(json!({"email": "nope"})),
    )
    .await;
    assert_eq!(
        (s, json_of(&body)["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("email"))
    );
    let (s, body) = call(
        &f,
        "POST",
        "/api/v1/subscriptions",
        Some(TOKEN),
        Some(json!({"email": "a@example.org", "events": ["found", "exploded"]})),
    )
    .await;
    assert_eq!(
        (s, json_of(&body)["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("events[1]"))
    );
    let (s, body) = call(
        &f,
        "POST",
        "/api/v1/subscriptions",
        Some(TOKEN),
        Some(json!({"email": "a@example.org", "testcase": "fio-basic", "events": ["started"]})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let sub = json_of(&body);
    assert_eq!(sub["events"], json!(["started"]));
    let (_, list) = call(&f, "GET", "/api/v1/subscriptions", Some(TOKEN), None).await;
    assert_eq!(json_of(&list).as_array().unwrap().len(), 1);
    let path = format!("/api/v1/subscriptions/{}", sub["id"]);
    assert_eq!(
        call(&f, "DELETE", &path, Some(TOKEN), None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(&f, "DELETE", &path, Some(TOKEN), None).await.0,
        StatusCode::NOT_FOUND
    );
    let (s, body) = call(
        &f,
        "PUT",
        "/api/v1/bisects/1/mail",
        Some(TOKEN),
        Some(json!({"in_reply_to": "not an id"})),
    )
    .await;
    assert_eq!(
        (s, json_of(&body)["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("in_reply_to"))
    );
    let (s, _) = call(
        &f,
        "PUT",
        "/api/v1/bisects/999/mail",
        Some(TOKEN),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn started_is_opt_in_and_announced_once() {
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "searching",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    assert_eq!(outbox::enqueue_started(&f.state.db).await.unwrap(), 1);
    assert_eq!(
        outbox::enqueue_started(&f.state.db).await.unwrap(),
        0,
        "once per bisect"
    );
    let fake = FakeTransport::default();
    // Not in the configured events: kept as skipped, with why.
    let c = claim(&f).await.unwrap();
    assert_eq!(c.event, "started");
    assert_eq!(
        sender::deliver(&f.state, &f.state.mail, &fake, &c)
            .await
            .unwrap(),
        Delivery::Skipped
    );
    let (_, body) = call(
        &f,
        "GET",
        &format!("/api/v1/outbox?bisect={id}"),
        Some(TOKEN),
        None,
    )
    .await;
    let row = &json_of(&body)[0];
    assert_eq!(row["state"], "skipped");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("PERFBISECT_MAIL_EVENTS")
    );
    // Opted in: the retried row is sent as a short announcement.
    let mut opted = settings(3);
    opted.events.push(perfbisect_server::notify::Event::Started);
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/outbox/{}/retry", row["id"]),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let c = claim(&f).await.unwrap();
    assert_eq!(
        sender::deliver(&f.state, &opted, &fake, &c).await.unwrap(),
        Delivery::Sent
    );
    let raw = String::from_utf8(fake.sent.lock().unwrap()[0].2.clone()).unwrap();
    assert!(
        raw.contains("Subject: [linux] fio.write_iops: bisecting 1111111111..4444444444\r\n"),
        "{raw}"
    );
    assert!(raw.contains("X-Perfbisect-Event: started\r\n"));
}

/// The raw message's leaf parts, as (headers, body); enough MIME for these assertions.
fn leaf_parts(raw: &str) -> Vec<(String, String)> {
    let boundary = raw
        .split("boundary=\"")
        .nth(1)
        .and_then(|b| b.split('"').next())
        .expect("a multipart message");
    raw.split(&format!("--{boundary}"))
        .skip(1)
        .filter(|p| !p.starts_with("--"))
        .map(|p| {
            let (head, body) = p.trim_start_matches("\r\n").split_once("\r\n\r\n").unwrap();
            (head.to_string(), body.to_string())
        })
        .collect()
}

#[tokio::test]
async fn one_bisect_mails_one_plain_text_thread_with_its_job_and_config_attached() {
    let f = fixture().await;
    let id = bisect(
        &f,
        "fio-basic",
        "fio.write_iops",
        "searching",
        &FIO_BASE,
        &FIO_NEW,
    )
    .await;
    let yaml = "testcase: fio-basic\ntbox_group: lkp\nkconfig: x86_64-rhel-9.4\n";
    sqlx::query("UPDATE job_specs SET yaml = $1 WHERE hash = 'fio-basic'")
        .bind(yaml)
        .execute(&f.state.db)
        .await
        .unwrap();
    sqlx::query("UPDATE repositories SET web_url = 'https://git.example.org/cgit/linux.git/commit/?id={sha}'")
        .execute(&f.state.db)
        .await
        .unwrap();
    let kconfig = "CONFIG_64BIT=y\n# CONFIG_KASAN is not set\n";
    sqlx::query("INSERT INTO kconfigs (name, content, sha256) VALUES ('x86_64-rhel-9.4', $1, 'x')")
        .bind(kconfig)
        .execute(&f.state.db)
        .await
        .unwrap();
    let (s, _) = call(
        &f,
        "PUT",
        &format!("/api/v1/bisects/{id}/mail"),
        Some(TOKEN),
        Some(json!({"in_reply_to": "<patch.1@example.org>"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let mut settings = settings(3);
    settings.events.extend([
        perfbisect_server::notify::Event::Started,
        perfbisect_server::notify::Event::Reproduced,
    ]);
    let fake = FakeTransport::default();

    // The announcement answers the submitter's thread.
    assert_eq!(outbox::enqueue_started(&f.state.db).await.unwrap(), 1);
    let c = claim(&f).await.unwrap();
    assert_eq!(
        sender::deliver(&f.state, &settings, &fake, &c)
            .await
            .unwrap(),
        Delivery::Sent
    );
    // The endpoints reproduced the change: a progress mail in the same thread, with the
    // change the engine measured and what finishing is predicted to cost.
    sqlx::query(
        r#"UPDATE bisects SET findings = '{"change": 0.548, "verification_alpha": 0.1,
             "prediction": {"runs": 40, "builds": 6, "machine_secs": 1290}}' WHERE id = $1"#,
    )
    .bind(id)
    .execute(&f.state.db)
    .await
    .unwrap();
    assert_eq!(outbox::enqueue_reproduced(&f.state.db).await.unwrap(), 1);
    assert_eq!(
        outbox::enqueue_reproduced(&f.state.db).await.unwrap(),
        0,
        "announced twice"
    );
    let c = claim(&f).await.unwrap();
    assert_eq!(c.event, "reproduced");
    assert_eq!(
        sender::deliver(&f.state, &settings, &fake, &c)
            .await
            .unwrap(),
        Delivery::Sent
    );
    // The final report answers the announcement.
    sqlx::query("UPDATE bisects SET status = 'found', culprit_sha = $2, culprit_confidence = 0.995 WHERE id = $1")
        .bind(id)
        .bind(C1)
        .execute(&f.state.db)
        .await
        .unwrap();
    let mut tx = f.state.db.begin().await.unwrap();
    outbox::enqueue(&mut tx, id, "found").await.unwrap();
    tx.commit().await.unwrap();
    let c = claim(&f).await.unwrap();
    assert_eq!(c.event, "found");
    assert_eq!(
        sender::deliver(&f.state, &settings, &fake, &c)
            .await
            .unwrap(),
        Delivery::Sent
    );

    let sent = fake.sent.lock().unwrap().clone();
    let raws: Vec<String> = sent
        .iter()
        .map(|m| String::from_utf8(m.2.clone()).unwrap())
        .collect();
    // Header values as a reader sees them: folded lines joined.
    let header = |raw: &str, name: &str| -> Option<String> {
        let head = raw.split("\r\n\r\n").next().unwrap().replace("\r\n ", " ");
        head.split("\r\n")
            .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
    };
    let started_id = header(&raws[0], "Message-ID").unwrap();
    assert_eq!(
        header(&raws[0], "In-Reply-To").as_deref(),
        Some("<patch.1@example.org>")
    );
    assert_eq!(
        header(&raws[0], "References").as_deref(),
        Some("<patch.1@example.org>")
    );
    // The progress mail and the final report both answer the announcement.
    assert_eq!(raws.len(), 3);
    for raw in &raws[1..] {
        assert_eq!(header(raw, "In-Reply-To"), Some(started_id.clone()));
        assert_eq!(
            header(raw, "References"),
            Some(format!("<patch.1@example.org> {started_id}"))
        );
    }
    let progress = leaf_parts(&raws[1])[0].1.replace("\r\n", "\n");
    assert_eq!(
        header(&raws[1], "Subject"),
        header(&raws[0], "Subject").map(|s| format!("Re: {s}"))
    );
    assert!(
        progress.contains("reproduced a +54.8% change of fio.write_iops between")
            && progress.contains("about 40 more runs, 6 builds and 21 min 30 s of machine time"),
        "{progress}"
    );
    for raw in &raws {
        assert!(raw.contains("Content-Type: multipart/mixed"), "{raw}");
        assert!(
            !raw.contains("quoted-printable") && !raw.contains("text/html"),
            "{raw}"
        );
        let parts = leaf_parts(raw);
        assert_eq!(parts.len(), 3, "{raw}");
        for (head, _) in &parts {
            assert!(head.contains("Content-Type: text/plain"), "{head}");
            assert!(head.contains("Content-Transfer-Encoding: 7bit"), "{head}");
        }
        assert!(!parts[0].0.contains("Content-Disposition"));
        assert!(
            parts[1]
                .0
                .contains("Content-Disposition: attachment; filename=\"job.yaml\"")
        );
        assert_eq!(parts[1].1.trim_end().replace("\r\n", "\n"), yaml.trim_end());
        assert!(
            parts[2]
                .0
                .contains("Content-Disposition: attachment; filename=\"config-x86_64-rhel-9.4\"")
        );
        assert_eq!(
            parts[2].1.trim_end().replace("\r\n", "\n"),
            kconfig.trim_end()
        );
    }
    // The report's table keeps its width: no line is folded or escaped.
    let report = &leaf_parts(&raws[2])[0].1;
    // Materials to reproduce: the job spec and config links, the submit line, commit links
    // through the repository's web view.
    let unix = report.replace("\r\n", "\n");
    assert!(
        unix.contains(&format!(
            "The job spec and kernel config to reproduce are available at:\n\
             http://perfbisect.test/api/v1/bisects/{id}/job.yaml\n\
             http://perfbisect.test/api/v1/kconfigs/x86_64-rhel-9.4\n"
        )),
        "{unix}"
    );
    assert!(
        unix.contains(&format!(
            "        perfbisect submit --server http://perfbisect.test --repo linux --good {G} --bad {C2} \
             --job job.yaml --metric fio.write_iops    # job file is attached in this email\n"
        )),
        "{unix}"
    );
    assert!(
        unix.contains(&format!(
            "culprit:  https://git.example.org/cgit/linux.git/commit/?id={C1}\n"
        )),
        "{unix}"
    );
    let (s, body) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/job.yaml"),
        None,
        None,
    )
    .await;
    assert_eq!((s, body.as_str()), (StatusCode::OK, yaml));
    let (s, text) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{id}/report"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        text.trim_end(),
        unix.trim_end(),
        "the API's report is the mail's"
    );
    // The dashboard links the same materials and commits.
    let (s, page) = call(&f, "GET", &format!("/bisects/{id}"), None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        page.contains(&format!("href=\"/api/v1/bisects/{id}/job.yaml\"")),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "https://git.example.org/cgit/linux.git/commit/?id={C1}"
        )),
        "{page}"
    );
    let wide = report.split("\r\n").filter(|l| l.len() > 76).count();
    assert!(wide > 0, "{report}");
    assert!(report.contains("fio.write_iops\r\n"), "{report}");

    // With the operator's opt-in, an HTML alternative rides beside the text.
    let mut html = settings.clone();
    html.html = true;
    let loaded = load(&f, id).await.unwrap();
    let content = perfbisect_server::notify::compose::content(
        &loaded,
        perfbisect_server::notify::Event::Found,
        &html,
    )
    .unwrap();
    let rcpt =
        perfbisect_server::notify::recipients::Recipients::assemble(["dev@example.org"], [], []);
    let composed = perfbisect_server::notify::compose::compose_now(
        &content,
        id,
        perfbisect_server::notify::Event::Found,
        &rcpt,
        &html,
        &Default::default(),
        &Default::default(),
        "<x@perfbisect.example>",
        std::time::SystemTime::now(),
    )
    .unwrap();
    let raw = String::from_utf8(composed.raw).unwrap();
    assert!(raw.contains("Content-Type: multipart/alternative"), "{raw}");
    assert!(raw.contains("Content-Type: text/html"), "{raw}");
    assert!(!raw.contains("quoted-printable"), "{raw}");
}

#[tokio::test]
async fn a_repository_carries_its_web_view_for_commit_links() {
    let f = common::fixture().await;
    let url = f.repo.display().to_string();
    let (s, v) = common::call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": "r", "url": url, "web_url": "https://github.com/o/r/commit/"})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["field"], "web_url", "{v}");
    let (_, v) = common::call(&f, "GET", "/api/v1/repositories", Some(TOKEN), None).await;
    assert_eq!(v, json!([]), "a refused registration stores nothing");
    let (s, v) = common::call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": "r", "url": url, "web_url": "https://github.com/o/r/commit/{sha}"})),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["web_url"], "https://github.com/o/r/commit/{sha}");
}
