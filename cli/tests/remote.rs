//! Repositories where kernel teams keep them, and a server on the lab network: a bisect end
//! to end with the repository served over HTTPS by `git http-backend` (private CA, basic
//! authentication) and over ssh (key authentication), the workers talking to the server over
//! TLS. Registration answers at once; a wrong credential ends the repository `failed` with a
//! clear message; a bisect submitted while the repository is mirroring waits, then runs to
//! its culprit; no secret reaches the database, the API or the logs. The CLI reaches the TLS
//! server with `--ca-file` (here its environment variable).

mod common;
#[path = "support/remote.rs"]
mod remote;

use common::{Lab, assert_found};
use perfbisect_cli::api::{Api, ApiError};
use perfbisect_cli::demo::watch;
use remote::{GitSshd, HttpsGit, Pki, tls_server, tls_worker};
use std::path::Path;
use std::time::Duration;

const PASSWORD: &str = "correct-horse-s3cret";

async fn repository_rows(lab: &Lab) -> i64 {
    let pool = sqlx::PgPool::connect(&lab.db_url).await.unwrap();
    sqlx::query_scalar("SELECT count(*) FROM repositories")
        .fetch_one(&pool)
        .await
        .unwrap()
}

fn refused(e: ApiError) -> (u16, Option<String>, String) {
    match e {
        ApiError::Refused {
            status,
            field,
            message,
        } => (status, field, message),
        other => panic!("expected a refusal, got {other}"),
    }
}

/// The lock a repository's fetch takes (`store::fetches::FETCH_LOCK_CLASS`), held by the
/// test on its own connection: a fetch waits for it as it would for another replica's.
struct FetchHold(sqlx::PgConnection);

impl FetchHold {
    async fn take(lab: &Lab, repo: i64) -> FetchHold {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&lab.db_url).await.unwrap();
        sqlx::query("SELECT pg_advisory_lock($1, $2::int4)")
            .bind(perfbisect_server::store::fetches::FETCH_LOCK_CLASS)
            .bind(repo as i32)
            .execute(&mut conn)
            .await
            .unwrap();
        FetchHold(conn)
    }

    async fn release(self) {
        use sqlx::Connection;
        self.0.close().await.unwrap();
    }
}

/// `perfbisect status ID` run as a user would, against the TLS server; stdout and stderr.
fn perfbisect_cli_status(api: &Api, id: i64, ca: Option<&Path>) -> String {
    let mut cmd = std::process::Command::new(common::EXE);
    cmd.args(["status", &id.to_string(), "--json", "--server", api.base()])
        .env_remove("PERFBISECT_CA_FILE");
    if let Some(ca) = ca {
        cmd.arg("--ca-file").arg(ca);
    }
    let out = cmd.output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Nothing secret in the server's and workers' logs or the stored repository rows.
async fn assert_no_secret(lab: &Lab, secret: &str, logs: &[&str]) {
    for name in logs {
        assert!(
            !lab.log(name).contains(secret),
            "{name}.log holds the secret"
        );
    }
    let pool = sqlx::PgPool::connect(&lab.db_url).await.unwrap();
    let leaked: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM repositories WHERE url LIKE '%' || $1 || '%')
              + (SELECT count(*) FROM bisect_events WHERE message LIKE '%' || $1 || '%')",
    )
    .bind(secret)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(leaked, 0);
}

#[tokio::test]
async fn a_bisect_runs_with_the_repository_over_https_and_workers_over_tls() {
    let lab = Lab::new().await;
    let pki = Pki::new(&lab.path().join("pki"));
    let ex = lab.example(41);
    let root = ex.path.parent().unwrap().to_path_buf();
    let name = ex.path.file_name().unwrap().to_str().unwrap().to_string();
    let git = HttpsGit::start(
        &lab.path().join("https-git"),
        &pki,
        &root,
        "robot",
        PASSWORD,
    );
    let url = git.url(&name);
    // The credential store the server reads; wrong at first.
    let creds = lab.path().join("git-credentials");
    std::fs::write(
        &creds,
        format!("https://robot:wrong@localhost:{}\n", git.port),
    )
    .unwrap();
    let env: [(&str, &Path); 2] = [
        ("PERFBISECT_GIT_CA_FILE", &pki.ca),
        ("PERFBISECT_GIT_CREDENTIALS_FILE", &creds),
    ];
    let (_server, api) = tls_server(lab.path(), &lab.db_url, lab.port, &pki, &env).await;

    // Plain HTTP and clients without the lab's CA get nowhere.
    let plain = Api::new(&format!("http://127.0.0.1:{}", lab.port), None);
    assert!(!plain.healthy().await);
    let untrusting = Api::new(api.base(), None);
    assert!(
        !untrusting.healthy().await,
        "the private CA is not trusted by default"
    );

    // A wrong password: registration answers at once, the fetch fails with a clear message,
    // and the row keeps the error, not the secret.
    let registered = api
        .register_repository("example", &url, None)
        .await
        .unwrap();
    assert_eq!(registered.state, "mirroring");
    let (status, field, message) = refused(api.add_repository("example", &url).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("url")), "{message}");
    assert!(message.contains("Authentication failed"), "{message}");
    assert!(!message.contains("wrong"), "{message}");
    let listed = api.repositories().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, "failed");
    assert!(
        listed[0]
            .fetch_error
            .as_deref()
            .is_some_and(|e| e.contains("Authentication failed")),
        "{listed:?}"
    );
    // A password in the URL is refused without being echoed.
    let with_secret = url.replace("https://", &format!("https://robot:{PASSWORD}@"));
    let (status, _, message) = refused(
        api.add_repository("example", &with_secret)
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 422);
    assert!(
        message.contains("credentials file") && !message.contains(PASSWORD),
        "{message}"
    );
    assert_eq!(
        repository_rows(&lab).await,
        1,
        "the refused URL stored nothing (only the failed registration's row)"
    );

    // The operator fixes the credential file; the next fetch reads it. Meanwhile the fetch
    // is held (the test takes its lock, as another replica's fetch would), so the bisect is
    // submitted while the repository is mirroring. The hold comes first: a retry of the
    // failed fetch that ran between the fix and the hold would make the repository ready
    // before it is registered again (CI saw that once).
    let hold = FetchHold::take(&lab, listed[0].id).await;
    std::fs::write(
        &creds,
        format!("https://robot:{PASSWORD}@localhost:{}\n", git.port),
    )
    .unwrap();
    let repo = api
        .register_repository("example", &url, None)
        .await
        .unwrap();
    assert_eq!(
        (repo.url.as_str(), repo.state.as_str()),
        (url.as_str(), "mirroring")
    );
    let submitted = api.submit(&common::example_request()).await.unwrap();
    assert_eq!(submitted.status, "fetching", "{submitted:?}");
    // The CLI reaches the TLS server with the lab's CA (`--ca-file`), and not without it.
    let status = perfbisect_cli_status(&api, submitted.id, Some(&pki.ca));
    assert!(status.contains("fetching"), "{status}");
    let status = perfbisect_cli_status(&api, submitted.id, None);
    assert!(!status.contains("fetching"), "{status}");
    hold.release().await;
    let repo = api
        .wait_repository("example", Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(repo.state, "ready");
    assert_eq!(
        std::fs::read_to_string(&creds).unwrap().trim(),
        format!("https://robot:{PASSWORD}@localhost:{}", git.port),
        "the operator's credential file is only read"
    );

    let _w1 = tls_worker(lab.path(), &api, &pki, "w1", &env);
    let _w2 = tls_worker(lab.path(), &api, &pki, "w2", &env);
    let done = watch(&api, submitted.id, Duration::from_secs(300))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    // The workers fetched over https themselves (their own mirrors hold the commits).
    for w in ["w1", "w2"] {
        let mirrors = lab.path().join(w).join("mirrors");
        assert!(
            std::fs::read_dir(&mirrors).is_ok_and(|mut d| d.next().is_some()),
            "{w} has no mirror: {}",
            lab.log(w)
        );
    }
    assert_no_secret(&lab, PASSWORD, &["server", "w1", "w2"]).await;
}

#[tokio::test]
async fn a_bisect_runs_with_the_repository_over_ssh_with_key_authentication() {
    let lab = Lab::new().await;
    let pki = Pki::new(&lab.path().join("pki"));
    let ex = lab.example(43);
    let sshd = GitSshd::start(&lab.path().join("sshd"));
    let url = sshd.url(&ex.path);

    // A key the host does not accept: a clear refusal, nothing stored.
    let stranger: [(&str, &Path); 2] = [
        ("PERFBISECT_GIT_SSH_KEY", &sshd.stranger_key),
        ("PERFBISECT_GIT_SSH_KNOWN_HOSTS", &sshd.known_hosts),
    ];
    let (server, api) = tls_server(lab.path(), &lab.db_url, lab.port, &pki, &stranger).await;
    let (status, field, message) = refused(api.add_repository("example", &url).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("url")), "{message}");
    assert!(message.contains("Permission denied"), "{message}");
    assert_eq!(repository_rows(&lab).await, 1, "one row, failed");
    drop(server);

    let env: [(&str, &Path); 2] = [
        ("PERFBISECT_GIT_SSH_KEY", &sshd.client_key),
        ("PERFBISECT_GIT_SSH_KNOWN_HOSTS", &sshd.known_hosts),
    ];
    let (_server, api) = tls_server(lab.path(), &lab.db_url, lab.port, &pki, &env).await;
    api.add_repository("example", &url).await.unwrap();
    let _w1 = tls_worker(lab.path(), &api, &pki, "w1", &env);
    let _w2 = tls_worker(lab.path(), &api, &pki, "w2", &env);
    let submitted = api.submit(&common::example_request()).await.unwrap();
    let done = watch(&api, submitted.id, Duration::from_secs(300))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    let key = std::fs::read_to_string(&sshd.client_key).unwrap();
    let secret_line = key.lines().nth(1).unwrap();
    assert_no_secret(&lab, secret_line, &["server", "w1", "w2"]).await;
}
