//! A lab for end-to-end tests: real `perfbisect server` and `perfbisect worker` child
//! processes, a fresh database in the suite's PostgreSQL cluster, generated example
//! repositories, and the REST API as a user would drive it.
#![allow(dead_code)] // each test file uses a different part of the lab

use perfbisect_cli::api::Api;
use perfbisect_cli::demo::{start_server, start_worker, wait_healthy};
use perfbisect_cli::example::{self, ExampleOptions, ExampleRepo};
use perfbisect_cli::processes::{Process, free_port};
use perfbisect_wire::api::{Bisect, SubmitBisect};
use std::path::Path;
use std::time::{Duration, Instant};

pub const EXE: &str = env!("CARGO_BIN_EXE_perfbisect");
pub const API_TOKEN: &str = "e2e-api-token";
pub const ENROLL_TOKEN: &str = "e2e-enroll-token";

pub struct Lab {
    pub dir: tempfile::TempDir,
    pub db_url: String,
    pub port: u16,
    pub api: Api,
}

impl Lab {
    pub async fn new() -> Lab {
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

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub async fn server(&self, lease_secs: u64) -> Process {
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

    pub fn worker(&self, name: &str) -> Process {
        start_worker(
            Path::new(EXE),
            self.path(),
            self.api.base(),
            ENROLL_TOKEN,
            name,
        )
        .unwrap()
    }

    pub fn example(&self, seed: u64) -> ExampleRepo {
        let opts = ExampleOptions {
            commits: 200,
            seed,
            broken_commits: 2,
            ..Default::default()
        };
        example::generate(&self.path().join(format!("example-{seed}.git")), &opts).unwrap()
    }

    pub async fn submit(&self, ex: &ExampleRepo, run_prefix: &str) -> Bisect {
        self.api
            .add_repository("example", &ex.path.display().to_string())
            .await
            .unwrap();
        let job =
            example::JOB_YAML.replace("command: ./bench", &format!("command: {run_prefix}./bench"));
        self.api
            .submit(&SubmitBisect {
                job,
                ..example_request()
            })
            .await
            .unwrap()
    }

    /// Polls the API until `pred` holds (or the bisect ends, or the limit passes).
    pub async fn until(&self, id: i64, limit: Duration, pred: impl Fn(&Bisect) -> bool) -> Bisect {
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

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(format!("{name}.log"))).unwrap_or_default()
    }
}

/// The example's bisect (repository `example`, good..bad, its job and metric).
pub fn example_request() -> SubmitBisect {
    SubmitBisect {
        repository: "example".into(),
        good: "good".into(),
        bad: "bad".into(),
        job: example::JOB_YAML.into(),
        metric: example::METRIC.into(),
        direction: None,
        magnitude_pct: None,
        confidence: None,
        max_runs: None,
        notify: vec![],
        use_merge_base: false,
        first_parent: false,
    }
}

/// The bisect found the planted commit, and its numbers come from stored runs.
pub fn assert_found(b: &Bisect, ex: &ExampleRepo, lab: &Lab) {
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
