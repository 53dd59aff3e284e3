//! The worker under faults, end to end with real processes: the build cache across tasks
//! and restarts (a test counts builds), timeouts of builds and runs, cancellation from the
//! server, SIGTERM, and a worker killed and restarted mid-task.

mod common;
mod workerlab;

use common::Lab;
use perfbisect_cli::demo::watch;
use perfbisect_cli::example::{self, ExampleOptions, ExampleRepo};
use std::time::Duration;
use workerlab::{events, eventually, lines, submit, task, tasks, worker};

fn example(lab: &Lab, seed: u64) -> ExampleRepo {
    let opts = ExampleOptions {
        commits: 40,
        seed,
        ..Default::default()
    };
    example::generate(&lab.path().join(format!("ex-{seed}.git")), &opts).unwrap()
}

/// The example job with its build and run commands prefixed.
fn job(build_prefix: &str, run_prefix: &str, extra: &str) -> String {
    example::JOB_YAML
        .replace("  command: cc", &format!("  command: {build_prefix}cc"))
        .replace(
            "  command: ./bench",
            &format!("  command: {run_prefix}./bench"),
        )
        + extra
}

async fn start(lab: &Lab, ex: &ExampleRepo, job: &str) -> i64 {
    lab.api
        .add_repository("example", &ex.path.display().to_string())
        .await
        .unwrap();
    submit(lab, "example", "good", "bad", job, example::METRIC)
        .await
        .id
}

fn pid_alive(pid: i32) -> bool {
    // A zombie has stopped running; only its parent has not collected it yet.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn the_build_cache_means_a_commit_is_built_once_even_across_restarts() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let ex = example(&lab, 31);
    let count = lab.path().join("builds.txt");
    let slow_once = lab.path().join("slow-once");
    // Every build leaves a line; the very first run hangs past its timeout.
    let job = job(
        "echo $PERFBISECT_COMMIT >> $TEST_BUILDS && ",
        "if [ ! -e $TEST_SLOW ]; then touch $TEST_SLOW; sleep 60; fi; ",
        "",
    )
    .replace("run_secs: 60", "run_secs: 3");
    let env = [
        ("TEST_BUILDS", count.to_str().unwrap()),
        ("TEST_SLOW", slow_once.to_str().unwrap()),
    ];
    let mut w = worker(&lab, "w1", "local", &[], &env);
    let first = start(&lab, &ex, &job).await;
    let done = watch(&lab.api, first, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(
        done.status,
        "found",
        "{:?}\n{}",
        done.status_reason,
        lab.log("w1")
    );
    let built = lines(&count);
    let mut unique = built.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        built.len(),
        unique.len(),
        "a commit was built twice: {built:?}"
    );
    // Commits were measured by more than one task, and their later tasks used the cache.
    let all = tasks(&lab, first).await;
    assert!(
        all.len() > unique.len(),
        "{} tasks, {} builds",
        all.len(),
        unique.len()
    );
    let mut cached = 0;
    let mut timed_out = 0;
    for t in &all {
        let d = task(&lab, t.id).await;
        cached += d.builds.iter().filter(|b| b.cached).count();
        for run in &d.runs {
            // Every run records where it ran.
            let env = &run.environment;
            assert_eq!(env.host.as_deref(), Some("w1"));
            assert_eq!(env.boot_method.as_deref(), Some("none"));
            assert!(env.kernel_release.is_some(), "{env:?}");
            if !run.completed && run.log.contains("timed out") {
                timed_out += 1;
                assert!(
                    run.metrics.is_empty(),
                    "an incomplete run has no numbers: {run:?}"
                );
            }
        }
    }
    assert!(cached > 0, "no task took its build from the cache");
    assert_eq!(
        timed_out, 1,
        "the first run timed out and is stored incomplete"
    );

    // A restarted worker keeps its cache: the same range again builds nothing again.
    w.stop(Duration::from_secs(30));
    let _w = worker(&lab, "w1", "local", &[], &env);
    let again = submit(&lab, "example", "good", "bad", &job, example::METRIC).await;
    let done = watch(&lab.api, again.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(done.status, "found", "{:?}", done.status_reason);
    let after = lines(&count);
    let mut unique_after = after.clone();
    unique_after.sort();
    unique_after.dedup();
    assert_eq!(
        after.len(),
        unique_after.len(),
        "rebuilt after the restart: {after:?}"
    );
}

#[tokio::test]
async fn a_build_past_its_timeout_makes_the_commit_untestable() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let ex = example(&lab, 32);
    let job = job("sleep 60 && ", "", "").replace("build_secs: 120", "build_secs: 2");
    let _w = worker(&lab, "w1", "local", &[], &[]);
    let id = start(&lab, &ex, &job).await;
    let done = watch(&lab.api, id, Duration::from_secs(120)).await.unwrap();
    assert_eq!(done.status, "failed", "{done:?}");
    let reason = done.status_reason.unwrap();
    assert!(
        reason.contains("endpoint") && reason.contains("timed out"),
        "{reason}"
    );
}

#[tokio::test]
async fn cancelling_a_bisect_stops_its_running_benchmark() {
    let lab = Lab::new().await;
    let _server = lab.server(60).await;
    let ex = example(&lab, 33);
    let pids = lab.path().join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    // The benchmark writes its pid, then would run for ten minutes.
    let job = job(
        "",
        "echo $$ > $TEST_PIDS/$PERFBISECT_COMMIT; sleep 600; ",
        "",
    )
    .replace("run_secs: 60", "run_secs: 3600");
    let _w = worker(
        &lab,
        "w1",
        "local",
        &[],
        &[("TEST_PIDS", pids.to_str().unwrap())],
    );
    let id = start(&lab, &ex, &job).await;
    let pid: i32 = eventually("the benchmark starts", Duration::from_secs(120), || async {
        let entry = std::fs::read_dir(&pids).ok()?.next()?.ok()?;
        std::fs::read_to_string(entry.path())
            .ok()?
            .trim()
            .parse()
            .ok()
    })
    .await;
    assert!(pid_alive(pid));
    let cancelled = lab.api.cancel(id).await.unwrap();
    assert_eq!(cancelled.status, "cancelled");
    // Stopped by the next heartbeat (every 3 s), long before the benchmark would end.
    eventually(
        "the benchmark is stopped",
        Duration::from_secs(60),
        || async { (!pid_alive(pid)).then_some(()) },
    )
    .await;
    eventually(
        "the worker is idle again",
        Duration::from_secs(60),
        || async {
            let hosts = lab.api.hosts().await.ok()?;
            hosts[0]["current_task"].is_null().then_some(())
        },
    )
    .await;
    assert!(
        lab.log("w1").contains("server cancelled the task"),
        "{}",
        lab.log("w1")
    );
}

#[tokio::test]
async fn sigterm_finishes_the_run_then_hands_the_rest_of_the_task_back() {
    let lab = Lab::new().await;
    let _server = lab.server(60).await;
    let ex = example(&lab, 34);
    let runlog = |w: &str| lab.path().join(format!("runs-{w}.txt"));
    let job = job(
        "",
        "echo \"$PERFBISECT_COMMIT $PERFBISECT_RUN\" >> $TEST_RUNS; sleep 1; ",
        "",
    );
    let r1 = runlog("w1").display().to_string();
    let mut w1 = worker(&lab, "w1", "local", &[], &[("TEST_RUNS", &r1)]);
    let id = start(&lab, &ex, &job).await;
    let first = eventually("w1 uploads a run", Duration::from_secs(120), || async {
        let t = tasks(&lab, id).await.into_iter().next()?;
        (!task(&lab, t.id).await.runs.is_empty()).then_some(t)
    })
    .await;
    let pid = nix::unistd::Pid::from_raw(w1.pid().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    eventually("w1 exits", Duration::from_secs(60), || {
        let exited = w1.has_exited();
        async move { exited.then_some(()) }
    })
    .await;
    let handed = task(&lab, first.id).await;
    assert_eq!(handed.task.state, "queued", "{handed:?}");
    assert_eq!(
        handed.task.attempts, 0,
        "a hand-back does not count as an attempt"
    );
    assert!(
        handed
            .task
            .message
            .as_deref()
            .unwrap()
            .contains("handed back"),
        "{handed:?}"
    );
    // The run under way when the signal came was finished and uploaded, not killed.
    // The first task asks for what the engine's first deployment takes (3 of 5 runs).
    let asked = first.runs_requested as usize;
    let kept = handed.runs.len();
    assert!((1..asked).contains(&kept), "{kept} of {asked} runs");
    assert!(handed.runs.iter().all(|r| r.completed), "{:?}", handed.runs);
    assert_eq!(
        lines(&runlog("w1")).len(),
        kept,
        "every run w1 started was uploaded"
    );
    assert!(
        events(&lab, id)
            .await
            .iter()
            .any(|(k, _)| k == "handed_back"),
        "no hand-back event"
    );

    // Another worker takes it and runs only what is missing.
    let r2 = runlog("w2").display().to_string();
    let _w2 = worker(&lab, "w2", "local", &[], &[("TEST_RUNS", &r2)]);
    let finished = eventually("w2 finishes the task", Duration::from_secs(120), || async {
        let d = task(&lab, first.id).await;
        (d.task.state == "done").then_some(d)
    })
    .await;
    let iterations: Vec<u32> = finished.runs.iter().map(|r| r.iteration).collect();
    assert_eq!(iterations, (0..asked as u32).collect::<Vec<_>>());
    let by_w2: Vec<String> = lines(&runlog("w2"))
        .into_iter()
        .filter(|l| l.starts_with(&first.sha))
        .take(asked - kept)
        .collect();
    let expected: Vec<String> = (kept..asked)
        .map(|i| format!("{} {i}", first.sha))
        .collect();
    assert_eq!(
        by_w2, expected,
        "w2 ran the runs w1 had not done, and only those"
    );
    lab.api.cancel(id).await.unwrap();
}

#[tokio::test]
async fn a_worker_restarted_mid_task_reports_it_and_the_task_runs_again() {
    let lab = Lab::new().await;
    // A lease far longer than the test: nothing here waits for it to expire.
    let _server = lab.server(600).await;
    let ex = example(&lab, 35);
    let job = job("", "sleep 1; ", "");
    let mut w1 = worker(&lab, "w1", "local", &[], &[]);
    let id = start(&lab, &ex, &job).await;
    let first = eventually("w1 uploads a run", Duration::from_secs(120), || async {
        let t = tasks(&lab, id).await.into_iter().next()?;
        (!task(&lab, t.id).await.runs.is_empty()).then_some(t)
    })
    .await;
    w1.kill_hard();
    let _again = worker(&lab, "w1", "local", &[], &[]);
    let (_, message) = eventually(
        "the interruption is recorded",
        Duration::from_secs(120),
        || async {
            events(&lab, id)
                .await
                .into_iter()
                .find(|(k, m)| k == "interrupted" && m.contains(&format!("task {} ", first.id)))
        },
    )
    .await;
    assert!(
        message.contains("run ") && message.contains("w1"),
        "{message}"
    );
    let done = eventually(
        "the task is done again",
        Duration::from_secs(120),
        || async {
            let d = task(&lab, first.id).await;
            (d.task.state == "done").then_some(d)
        },
    )
    .await;
    assert_eq!(done.task.attempts, 2, "{done:?}");
    assert_eq!(done.runs.len(), first.runs_requested as usize);
    lab.api.cancel(id).await.unwrap();
}

#[tokio::test]
async fn a_worker_frozen_past_its_lease_loses_the_task_and_writes_nothing_into_it() {
    let lab = Lab::new().await;
    let _server = lab.server(3).await;
    let ex = example(&lab, 36);
    let job = job("", "sleep 0.5; ", "");
    let mut zombie = worker(&lab, "zombie", "local", &[], &[]);
    let id = start(&lab, &ex, &job).await;
    let first = eventually(
        "the worker uploads a run",
        Duration::from_secs(120),
        || async {
            let t = tasks(&lab, id).await.into_iter().next()?;
            (!task(&lab, t.id).await.runs.is_empty()).then_some(t)
        },
    )
    .await;
    let pid = nix::unistd::Pid::from_raw(zombie.pid().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let _rescuer = worker(&lab, "rescuer", "local", &[], &[]);
    // Its lease runs out; the task is handed to the other worker.
    let taken = eventually(
        "the task changes hands",
        Duration::from_secs(120),
        || async {
            let d = task(&lab, first.id).await;
            (d.task.host.as_deref() == Some("rescuer")).then_some(d)
        },
    )
    .await;
    let by_zombie = taken.runs.iter().filter(|r| r.host == "zombie").count();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let done = eventually(
        "the rescuer finishes the task",
        Duration::from_secs(120),
        || async {
            let d = task(&lab, first.id).await;
            (d.task.state == "done").then_some(d)
        },
    )
    .await;
    assert_eq!(done.runs.len(), first.runs_requested as usize);
    assert_eq!(
        done.runs.iter().filter(|r| r.host == "zombie").count(),
        by_zombie,
        "the woken worker wrote into a task that was no longer its own: {:?}",
        done.runs
    );
    eventually(
        "the woken worker notices",
        Duration::from_secs(60),
        || async {
            let log = lab.log("zombie");
            (log.contains("task taken away") || log.contains("server cancelled the task"))
                .then_some(())
        },
    )
    .await;
    assert!(
        events(&lab, id)
            .await
            .iter()
            .any(|(k, m)| k == "lease_expired" && m.contains(&format!("task {} ", first.id))),
        "no lease expiry recorded"
    );
    lab.api.cancel(id).await.unwrap();
    zombie.stop(Duration::from_secs(20));
}

#[tokio::test]
async fn a_run_the_server_refuses_is_stored_incomplete_with_the_reason_and_not_retried() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let ex = example(&lab, 36);
    // The benchmark reports another metric than the bisect's: the server refuses every
    // completed run (422 naming the metric), and would refuse it again.
    // (`\072` is the colon, which YAML would not take in a plain command line.)
    let job = job("", "printf 'other\\072 1\\n'; exit 0; ", "");
    let _w = worker(&lab, "w1", "local", &[], &[]);
    let id = start(&lab, &ex, &job).await;
    let finished = eventually("a task finished", Duration::from_secs(120), || async {
        tasks(&lab, id)
            .await
            .into_iter()
            .find(|t| t.state == "done" || t.state == "failed")
    })
    .await;
    assert_eq!(finished.state, "done", "{finished:?}");
    let detail = task(&lab, finished.id).await;
    assert!(!detail.runs.is_empty(), "{detail:?}");
    for run in &detail.runs {
        assert!(
            !run.completed,
            "a refused run was stored as complete: {run:?}"
        );
        assert!(run.metrics.is_empty(), "{run:?}");
        assert!(
            run.log.contains("the server refused this run's upload")
                && run.log.contains(example::METRIC),
            "the run's log does not say why: {}",
            run.log
        );
    }
    assert!(
        lab.log("w1")
            .contains("the server refused the run; storing it as incomplete"),
        "{}",
        lab.log("w1")
    );
}
