//! What the worker end-to-end tests add to the shared lab: workers started with their own
//! flags and environment, the task API, a git history written file by file, and the
//! prebuilt kernel the qemu tests boot.
#![allow(dead_code)] // each test file uses a different part

#[path = "../../../worker/tests/common/lab.rs"]
pub mod lab;
/// Debian's linux-source-6.1 for the kernel tests: the unpacked tree, tinyconfig, git.
#[path = "../../../worker/tests/common/linux.rs"]
pub mod linux;
/// The worker tests' loopback sshd and VM lab (qemu hosts behind ipmi_sim), shared.
#[path = "../../../worker/tests/common/sshd.rs"]
pub mod sshd;

use crate::common::{ENROLL_TOKEN, EXE, Lab};
use git2::{Oid, Repository, Signature, Time};
use perfbisect_cli::processes::Process;
use perfbisect_wire::api::{Bisect, SubmitBisect};
use perfbisect_wire::tasks::{TaskDetail, TaskSummary};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A `perfbisect worker` of `group`, with extra flags and environment.
pub fn worker(lab: &Lab, name: &str, group: &str, args: &[&str], env: &[(&str, &str)]) -> Process {
    let mut cmd = Command::new(EXE);
    cmd.arg("worker")
        .args([
            "--server",
            lab.api.base(),
            "--name",
            name,
            "--host-group",
            group,
        ])
        .arg("--work-dir")
        .arg(lab.path().join(name))
        .args(args)
        .env("PERFBISECT_ENROLL_TOKEN", ENROLL_TOKEN)
        .env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Jobs see only an allow-list of the worker's environment: pass the test's own variables.
    let pass: Vec<&str> = env
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !k.starts_with("PERFBISECT_") && !k.starts_with("RUST_"))
        .collect();
    if !pass.is_empty() {
        cmd.env("PERFBISECT_PASS_ENV", pass.join(","));
    }
    Process::spawn(name, cmd, &lab.path().join(format!("{name}.log"))).unwrap()
}

pub async fn submit(
    lab: &Lab,
    repo: &str,
    good: &str,
    bad: &str,
    job: &str,
    metric: &str,
) -> Bisect {
    lab.api
        .submit(&SubmitBisect {
            repository: repo.into(),
            good: good.into(),
            bad: bad.into(),
            job: job.into(),
            metric: metric.into(),
            direction: None,
            magnitude_pct: None,
            confidence: None,
            max_runs: None,
            notify: vec![],
            use_merge_base: false,
            first_parent: false,
        })
        .await
        .unwrap()
}

pub async fn tasks(lab: &Lab, bisect: i64) -> Vec<TaskSummary> {
    reqwest::get(format!("{}/api/v1/tasks?bisect={bisect}", lab.api.base()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub async fn task(lab: &Lab, id: i64) -> TaskDetail {
    reqwest::get(format!("{}/api/v1/tasks/{id}", lab.api.base()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub async fn events(lab: &Lab, bisect: i64) -> Vec<(String, String)> {
    let v: serde_json::Value =
        reqwest::get(format!("{}/api/v1/bisects/{bisect}/events", lab.api.base()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Polls `probe` until it gives a value; fails the test after `limit` (a bound far above
/// what the condition needs, not a measurement).
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A linear history in a bare repository: each commit is the files of the previous one
/// with `changes` applied (`None` deletes). Returns the shas, oldest first.
pub fn linear_repo(path: &Path, commits: &[Vec<(&str, Option<String>)>]) -> Vec<String> {
    let repo = Repository::init_bare(path).unwrap();
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    let mut parent: Option<Oid> = None;
    let mut shas = Vec::new();
    for (i, changes) in commits.iter().enumerate() {
        for (name, content) in changes {
            match content {
                Some(c) => files.insert(name.to_string(), c.clone()),
                None => files.remove(*name),
            };
        }
        let mut tb = repo.treebuilder(None).unwrap();
        for (name, content) in &files {
            let blob = repo.blob(content.as_bytes()).unwrap();
            tb.insert(name, blob, 0o100644).unwrap();
        }
        let tree = repo.find_tree(tb.write().unwrap()).unwrap();
        let sig = Signature::new(
            "Lab",
            "lab@example.invalid",
            &Time::new(1_700_000_000 + i as i64 * 60, 0),
        )
        .unwrap();
        let parents: Vec<git2::Commit> = parent
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        let oid = repo
            .commit(None, &sig, &sig, &format!("commit {i}"), &tree, &refs)
            .unwrap();
        parent = Some(oid);
        shas.push(oid.to_string());
    }
    repo.reference("refs/heads/main", parent.unwrap(), true, "lab")
        .unwrap();
    repo.set_head("refs/heads/main").unwrap();
    shas
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Debian's prebuilt kernel, fetched once into the target directory by scripts/test-kernel.sh.
pub fn debian_kernel() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/test-kernel.sh");
    let out = Command::new(script)
        .arg(target_dir().join("test-kernel"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The lines of a file (none if it does not exist).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}
