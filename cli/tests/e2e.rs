//! End to end with real processes: `perfbisect server` and `perfbisect worker` children,
//! the suite's own PostgreSQL, a generated git repository with a planted change, and the
//! REST API as a user would drive it. Also the faults: a worker killed mid-task and a
//! server killed mid-bisect.

use perfbisect_cli::api::Api;
use perfbisect_cli::demo::{start_server, start_worker, wait_healthy, watch};
use perfbisect_cli::example::{self, ExampleOptions, ExampleRepo};
use perfbisect_cli::processes::{Process, free_port};
use perfbisect_wire::api::{Bisect, SubmitBisect};
use std::path::Path;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_perfbisect");
const API_TOKEN: &str = "e2e-api-token";
const ENROLL_TOKEN: &str = "e2e-enroll-token";

struct Lab {
    dir: tempfile::TempDir,
    db_url: String,
    port: u16,
    api: Api,
}

impl Lab {
    async fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let db_url = perfbisect_server::pg::testing::fresh_database()
            .await
            .unwrap();
        let port = free_port().unwrap();
        let api = Api::new(&format!("http://127.0.0.1:{port}"), Some(API_TOKEN.into()));
        Lab {
            dir,
            db_url,
            port,
            api,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    async fn server(&self, lease_secs: u64) -> Process {
        let mut p = start_server(
            Path::new(EXE),
            self.path(),
            self.port,
            API_TOKEN,
            ENROLL_TOKEN,
            Some(&self.db_url),
            lease_secs,
        )
        .unwrap();
        wait_healthy(&self.api, &mut p, Duration::from_secs(120))
            .await
            .unwrap();
        p
    }

    fn worker(&self, name: &str) -> Process {
        start_worker(
            Path::new(EXE),
            self.path(),
            self.api.base(),
            ENROLL_TOKEN,
            name,
        )
        .unwrap()
    }

    fn example(&self, seed: u64) -> ExampleRepo {
        let opts = ExampleOptions {
            commits: 200,
            seed,
            broken_commits: 2,
            ..Default::default()
        };
        example::generate(&self.path().join(format!("example-{seed}.git")), &opts).unwrap()
    }

    async fn submit(&self, ex: &ExampleRepo, run_prefix: &str) -> Bisect {
        self.api
            .add_repository("example", &ex.path.display().to_string())
            .await
            .unwrap();
        let job =
            example::JOB_YAML.replace("command: ./bench", &format!("command: {run_prefix}./bench"));
        self.api
            .submit(&SubmitBisect {
                repository: "example".into(),
                good: "good".into(),
                bad: "bad".into(),
                job,
                metric: example::METRIC.into(),
                direction: None,
                magnitude_pct: None,
                confidence: None,
                max_runs: None,
                notify: vec![],
                use_merge_base: false,
            })
            .await
            .unwrap()
    }

    /// Polls the API until `pred` holds (or the bisect ends, or the limit passes).
    async fn until(&self, id: i64, limit: Duration, pred: impl Fn(&Bisect) -> bool) -> Bisect {
        let start = Instant::now();
        loop {
            let b = self.api.bisect(id).await.unwrap();
            if pred(&b) || perfbisect_wire::api::status_is_final(&b.status) {
                return b;
            }
            assert!(
                start.elapsed() < limit,
                "condition not reached within {limit:?}: {b:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(format!("{name}.log"))).unwrap_or_default()
    }
}

fn assert_found(b: &Bisect, ex: &ExampleRepo, lab: &Lab) {
    assert_eq!(
        b.status,
        "found",
        "reason: {:?}\nserver log:\n{}",
        b.status_reason,
        lab.log("server")
    );
    let culprit = b
        .culprit
        .as_ref()
        .expect("a found bisect names its culprit");
    assert_eq!(
        culprit.commit.sha, ex.planted,
        "the bisect blamed the wrong commit: {b:#?}"
    );
    assert!(culprit.confidence >= 0.99, "{b:?}");
    // The endpoints were measured, and statistics come from the stored runs.
    let good = b
        .commits
        .iter()
        .find(|c| c.role == "good_endpoint")
        .expect("good endpoint measured");
    let bad = b
        .commits
        .iter()
        .find(|c| c.role == "bad_endpoint")
        .expect("bad endpoint measured");
    assert!(good.n >= 3 && bad.n >= 3, "{good:?} {bad:?}");
    assert!(
        bad.mean.unwrap() > good.mean.unwrap(),
        "the planted change raises the score"
    );
    let total: usize = b.commits.iter().map(|c| c.n + c.incomplete_runs).sum();
    assert_eq!(total, b.runs_done);
}

#[tokio::test]
async fn bisect_finds_the_planted_commit_end_to_end() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let ex = lab.example(21);
    let submitted = lab.submit(&ex, "").await;
    assert_eq!(submitted.candidates_total, ex.commits);
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    // Both workers took part, with their machine description.
    let hosts = lab.api.hosts().await.unwrap();
    let names: Vec<&str> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w1", "w2"]);
    assert!(hosts[0]["machine"]["threads"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn a_worker_killed_mid_task_is_replaced_after_its_lease() {
    let lab = Lab::new().await;
    let _server = lab.server(3).await;
    let mut doomed = lab.worker("doomed");
    let ex = lab.example(22);
    // Slow runs, so the kill lands in the middle of a task.
    let submitted = lab.submit(&ex, "sleep 0.3 && ").await;
    let start = Instant::now();
    let task_of_doomed = loop {
        let hosts = lab.api.hosts().await.unwrap();
        if let Some(t) = hosts[0]["current_task"].as_i64() {
            break t;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the worker never took a task"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    doomed.kill_hard();
    let _rescuer = lab.worker("rescuer");
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    // The killed worker's task went back to the queue and was run by the other host.
    let events: serde_json::Value = reqwest::get(format!(
        "{}/api/v1/bisects/{}/events",
        lab.api.base(),
        done.id
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let expired = events.as_array().unwrap().iter().any(|e| {
        e["kind"] == "lease_expired"
            && e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("task {task_of_doomed} "))
    });
    assert!(
        expired,
        "no lease expiry recorded for task {task_of_doomed}: {events:#}"
    );
}

#[tokio::test]
async fn a_server_killed_mid_bisect_resumes_from_postgres() {
    let lab = Lab::new().await;
    let mut server = lab.server(10).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let ex = lab.example(23);
    let submitted = lab.submit(&ex, "sleep 0.1 && ").await;
    let mid = lab
        .until(submitted.id, Duration::from_secs(300), |b| {
            b.runs_done >= 12
        })
        .await;
    assert!(
        !perfbisect_wire::api::status_is_final(&mid.status),
        "ended before the crash: {mid:?}"
    );
    server.kill_hard();
    let runs_before = mid.runs_done;
    let _server2 = lab.server(10).await;
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    assert!(
        done.runs_done > runs_before,
        "no work happened after the restart"
    );
}
