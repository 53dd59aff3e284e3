//! Mail end to end: real `perfbisect server` and worker processes, a real SMTP server
//! process (`support/smtp_sink.py`), and assertions on the messages it received. Also the
//! outbox's faults: a server killed between the SMTP server's acceptance and the `sent`
//! mark, temporary and permanent SMTP failures, and a server without SMTP.

mod common;
#[path = "support/mail.rs"]
mod mail;

use common::{Lab, assert_found};
use mail::{Sink, get, outbox, server_with_mail, until_mail_state};
use perfbisect_cli::demo::watch;
use perfbisect_cli::example::{self, ExampleRepo};
use perfbisect_report::format::{format_avg, format_change, format_std};
use perfbisect_server::notify::MailConfig;
use perfbisect_server::notify::sender::{SendError, Smtp, Transport};
use perfbisect_wire::api::{Bisect, SubmitBisect};
use std::time::Duration;

const DEV: &str = "dev@example.invalid";
/// Copied by the planted commit's `Cc:` trailer (`example::PLANTED_TRAILERS`).
const MAINTAINER: &str = "maintainer@example.invalid";

async fn submit(lab: &Lab, ex: &ExampleRepo, job: &str) -> Bisect {
    lab.api
        .add_repository("example", &ex.path.display().to_string())
        .await
        .unwrap();
    lab.api
        .submit(&SubmitBisect {
            repository: "example".into(),
            good: "good".into(),
            bad: "bad".into(),
            job: job.into(),
            metric: example::METRIC.into(),
            direction: None,
            magnitude_pct: None,
            confidence: None,
            max_runs: None,
            notify: vec![DEV.into()],
            use_merge_base: false,
            first_parent: false,
        })
        .await
        .unwrap()
}

/// A job whose build fails at every commit: the bisect ends `failed` within seconds.
fn broken_job() -> String {
    let job = example::JOB_YAML.replace(
        "command: cc -O2 -o bench bench.c -lm",
        "command: echo no compiler today; exit 3",
    );
    assert_ne!(job, example::JOB_YAML);
    job
}

async fn db(lab: &Lab) -> sqlx::PgPool {
    sqlx::PgPool::connect(&lab.db_url).await.unwrap()
}

/// The service's one definition (README, "Statistics"): (mean, %stddev of the sample
/// standard deviation, divided by n − 1).
fn mean_pct_stddev(v: &[f64]) -> (f64, Option<f64>) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (mean, (v.len() > 1).then(|| 100.0 * sd / mean))
}

#[tokio::test]
async fn a_found_bisect_mails_its_report_to_a_real_smtp_server() {
    let lab = Lab::new().await;
    let sink = Sink::start(&lab, "smtp", &[]);
    // Copy the culprit's trailers, as a reply to the patch would.
    let _server = server_with_mail(
        &lab,
        30,
        &[
            ("PERFBISECT_SMTP_URL", sink.url()),
            ("PERFBISECT_MAIL_TRAILERS", "true".into()),
        ],
    )
    .await;
    let ex = lab.example(31);
    let submitted = submit(&lab, &ex, example::JOB_YAML).await;
    let id = submitted.id;
    // The submitter answers an existing thread (a posted patch); workers start after this,
    // so the options are in place before the bisect can end.
    let put = reqwest::Client::new()
        .put(format!("{}/api/v1/bisects/{id}/mail", lab.api.base()))
        .bearer_auth(common::API_TOKEN)
        .json(&serde_json::json!({"in_reply_to": "<patch.7@lists.example.invalid>"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let done = watch(&lab.api, id, Duration::from_secs(600)).await.unwrap();
    assert_found(&done, &ex, &lab);
    let culprit = done.culprit.as_ref().unwrap().commit.clone();

    let row = until_mail_state(&lab, id, "sent", Duration::from_secs(120)).await;
    assert_eq!(row["attempts"], 1);
    // The submitter, then the culprit's trailers (its Signed-off-by is the submitter again).
    assert_eq!(row["recipients"], serde_json::json!([DEV, MAINTAINER]));
    let mails = sink.messages();
    assert_eq!(mails.len(), 1, "one bisect, one mail");
    let m = &mails[0];

    // The verification runs: the paired task interleaving the culprit with its parent.
    let pool = db(&lab).await;
    let runs: Vec<(String, String, f64)> = sqlx::query_as(
        "SELECT r.sha, t.pair_sha, (r.metrics ->> 'demo.score')::float8 FROM runs r
         JOIN tasks t ON t.id = r.task_id
         WHERE r.bisect_id = $1 AND r.completed AND t.sha = $2 AND t.pair_sha IS NOT NULL
         ORDER BY r.id",
    )
    .bind(id)
    .bind(&culprit.sha)
    .fetch_all(&pool)
    .await
    .unwrap();
    // A merge is verified against each of its parents; the report shows the first one.
    let first_parent = std::process::Command::new("git")
        .arg("-C")
        .arg(&ex.path)
        .args(["rev-parse", &format!("{}^1", culprit.sha)])
        .output()
        .unwrap();
    let first_parent = String::from_utf8(first_parent.stdout)
        .unwrap()
        .trim()
        .to_string();
    let parent = runs
        .iter()
        .find(|r| r.1 == first_parent)
        .map_or_else(|| runs[0].1.clone(), |r| r.1.clone());
    let side =
        |sha: &str| -> Vec<f64> { runs.iter().filter(|r| r.0 == sha).map(|r| r.2).collect() };
    let (base, new) = (side(&parent), side(&culprit.sha));
    assert!(base.len() >= 3 && new.len() >= 3, "{runs:?}");
    let (base_mean, base_sd) = mean_pct_stddev(&base);
    let (new_mean, new_sd) = mean_pct_stddev(&new);
    let change = 100.0 * (new_mean - base_mean) / base_mean;
    assert!(change > 0.0, "the planted change raises the score");

    // Headers.
    let prefix = culprit
        .subject
        .split_once(':')
        .map(|(p, _)| format!(" [{p}]"))
        .unwrap_or_default();
    let subject = format!(
        "[example:bad]{prefix}  {}:  demo.score {change:.1}% improvement",
        &culprit.sha[..10]
    );
    assert_eq!(m.header("Subject"), subject);
    assert_eq!(m.header("From"), mail::FROM);
    assert_eq!(m.header("To"), DEV);
    // To: the submitter; Cc: the addresses of the culprit's trailers not already in To.
    assert_eq!(m.rcpt_tos, [DEV, MAINTAINER]);
    assert_eq!(m.header("To"), DEV);
    assert_eq!(m.header("Cc"), format!("Example Maintainer <{MAINTAINER}>"));
    assert_eq!(m.mail_from, "robot@perfbisect.example");
    let message_id = m.header("Message-ID");
    assert_eq!(row["message_id"], message_id);
    let key = message_id
        .strip_prefix(&format!("<perfbisect.{id}.found."))
        .and_then(|k| k.strip_suffix("@perfbisect.example>"))
        .unwrap_or_else(|| panic!("Message-ID {message_id}"));
    assert!(key.len() == 32 && key.chars().all(|c| c.is_ascii_hexdigit()));
    // What mailing lists accept: one text/plain body in 7bit/8bit (never quoted-printable,
    // never HTML unless the operator asks), then the job spec as submitted, attached.
    assert_eq!(m.content_type, "multipart/mixed");
    assert!(
        !m.raw.to_ascii_lowercase().contains("quoted-printable"),
        "{}",
        m.raw
    );
    assert!(m.html.is_none(), "no HTML part by default");
    let kinds: Vec<(&str, Option<&str>)> = m
        .parts
        .iter()
        .map(|p| (p.content_type.as_str(), p.filename.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [("text/plain", None), ("text/plain", Some("job.yaml"))]
    );
    for p in &m.parts {
        assert!(
            ["7bit", "8bit"].contains(&p.transfer_encoding.as_str()),
            "{p:?}"
        );
    }
    assert_eq!(m.parts[1].content.trim_end(), example::JOB_YAML.trim_end());
    assert_eq!(m.header("Auto-Submitted"), "auto-generated");
    assert_eq!(m.header("In-Reply-To"), "<patch.7@lists.example.invalid>");
    assert_eq!(m.header("References"), "<patch.7@lists.example.invalid>");
    assert_eq!(m.header("X-Perfbisect-Bisect"), id.to_string());
    assert!(!m.header("Date").is_empty());

    // The text body: headline, commit, parameters, the table's row and the plot.
    let text = m.text.as_deref().expect("a text/plain part");
    let headline = format!("{change:.1}% improvement of demo.score on:");
    assert!(
        text.lines()
            .any(|l| l.starts_with("perfbisect noticed a") && l.ends_with(&headline)),
        "{text}"
    );
    assert!(text.contains(&format!(
        "commit: {} (\"{}\")\n",
        culprit.sha, culprit.subject
    )));
    assert!(text.contains("testcase: demo\n"));
    assert!(text.contains("parameters:\n\n\twork: 200000\n"), "{text}");
    let machine = text
        .lines()
        .find(|l| l.starts_with("test machine: "))
        .unwrap();
    assert!(
        machine.contains("thread") && machine.ends_with("memory"),
        "{machine}"
    );
    assert!(
        text.contains("tbox_group/testcase/work:\n  local/demo/200000\n"),
        "{text}"
    );
    // Scores have three decimals, so a mean can sit exactly on the table's rounding
    // boundary (993.165), where the order of summation decides the last digit: either
    // rounding of either mean is the same row.
    let nudged = |x: f64| [x, x * (1.0 + 1e-12), x * (1.0 - 1e-12)];
    let expected_rows: Vec<String> = nudged(base_mean)
        .into_iter()
        .flat_map(|b| nudged(new_mean).map(move |n| (b, n)))
        .map(|(b, n)| {
            format!(
                "{}{}{}{}{}  demo.score",
                format_avg(b),
                format_std(base_sd),
                format_change(change, false),
                format_avg(n),
                format_std(new_sd)
            )
        })
        .collect();
    assert!(
        text.lines().any(|l| expected_rows.iter().any(|r| r == l)),
        "row {:?} not in\n{text}",
        expected_rows[0]
    );
    // The table compares against the parent the culprit was verified with.
    assert!(
        text.contains(&format!("\n  {} (\"", &parent[..10])),
        "{text}"
    );
    assert!(text.contains("[*] bisect-good sample"), "{text}");
    assert!(text.contains("[O] bisect-bad  sample"), "{text}");
    // Both kinds of marks are drawn inside the plot's frame.
    let plot: Vec<&str> = text.lines().filter(|l| l.contains('|')).collect();
    assert!(plot.iter().any(|l| l.contains('O')) && plot.iter().any(|l| l.contains('*')));

    // The table's rows arrive byte for byte in the raw message, unescaped.
    assert!(
        expected_rows
            .iter()
            .any(|r| m.raw.contains(&format!("{r}\r\n")))
    );

    // The report endpoints: the text is the mail's body; JSON and the .eml agree.
    let (status, body) = get(&lab, &format!("/api/v1/bisects/{id}/report")).await;
    assert_eq!((status, body.as_str()), (200, text));
    let (status, body) = get(&lab, &format!("/api/v1/bisects/{id}/report?format=json")).await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["kind"], "found");
    assert_eq!(json["subject"], subject);
    let (status, eml) = get(&lab, &format!("/api/v1/bisects/{id}/report.eml")).await;
    assert_eq!(status, 200);
    // SMTP's DATA ends the message with a line end of its own; the bytes are otherwise equal.
    let unix = |s: &str| s.replace("\r\n", "\n").trim_end().to_string();
    assert!(
        unix(&eml) == unix(&m.raw),
        "the .eml is not the mail as sent"
    );
    let anonymous = reqwest::get(format!("{}/api/v1/bisects/{id}/report.eml", lab.api.base()))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "the .eml carries addresses");
}

#[tokio::test]
async fn a_server_killed_after_the_smtp_server_accepted_resends_the_same_message() {
    let lab = Lab::new().await;
    // The sink writes the first message, then holds its "250" until released: the server
    // is killed while it waits, before it can mark the mail sent.
    let sink = Sink::start(&lab, "smtp", &["--hold"]);
    let env = [
        ("PERFBISECT_SMTP_URL", sink.url()),
        ("PERFBISECT_SMTP_TIMEOUT_SECS", "5".to_string()),
    ];
    let mut server = server_with_mail(&lab, 30, &env).await;
    let _w = lab.worker("w1");
    let ex = lab.example(32);
    let id = submit(&lab, &ex, &broken_job()).await.id;
    let first = sink.wait_for(1, Duration::from_secs(300)).await;
    server.kill_hard();

    let pool = db(&lab).await;
    let (state, attempts, sent_at): (String, i32, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT state, attempts, sent_at FROM outbox WHERE bisect_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (state.as_str(), attempts, sent_at),
        ("sending", 1, None),
        "the crash fell between acceptance and the sent mark"
    );

    sink.release();
    let _server = server_with_mail(&lab, 30, &env).await;
    let row = until_mail_state(&lab, id, "sent", Duration::from_secs(120)).await;
    assert_eq!(row["attempts"], 2);
    let all = sink.messages();
    assert_eq!(all.len(), 2, "one copy before the crash, one after");
    // At least once, with a stable identity: the copy is the same message, byte for byte,
    // so receivers drop it by its Message-ID.
    assert_eq!(all[0].raw, first[0].raw);
    assert_eq!(all[1].raw, all[0].raw);
    assert_eq!(row["message_id"], all[0].header("Message-ID"));
    assert_eq!(all[0].header("X-Perfbisect-Event"), "failed");
    let text = all[0].text.as_deref().unwrap();
    assert!(
        text.contains("could not finish bisecting demo.score"),
        "{text}"
    );
    assert!(text.contains("does not build"), "{text}");
}

#[tokio::test]
async fn temporary_smtp_failures_are_retried_with_backoff() {
    let lab = Lab::new().await;
    let sink = Sink::start(&lab, "smtp", &["--reject", "2"]);
    let env = [
        ("PERFBISECT_SMTP_URL", sink.url()),
        ("PERFBISECT_MAIL_RETRY_SECS", "1".to_string()),
    ];
    let mut server = server_with_mail(&lab, 30, &env).await;
    let mut worker = lab.worker("w1");
    let ex = lab.example(33);
    let id = submit(&lab, &ex, &broken_job()).await.id;
    let row = until_mail_state(&lab, id, "sent", Duration::from_secs(300)).await;
    assert_eq!(row["attempts"], 3, "two 451s, then accepted: {row:#}");
    assert_eq!(row["last_error"], serde_json::Value::Null);
    assert_eq!(sink.messages().len(), 1);
    // With a mail sender running, SIGTERM still stops the server by itself: its sender
    // once spun on the closed pool and the process had to be killed.
    worker.stop(Duration::from_secs(20));
    let stopped = server.stop(Duration::from_secs(20));
    assert!(
        stopped.is_some_and(|s| s.success()),
        "the server did not stop on SIGTERM: {stopped:?}"
    );
}

#[tokio::test]
async fn a_refused_mail_is_marked_failed_and_shown_not_dropped() {
    let lab = Lab::new().await;
    let sink = Sink::start(&lab, "smtp", &["--refuse"]);
    let _server = server_with_mail(&lab, 30, &[("PERFBISECT_SMTP_URL", sink.url())]).await;
    let _w = lab.worker("w1");
    let ex = lab.example(34);
    let id = submit(&lab, &ex, &broken_job()).await.id;
    let row = until_mail_state(&lab, id, "failed", Duration::from_secs(300)).await;
    // A permanent (5xx) refusal is not retried.
    assert_eq!(row["attempts"], 1);
    let error = row["last_error"].as_str().unwrap();
    assert!(error.contains("refused by the test sink"), "{error}");
    assert!(sink.messages().is_empty());
}

#[tokio::test]
async fn without_smtp_mails_wait_in_the_outbox_until_a_server_can_send_them() {
    let lab = Lab::new().await;
    let mut server = lab.server(30).await;
    let _w = lab.worker("w1");
    let ex = lab.example(35);
    let id = submit(&lab, &ex, &broken_job()).await.id;
    let done = watch(&lab.api, id, Duration::from_secs(300)).await.unwrap();
    assert_eq!(done.status, "failed");
    let rows = outbox(&lab, id).await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["state"], "pending");
    assert_eq!(rows[0]["attempts"], 0);
    // The preview is there before any SMTP server is.
    let (status, eml) = get(&lab, &format!("/api/v1/bisects/{id}/report.eml")).await;
    assert_eq!(status, 200);
    assert!(eml.contains(&format!("To: {DEV}")), "{eml}");

    server.stop(Duration::from_secs(20));
    let sink = Sink::start(&lab, "smtp", &[]);
    let _server = server_with_mail(&lab, 30, &[("PERFBISECT_SMTP_URL", sink.url())]).await;
    let row = until_mail_state(&lab, id, "sent", Duration::from_secs(60)).await;
    assert_eq!(row["id"], rows[0]["id"]);
    let got = sink.messages();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].rcpt_tos, [DEV]);
}

/// A private CA and a certificate for `localhost` signed by it: (ca.pem, leaf.pem, leaf.key).
fn certificates(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=perfbisect test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("leaf.pem"),
        dir.join("leaf.key"),
    )
}

async fn send_with(
    url: &str,
    user: &str,
    password: &str,
    ca: Option<&std::path::Path>,
) -> Result<(), SendError> {
    let settings = MailConfig {
        smtp_url: Some(url.into()),
        smtp_user: Some(user.into()),
        smtp_password: Some(password.into()),
        smtp_ca_file: ca.map(Into::into),
        smtp_timeout_secs: 20,
        ..MailConfig::default()
    }
    .settings()
    .unwrap();
    let smtp = Smtp::new(settings.smtp.as_ref().unwrap()).unwrap();
    let raw = b"From: robot@perfbisect.example\r\nTo: dev@example.invalid\r\nSubject: over TLS\r\n\r\nbody\r\n";
    smtp.send("robot@perfbisect.example", &[DEV.to_string()], raw)
        .await
}

#[tokio::test]
async fn smtp_speaks_starttls_and_tls_with_authentication_and_checks_the_certificate() {
    let lab = Lab::new().await;
    let (ca, cert, key) = certificates(lab.path());
    let tls = |mode: &'static str| {
        vec![
            "--cert".to_string(),
            cert.display().to_string(),
            "--key".to_string(),
            key.display().to_string(),
            mode.to_string(),
            "--auth".to_string(),
            "robot:s3cret".to_string(),
        ]
    };
    let args = tls("--starttls");
    let starttls = Sink::start(
        &lab,
        "starttls",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let args = tls("--implicit-tls");
    let implicit = Sink::start(
        &lab,
        "implicit",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let starttls_url = format!("smtp+starttls://localhost:{}", starttls.port);
    let implicit_url = format!("smtps://localhost:{}", implicit.port);

    send_with(&starttls_url, "robot", "s3cret", Some(&ca))
        .await
        .unwrap();
    send_with(&implicit_url, "robot", "s3cret", Some(&ca))
        .await
        .unwrap();
    for sink in [&starttls, &implicit] {
        let got = sink.messages();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].header("Subject"), "over TLS");
        assert_eq!(got[0].rcpt_tos, [DEV]);
    }
    // A server whose certificate no trusted CA signed is not talked to.
    let e = send_with(&implicit_url, "robot", "s3cret", None)
        .await
        .unwrap_err();
    assert!(!e.permanent, "{e:?}");
    assert_eq!(starttls.messages().len(), 1);
    assert_eq!(implicit.messages().len(), 1);
}
