//! Secrets and bad text end to end, with real server and worker processes: a job that
//! dumps its whole environment (and its parent's) publishes no token, and a benchmark
//! that prints a NUL byte costs nothing.

mod common;
mod workerlab;

use common::{ENROLL_TOKEN, Lab};
use perfbisect_cli::example::{self, ExampleOptions};
use std::time::Duration;
use workerlab::{eventually, submit, task, tasks, worker};

#[tokio::test]
async fn a_job_that_prints_its_environment_leaks_no_token_and_a_nul_stalls_nothing() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let opts = ExampleOptions {
        commits: 20,
        seed: 5,
        ..Default::default()
    };
    let ex = example::generate(&lab.path().join("ex.git"), &opts).unwrap();
    lab.api
        .add_repository("example", &ex.path.display().to_string())
        .await
        .unwrap();
    // The run prints its environment, the worker's own environment (its parent process),
    // and a NUL byte, before the benchmark's output. It also copies the raw environment and
    // command line of every ancestor (the worker and whatever started it) into a file the
    // test reads itself: no scrubbing of uploads stands between that file and the check.
    let dump = lab.path().join("ancestors.dump");
    let job = example::JOB_YAML.replace(
        "  command: ./bench",
        &format!(
            "  command: echo ENV-BEGIN; env; echo ENV-END; tr '\\0' '\\n' < /proc/$PPID/environ; \
             p=$PPID; while [ \"$p\" -gt 1 ]; do {{ echo \"== $p\"; tr '\\0' ' ' < /proc/$p/cmdline; echo; \
             tr '\\0' '\\n' < /proc/$p/environ; }} >> {dump} 2>/dev/null; \
             p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status); done; \
             printf 'nul:\\0:end\\n'; ./bench",
            dump = dump.display()
        ),
    );
    let bisect = submit(&lab, "example", "good", "bad", &job, example::METRIC)
        .await
        .id;
    // The token comes both ways a worker takes it: the environment and a flag.
    let _w = worker(&lab, "w1", "local", &["--enroll-token", ENROLL_TOKEN], &[]);
    let done = eventually("a task done", Duration::from_secs(300), || async {
        tasks(&lab, bisect)
            .await
            .into_iter()
            .find(|t| t.state == "done")
    })
    .await;
    let detail = task(&lab, done.id).await;
    assert!(!detail.runs.is_empty());
    for run in &detail.runs {
        assert!(run.completed, "{}", run.log);
        assert!(
            run.log.contains("PATH="),
            "the environment was printed: {}",
            run.log
        );
        assert!(!run.log.contains(ENROLL_TOKEN), "token leaked: {}", run.log);
        let own_env = run
            .log
            .split("ENV-BEGIN")
            .nth(1)
            .and_then(|rest| rest.split("ENV-END").next())
            .unwrap();
        assert!(
            !own_env.contains("PERFBISECT_ENROLL_TOKEN"),
            "the job saw the token variable: {own_env}"
        );
        // The worker's own environment no longer holds the token at all.
        assert!(!run.log.contains("[redacted]"), "{}", run.log);
        assert!(run.log.contains("nul:\u{FFFD}:end"), "{}", run.log);
    }
    for build in &detail.builds {
        assert!(!build.log.contains(ENROLL_TOKEN));
    }
    // The raw environments and command lines of the job's ancestors: the walk reached the
    // worker (its command line is there), and no token is anywhere.
    let raw = std::fs::read_to_string(&dump).unwrap();
    assert!(
        raw.contains(" worker ") && raw.contains("--name w1"),
        "the walk did not reach the worker: {raw}"
    );
    assert!(raw.contains("PATH="), "{raw}");
    assert!(
        !raw.contains(ENROLL_TOKEN),
        "an ancestor of the job holds the token: {raw}"
    );
}

/// Registers worker `name` in group `local` with `token`, which must be accepted.
async fn register_worker(lab: &Lab, token: &str, name: &str) {
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/worker/register", lab.api.base()))
        .bearer_auth(token)
        .json(&serde_json::json!({"name": name, "host_group": "local"}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    assert!(status.is_success(), "{status}: {}", r.text().await.unwrap());
}

/// `/proc/<pid>/{cmdline,environ}` as text, NULs shown as spaces and newlines.
fn proc_text(pid: u32) -> (String, String) {
    let read = |what: &str| {
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/{what}")).unwrap())
            .replace('\0', "\n")
    };
    (read("cmdline"), read("environ"))
}

#[tokio::test]
async fn a_server_given_its_secrets_as_flags_and_variables_shows_none_of_them_in_proc() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new().await;
    let api_token = "flag-api-token-4711";
    let enroll_token = "env-enroll-token-4712";
    let mut cmd = std::process::Command::new(common::EXE);
    cmd.arg("server")
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", lab.port))
        .arg("--data-dir")
        .arg(lab.path().join("server"))
        // Both spellings of a flag, and the variables a deployment would set.
        .args(["--api-token", api_token])
        .arg(format!("--database-url={}", lab.db_url))
        .env("PERFBISECT_ENROLL_TOKEN", enroll_token)
        .env("PERFBISECT_SMTP_PASSWORD", "env-smtp-password-4713")
        .env_remove("DATABASE_URL");
    let mut server =
        perfbisect_cli::processes::Process::spawn("server", cmd, &lab.path().join("server.log"))
            .unwrap();
    let api = perfbisect_cli::api::Api::new(lab.api.base(), Some(api_token.into()));
    perfbisect_cli::demo::wait_healthy(&api, &mut server, Duration::from_secs(120))
        .await
        .unwrap();
    let pid = server.pid().unwrap();
    let (cmdline, environ) = proc_text(pid);
    // Still the same process (supervisors and pid files see one), serving with the same flags.
    assert!(
        cmdline.contains("server") && cmdline.contains("--data-dir"),
        "{cmdline}"
    );
    for secret in [
        api_token,
        enroll_token,
        "env-smtp-password-4713",
        lab.db_url.as_str(),
    ] {
        assert!(
            !cmdline.contains(secret),
            "{secret} in the server's command line: {cmdline}"
        );
        assert!(
            !environ.contains(secret),
            "{secret} in the server's environment: {environ}"
        );
    }
    // The secrets still work: the flag's token submits, the variable's token enrolls.
    let ex = example::generate(
        &lab.path().join("ex.git"),
        &ExampleOptions {
            commits: 20,
            ..Default::default()
        },
    )
    .unwrap();
    api.add_repository("example", &ex.path.display().to_string())
        .await
        .expect("the API token given as a flag is accepted");
    register_worker(&lab, enroll_token, "w").await;
    // The token the server generated (none was given) is its owner's alone, from the start.
    let generated = lab.path().join("server").join("operator-token");
    let mode = std::fs::metadata(&generated).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", generated.display());
}

#[tokio::test]
async fn a_worker_whose_name_an_operator_took_over_exits_saying_why() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let mut evicted = worker(&lab, "w1", "local", &["--claim-wait-secs", "1"], &[]);
    eventually("w1 registered", Duration::from_secs(60), || async {
        let hosts = lab.api.hosts().await.unwrap().to_string();
        hosts.contains("\"w1\"").then_some(())
    })
    .await;
    let operator = std::fs::read_to_string(lab.path().join("server").join("operator-token"))
        .unwrap()
        .trim()
        .to_string();
    register_worker(&lab, &operator, "w1").await;
    let status = eventually("the evicted worker exits", Duration::from_secs(60), || {
        let s = evicted.exit_status();
        async move { s }
    })
    .await;
    assert!(
        !status.success(),
        "the evicted worker exited as if all was well"
    );
    let log = lab.log("w1");
    assert!(
        log.contains("no longer accepts this worker's token"),
        "the log does not say why: {log}"
    );
}
