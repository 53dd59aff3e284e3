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
