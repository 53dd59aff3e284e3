//! `perfbisect loadtest`: fake workers over the real worker protocol against a real server
//! process, printing the figures issue 14 sets targets for.
//!
//! Three scenarios, each on a fresh server (and its embedded PostgreSQL, unless
//! `--database-url` is given):
//! - large: one bisect over a generated linear range of `--large-commits` candidates (made with
//!   `git fast-import`), worked by `--large-hosts` fake hosts: submit time against
//!   `git rev-list --bisect-all` on the same range in the same run, upload and complete p99,
//!   scheduling round time, server RSS during and after;
//! - alone: `--alone` small bisects, `--alone-lanes` at a time, each alone with one host: the
//!   baseline of runs per bisect (a mean, since one bisect's runs vary with its noise);
//! - fleet: `--bisects` small bisects worked by `--hosts` fake hosts: claim p99, lease expiries
//!   nobody caused, runs per bisect against the baseline, list-page latency.
//!
//! A fake host claims, "runs" for `--run-ms` per run, uploads a value drawn around 100 (5 %
//! higher from the planted commit on, 1 % noise) and completes; it never dies, so every lease
//! expiry is one the server caused.

use crate::api::Api;
use crate::demo::{server_command, wait_healthy};
use crate::processes::{Process, free_port};
use anyhow::{Context, bail};
use perfbisect_wire::api::SubmitBisect;
use perfbisect_wire::worker::TaskAssignment;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const API_TOKEN: &str = "loadtest-api-token";
const ENROLL_TOKEN: &str = "loadtest-enroll-token";
const METRIC: &str = "load.score";
/// A fake host's long poll, as long as a real worker's (`--claim-wait-secs`, default 20):
/// idle hosts then cost the server what idle real hosts cost it.
const CLAIM_WAIT_SECS: u64 = 20;

#[derive(Debug, Clone, clap::Args)]
pub struct LoadtestArgs {
    /// Candidates of the large range.
    #[arg(long, default_value_t = 100_000)]
    pub large_commits: usize,
    /// Fake hosts working the large bisect.
    #[arg(long, default_value_t = 64)]
    pub large_hosts: usize,
    /// Candidates of each small range (alone and fleet).
    #[arg(long, default_value_t = 499)]
    pub small_commits: usize,
    /// Fake hosts of the fleet.
    #[arg(long, default_value_t = 1000)]
    pub hosts: usize,
    /// Bisects of the fleet, all active at once.
    #[arg(long, default_value_t = 500)]
    pub bisects: usize,
    /// The fleet's hosts begin to poll at random instants over this long (0: all in the same
    /// instant). A lab's hosts do not: they come up one by one, and after a server restart
    /// the workers' jittered retries bring them back over seconds (`worker::client::retry`).
    #[arg(long, default_value_t = 1000)]
    pub start_spread_ms: u64,
    /// How long a fake benchmark run takes.
    #[arg(long, default_value_t = 20)]
    pub run_ms: u64,
    /// Bisects of the alone baseline, each alone with one host.
    #[arg(long, default_value_t = 200)]
    pub alone: usize,
    /// Alone bisects at a time, each in a host group of its own.
    #[arg(long, default_value_t = 20)]
    pub alone_lanes: usize,
    /// Bisects stored for the reads scenario.
    #[arg(long, default_value_t = 10_000)]
    pub stored: usize,
    /// Scenarios to run (large, alone, fleet, reads, faults).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "large,alone,fleet,reads,faults"
    )]
    pub only: Vec<String>,
    /// Where repositories, servers and their databases live (removed first).
    #[arg(long, default_value = ".perfbisect/loadtest")]
    pub dir: PathBuf,
    /// Use this PostgreSQL instead of an embedded cluster per scenario (a fresh database is
    /// expected; every scenario adds its rows).
    #[arg(long, env = "PERFBISECT_LOADTEST_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Give up on a scenario after this long.
    #[arg(long, default_value_t = 900)]
    pub limit_secs: u64,
}

impl LoadtestArgs {
    pub(crate) fn start_spread(&self) -> Duration {
        Duration::from_millis(self.start_spread_ms)
    }
}

/// Latencies of one kind of request.
#[derive(Default)]
pub(crate) struct Latencies(Mutex<Vec<Duration>>);

impl Latencies {
    pub(crate) fn add(&self, d: Duration) {
        self.0.lock().expect("latencies").push(d);
    }

    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        let mut v = self.0.lock().expect("latencies").clone();
        if v.is_empty() {
            return None;
        }
        v.sort();
        nearest_rank(&v, q)
    }

    fn len(&self) -> usize {
        self.0.lock().expect("latencies").len()
    }
}

/// Quantile `q` of `sorted` by nearest rank; None when it is empty.
fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).copied()
}

pub(crate) fn ms(d: Option<Duration>) -> String {
    d.map(|d| format!("{:.1} ms", d.as_secs_f64() * 1000.0))
        .unwrap_or_else(|| "-".into())
}

/// A generated linear repository: tags `good` and `bad`, candidates in order.
pub(crate) struct Repo {
    pub(crate) path: PathBuf,
    /// sha → position (1-based candidate number; the good commit is 0).
    pub(crate) index: HashMap<String, usize>,
    pub(crate) planted: usize,
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .with_context(|| format!("running git {args:?}"))?;
    if !out.status.success() {
        bail!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// `commits` candidates on top of a good commit, by `git fast-import` (seconds for 100,000).
pub(crate) fn generate(path: &Path, commits: usize) -> anyhow::Result<Repo> {
    std::fs::create_dir_all(path)?;
    git(path, &["init", "-q", "--bare", "-b", "main"])?;
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(path)
        .stdin(Stdio::piped())
        .spawn()
        .context("starting git fast-import")?;
    {
        let mut w = std::io::BufWriter::new(child.stdin.take().context("fast-import stdin")?);
        for i in 0..=commits {
            let msg = format!("commit {i}\n");
            let content = format!("{i}\n");
            writeln!(w, "commit refs/heads/main\nmark :{}", i + 1)?;
            writeln!(
                w,
                "committer Load Test <load@example.invalid> {} +0000",
                1_700_000_000 + i
            )?;
            write!(w, "data {}\n{msg}", msg.len())?;
            if i > 0 {
                writeln!(w, "from :{i}")?;
            }
            write!(w, "M 644 inline n\ndata {}\n{content}\n", content.len())?;
        }
        write!(
            w,
            "reset refs/tags/good\nfrom :1\n\nreset refs/tags/bad\nfrom :{}\n\n",
            commits + 1
        )?;
        w.flush()?;
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("git fast-import failed: {status}");
    }
    let list = git(path, &["rev-list", "--reverse", "good..bad"])?;
    let mut index = HashMap::new();
    index.insert(git(path, &["rev-parse", "good"])?.trim().to_string(), 0);
    for (i, sha) in list.lines().enumerate() {
        index.insert(sha.to_string(), i + 1);
    }
    Ok(Repo {
        path: path.to_path_buf(),
        index,
        planted: commits * 37 / 100 + 1,
    })
}

fn job(group: &str) -> String {
    format!(
        "testcase: load\ntbox_group: {group}\nruns_per_task: 3\nbuild: {{command: 'true'}}\nrun: {{command: 'true'}}\n"
    )
}

/// A value of the metric at candidate `i`: 100, or 105 from the planted commit on, with 1 %
/// gaussian noise.
fn sample(i: usize, planted: usize) -> f64 {
    let (u1, u2): (f64, f64) = (rand::random::<f64>().max(1e-12), rand::random());
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    let level = if i >= planted { 105.0 } else { 100.0 };
    level * (1.0 + 0.01 * z)
}

/// Shared by the fake hosts of one scenario.
pub(crate) struct Fleet {
    /// The replicas' base URLs: each host starts at one (its index's) and turns to the next
    /// when a request cannot reach it, as a worker given several servers does.
    bases: Vec<String>,
    http: reqwest::Client,
    run: Duration,
    stop: AtomicBool,
    upload: Latencies,
    complete: Latencies,
    repos: Vec<Arc<Repo>>,
    errors: Mutex<Vec<String>>,
    /// `/metrics` as it was `START_UP` after the hosts began to poll.
    early: Mutex<Option<String>>,
    /// Every run upload a server acknowledged: (task, iteration).
    pub(crate) acked: Mutex<HashSet<(i64, u32)>>,
    /// Requests that could not reach their replica and were sent again, to the next one.
    pub(crate) failovers: AtomicUsize,
}

/// The hosts' start: all of them poll at once, and every task then ends at about the same
/// time. The fleet's claims are also shown without what this start observed.
const START_UP: Duration = Duration::from_secs(10);

impl Fleet {
    fn new(base: &str, run: Duration, repos: Vec<Arc<Repo>>) -> Arc<Fleet> {
        Self::with_bases(vec![base.to_string()], run, repos)
    }

    pub(crate) fn with_bases(
        bases: Vec<String>,
        run: Duration,
        repos: Vec<Arc<Repo>>,
    ) -> Arc<Fleet> {
        Arc::new(Fleet {
            bases,
            // Through the worker's TLS setup: it installs the rustls provider clients need.
            http: perfbisect_worker::tls::client_builder(None)
                .expect("no CA file to read")
                .timeout(Duration::from_secs(120))
                .pool_max_idle_per_host(2048)
                .build()
                .expect("HTTP client"),
            run,
            stop: AtomicBool::new(false),
            upload: Latencies::default(),
            complete: Latencies::default(),
            repos,
            errors: Mutex::default(),
            early: Mutex::default(),
            acked: Mutex::default(),
            failovers: AtomicUsize::new(0),
        })
    }

    /// Sends the request `build` makes for a base URL, from the host's replica `at`; when
    /// the replica cannot be reached (refused, or the connection dropped mid-request), the
    /// next replica, a few rounds at most.
    async fn send(
        &self,
        at: &mut usize,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> reqwest::Result<reqwest::Response> {
        let tries = 3 * self.bases.len();
        let mut attempt = 0;
        loop {
            match build(&self.bases[*at % self.bases.len()]).send().await {
                Err(e) if !e.is_timeout() && attempt + 1 < tries => {
                    attempt += 1;
                    *at = (*at + 1) % self.bases.len();
                    self.failovers.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                r => return r,
            }
        }
    }

    fn error(&self, e: String) {
        let mut errors = self.errors.lock().expect("errors");
        if errors.len() < 20 {
            errors.push(e);
        }
    }

    fn position(&self, sha: &str) -> Option<(usize, usize)> {
        self.repos
            .iter()
            .find_map(|r| r.index.get(sha).map(|i| (*i, r.planted)))
    }
}

async fn register(fleet: &Fleet, name: &str, group: &str) -> anyhow::Result<String> {
    let reply: serde_json::Value = fleet
        .http
        .post(format!("{}/api/v1/worker/register", fleet.bases[0]))
        .bearer_auth(ENROLL_TOKEN)
        .json(&serde_json::json!({"name": name, "host_group": group}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(reply["token"]
        .as_str()
        .context("register answered no token")?
        .to_string())
}

/// One fake host until the fleet stops; `at`: the replica it talks to first.
async fn host(fleet: Arc<Fleet>, token: String, name: String, mut at: usize) {
    while !fleet.stop.load(Ordering::Relaxed) {
        let resp = fleet
            .send(&mut at, |base| {
                fleet
                    .http
                    .post(format!("{base}/api/v1/worker/claim"))
                    .bearer_auth(&token)
                    .json(&serde_json::json!({"wait_secs": CLAIM_WAIT_SECS}))
            })
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                fleet.error(format!("claim: {e}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if resp.status() == reqwest::StatusCode::NO_CONTENT {
            continue;
        }
        let task: TaskAssignment = match resp.error_for_status() {
            Ok(r) => match r.json().await {
                Ok(t) => t,
                Err(e) => {
                    fleet.error(format!("claim body: {e}"));
                    continue;
                }
            },
            Err(e) => {
                fleet.error(format!("claim: {e}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        work(&fleet, &token, &name, task, &mut at).await;
    }
}

async fn work(fleet: &Fleet, token: &str, name: &str, task: TaskAssignment, at: &mut usize) {
    let iterations = if task.pair_sha.is_some() {
        task.runs * 2
    } else {
        task.runs
    };
    for it in 0..iterations {
        if task.done_iterations.contains(&it) {
            continue;
        }
        let sha = match &task.pair_sha {
            Some(p) if it % 2 == 1 => p.clone(),
            _ => task.sha.clone(),
        };
        let Some((i, planted)) = fleet.position(&sha) else {
            fleet.error(format!("task {} names unknown commit {sha}", task.task_id));
            return;
        };
        tokio::time::sleep(fleet.run).await;
        let now = chrono::Utc::now();
        let body = serde_json::json!({
            "iteration": it, "sha": sha, "completed": true,
            "metrics": {METRIC: sample(i, planted)},
            "started_at": now, "finished_at": now,
            "environment": {"host": name},
        });
        let started = Instant::now();
        let r = fleet
            .send(at, |base| {
                fleet
                    .http
                    .post(format!("{base}/api/v1/worker/tasks/{}/runs", task.task_id))
                    .bearer_auth(token)
                    .json(&body)
            })
            .await;
        fleet.upload.add(started.elapsed());
        match r {
            Ok(r) if r.status().is_success() => {
                fleet
                    .acked
                    .lock()
                    .expect("acked")
                    .insert((task.task_id, it));
            }
            // The bisect ended or the task was taken away: stop, as a worker would.
            Ok(r) if r.status() == reqwest::StatusCode::CONFLICT => return,
            Ok(r) => {
                fleet.error(format!("upload: {}", r.status()));
                return;
            }
            Err(e) => {
                fleet.error(format!("upload: {e}"));
                return;
            }
        }
    }
    let started = Instant::now();
    let r = fleet
        .send(at, |base| {
            fleet
                .http
                .post(format!(
                    "{base}/api/v1/worker/tasks/{}/complete",
                    task.task_id
                ))
                .bearer_auth(token)
                .json(&serde_json::json!({"outcome": "done"}))
        })
        .await;
    fleet.complete.add(started.elapsed());
    match r {
        Ok(r) if r.status().is_success() || r.status() == reqwest::StatusCode::CONFLICT => {}
        Ok(r) => fleet.error(format!("complete: {}", r.status())),
        Err(e) => fleet.error(format!("complete: {e}")),
    }
}

/// A server process on its own port and data directory.
pub(crate) struct Server {
    pub(crate) process: Process,
    pub(crate) api: Api,
}

pub(crate) async fn server(args: &LoadtestArgs, name: &str) -> anyhow::Result<Server> {
    server_with_env(args, name, &[]).await
}

/// A server started with these environment settings (`PERFBISECT_…`) beside the defaults.
pub(crate) async fn server_with_env(
    args: &LoadtestArgs,
    name: &str,
    env: &[(&str, String)],
) -> anyhow::Result<Server> {
    let dir = args.dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let port = free_port()?;
    let exe = std::env::current_exe()?;
    let mut cmd = server_command(
        &exe,
        &dir,
        port,
        API_TOKEN,
        ENROLL_TOKEN,
        args.database_url.as_deref(),
        60,
    );
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let mut process = Process::spawn("server", cmd, &dir.join("server.log"))?;
    let api = Api::new(&format!("http://127.0.0.1:{port}"), Some(API_TOKEN.into()));
    wait_healthy(&api, &mut process, Duration::from_secs(120)).await?;
    Ok(Server { process, api })
}

fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// A histogram as `/metrics` shows it: cumulative buckets (upper bound, count), sum, count.
#[derive(Debug, Clone, Default)]
struct Hist {
    buckets: Vec<(f64, u64)>,
    sum: f64,
    count: u64,
}

impl Hist {
    fn parse(text: &str, name: &str) -> anyhow::Result<Hist> {
        let mut h = Hist::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix(&format!("perfbisect_{name}_bucket{{le=\"")) {
                let (le, n) = rest.split_once("\"} ").context("bucket line")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse()?
                };
                h.buckets.push((le, n.trim().parse()?));
            } else if let Some(v) = line.strip_prefix(&format!("perfbisect_{name}_sum ")) {
                h.sum = v.trim().parse()?;
            } else if let Some(v) = line.strip_prefix(&format!("perfbisect_{name}_count ")) {
                h.count = v.trim().parse()?;
            }
        }
        Ok(h)
    }

    /// What was observed since `earlier` (a scrape of the same histogram).
    fn since(&self, earlier: &Hist) -> Hist {
        Hist {
            buckets: self
                .buckets
                .iter()
                .map(|&(le, n)| {
                    let before = earlier
                        .buckets
                        .iter()
                        .find(|b| b.0 == le)
                        .map_or(0, |b| b.1);
                    (le, n.saturating_sub(before))
                })
                .collect(),
            sum: self.sum - earlier.sum,
            count: self.count.saturating_sub(earlier.count),
        }
    }

    /// Quantile `q` (the upper bound of the bucket it falls in).
    fn quantile(&self, q: f64) -> Option<f64> {
        let want = ((self.count as f64 * q).ceil() as u64).max(1);
        self.buckets.iter().find(|(_, n)| *n >= want).map(|b| b.0)
    }

    /// How many observations exceeded `bound` (exact when `bound` is a bucket's bound:
    /// the server's histograms have one at each target, `metrics::recorded`).
    fn over(&self, bound: f64) -> Option<u64> {
        self.buckets
            .iter()
            .find(|b| b.0 == bound)
            .map(|b| self.count.saturating_sub(b.1))
    }

    fn mean(&self) -> f64 {
        if self.count > 0 {
            self.sum / self.count as f64
        } else {
            0.0
        }
    }

    /// "p99 <= …, (p50 <= …, p90 <= …), mean …".
    fn describe(&self) -> String {
        let bucket = |v: Option<f64>| {
            v.map(|v| format!("{:.1} ms", v * 1000.0))
                .unwrap_or("-".into())
        };
        format!(
            "p99 <= {} (p50 <= {}, p90 <= {}), mean {:.1} ms",
            bucket(self.quantile(0.99)),
            bucket(self.quantile(0.5)),
            bucket(self.quantile(0.9)),
            self.mean() * 1000.0
        )
    }
}

async fn metrics_text(api: &Api) -> anyhow::Result<String> {
    Ok(reqwest::get(format!("{}/metrics", api.base()))
        .await?
        .text()
        .await?)
}

/// Quantile `q` of a histogram in `/metrics` (the upper bound of the bucket it falls in),
/// with the mean and the count.
async fn histogram(api: &Api, name: &str, q: f64) -> anyhow::Result<(Option<f64>, f64, u64)> {
    let h = Hist::parse(&metrics_text(api).await?, name)?;
    Ok((h.quantile(q), h.mean(), h.count))
}

pub(crate) async fn submit(api: &Api, repo: &str, group: &str) -> anyhow::Result<(i64, Duration)> {
    let started = Instant::now();
    let b = api
        .submit(&SubmitBisect {
            repository: repo.into(),
            good: "good".into(),
            bad: "bad".into(),
            job: job(group),
            metric: METRIC.into(),
            direction: None,
            magnitude_pct: None,
            confidence: None,
            max_runs: Some(2000),
            notify: vec![],
            use_merge_base: false,
            first_parent: false,
        })
        .await?;
    Ok((b.id, started.elapsed()))
}

/// Registers `n` hosts of `group`: (token, name) of each.
pub(crate) async fn register_hosts(
    fleet: &Arc<Fleet>,
    n: usize,
    group: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut hosts = Vec::new();
    for i in 0..n {
        let name = format!("{group}-{i}");
        hosts.push((register(fleet, &name, group).await?, name));
    }
    Ok(hosts)
}

/// Starts registered hosts polling.
///
/// Each host's first poll comes at a random instant within `spread` of the call (all at
/// once when it is zero).
pub(crate) fn spawn_hosts(
    fleet: &Arc<Fleet>,
    hosts: Vec<(String, String)>,
    spread: Duration,
) -> Vec<tokio::task::JoinHandle<()>> {
    hosts
        .into_iter()
        .enumerate()
        .map(|(i, (token, name))| {
            let (fleet, start) = (fleet.clone(), spread.mul_f64(rand::random::<f64>()));
            tokio::spawn(async move {
                tokio::time::sleep(start).await;
                host(fleet, token, name, i).await
            })
        })
        .collect()
}

async fn start_hosts(
    fleet: &Arc<Fleet>,
    n: usize,
    group: &str,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    Ok(spawn_hosts(
        fleet,
        register_hosts(fleet, n, group).await?,
        Duration::ZERO,
    ))
}

pub(crate) async fn stop_hosts(fleet: &Fleet, handles: Vec<tokio::task::JoinHandle<()>>) {
    fleet.stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.await;
    }
}

/// Waits until every bisect ended; the bisects' final views.
pub(crate) async fn wait_all(
    api: &Api,
    ids: &[i64],
    limit: Duration,
    mut tick: impl FnMut(),
) -> anyhow::Result<Vec<perfbisect_wire::api::Bisect>> {
    let started = Instant::now();
    let mut done: HashMap<i64, perfbisect_wire::api::Bisect> = HashMap::new();
    while done.len() < ids.len() {
        tick();
        // The list (a summary per bisect) tells which ended; those are read in full once.
        let mut ended = Vec::new();
        let mut offset = 0;
        loop {
            let page: perfbisect_wire::api::BisectList = reqwest::get(format!(
                "{}/api/v1/bisects?limit=500&offset={offset}",
                api.base()
            ))
            .await?
            .error_for_status()?
            .json()
            .await?;
            let n = page.bisects.len();
            ended.extend(
                page.bisects
                    .into_iter()
                    .filter(|b| perfbisect_wire::api::status_is_final(&b.status))
                    .map(|b| b.id),
            );
            offset += 500;
            if n < 500 {
                break;
            }
        }
        for id in ended {
            if ids.contains(&id) && !done.contains_key(&id) {
                done.insert(id, api.bisect(id).await?);
            }
        }
        if started.elapsed() > limit {
            bail!(
                "{} of {} bisects did not end within {limit:?}",
                ids.len() - done.len(),
                ids.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(ids
        .iter()
        .map(|id| done.remove(id).expect("ended"))
        .collect())
}

pub(crate) fn report_errors(fleet: &Fleet) {
    let errors = fleet.errors.lock().expect("errors");
    if !errors.is_empty() {
        println!("  protocol errors (first {}): {:?}", errors.len(), *errors);
    }
}

async fn large(args: &LoadtestArgs) -> anyhow::Result<()> {
    println!(
        "== large: one bisect of {} candidates, {} fake hosts",
        args.large_commits, args.large_hosts
    );
    let t = Instant::now();
    let repo = Arc::new(generate(&args.dir.join("large.git"), args.large_commits)?);
    println!(
        "  repository generated with git fast-import in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Every fake host is to work this one bisect: the per-bisect cap is lifted to their number.
    let cap = [(
        "PERFBISECT_MAX_HOSTS_PER_BISECT",
        args.large_hosts.to_string(),
    )];
    let mut s = server_with_env(args, "server-large", &cap).await?;
    let pid = s.process.pid().context("server pid")?;
    s.api
        .add_repository("large", &repo.path.display().to_string())
        .await?;
    let rss_idle = rss_mb(pid).unwrap_or(0.0);
    let t = Instant::now();
    let out = Command::new("git")
        .args(["rev-list", "--bisect-all", "good..bad"])
        .current_dir(&repo.path)
        .stdout(Stdio::null())
        .status()?;
    let git_time = t.elapsed();
    anyhow::ensure!(out.success(), "git rev-list --bisect-all failed");
    let (id, submit_time) = submit(&s.api, "large", "large").await?;
    let t = Instant::now();
    let out = Command::new("git")
        .args(["rev-list", "--bisect-all", "good..bad"])
        .current_dir(&repo.path)
        .stdout(Stdio::null())
        .status()?;
    let git_time2 = t.elapsed();
    anyhow::ensure!(out.success(), "git rev-list --bisect-all failed");
    let git_time = git_time.min(git_time2);
    println!(
        "  submit {:.2} s; git rev-list --bisect-all {:.2} s (best of 2, same run): {:.2}x   [target <= 1x]",
        submit_time.as_secs_f64(),
        git_time.as_secs_f64(),
        submit_time.as_secs_f64() / git_time.as_secs_f64()
    );
    let fleet = Fleet::new(
        s.api.base(),
        Duration::from_millis(args.run_ms),
        vec![repo.clone()],
    );
    let hosts = start_hosts(&fleet, args.large_hosts, "large").await?;
    let mut rss_max = rss_idle;
    let started = Instant::now();
    let done = wait_all(&s.api, &[id], Duration::from_secs(args.limit_secs), || {
        rss_max = rss_max.max(rss_mb(pid).unwrap_or(0.0));
    })
    .await;
    stop_hosts(&fleet, hosts).await;
    let done = done?;
    let b = &done[0];
    let found = b
        .culprit
        .as_ref()
        .map(|c| repo.index.get(&c.commit.sha).copied());
    println!(
        "  bisect {}: {} after {:.1} s, {} runs; culprit at {:?}, planted at {}",
        b.id,
        b.status,
        started.elapsed().as_secs_f64(),
        b.runs_done,
        found.flatten(),
        repo.planted
    );
    println!(
        "  upload p99 {} (p50 {}, n {}); complete p99 {} (p50 {}, n {})   [target p99 <= 100 ms]",
        ms(fleet.upload.quantile(0.99)),
        ms(fleet.upload.quantile(0.5)),
        fleet.upload.len(),
        ms(fleet.complete.quantile(0.99)),
        ms(fleet.complete.quantile(0.5)),
        fleet.complete.len()
    );
    // The same latencies as the server measured them (handler entry to answer, bucketed):
    // what is not in them is the HTTP exchange and this process's own scheduling.
    let bucket = |v: Option<f64>| {
        v.map(|v| format!("{:.0} ms", v * 1000.0))
            .unwrap_or("-".into())
    };
    let (up99, _, _) = histogram(&s.api, "upload_seconds", 0.99).await?;
    let (up50, _, _) = histogram(&s.api, "upload_seconds", 0.5).await?;
    let (co99, _, _) = histogram(&s.api, "complete_seconds", 0.99).await?;
    println!(
        "  in the server: upload p50 <= {}, p99 <= {}; complete p99 <= {}",
        bucket(up50),
        bucket(up99),
        bucket(co99)
    );
    let (p99, mean, n) = histogram(&s.api, "advance_seconds", 0.99).await?;
    let (p50, _, _) = histogram(&s.api, "advance_seconds", 0.5).await?;
    println!(
        "  scheduling round: mean {:.1} ms, p50 <= {}, p99 <= {} over {n} rounds   [target <= 50 ms]",
        mean * 1000.0,
        p50.map(|v| format!("{:.0} ms", v * 1000.0))
            .unwrap_or("-".into()),
        p99.map(|v| format!("{:.0} ms", v * 1000.0))
            .unwrap_or("-".into()),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_after = rss_mb(pid).unwrap_or(0.0);
    println!(
        "  server RSS: {rss_idle:.0} MB before, {rss_max:.0} MB at most during, {rss_after:.0} MB after   [target <= 200 MB per large bisect, returned after]"
    );
    report_errors(&fleet);
    s.process.stop(Duration::from_secs(30));
    Ok(())
}

/// Runs `count` bisects of the small range with `hosts` hosts; (runs of each, fleet).
pub(crate) async fn small(
    args: &LoadtestArgs,
    name: &str,
    count: usize,
    hosts: usize,
) -> anyhow::Result<(
    Vec<perfbisect_wire::api::Bisect>,
    Arc<Fleet>,
    Server,
    Duration,
)> {
    let repo = Arc::new(generate(
        &args.dir.join(format!("{name}.git")),
        args.small_commits,
    )?);
    let s = server(args, &format!("server-{name}")).await?;
    s.api
        .add_repository(name, &repo.path.display().to_string())
        .await?;
    let fleet = Fleet::new(
        s.api.base(),
        Duration::from_millis(args.run_ms),
        vec![repo.clone()],
    );
    // Every bisect is active before the hosts poll: the fleet is measured as "this many hosts
    // shared by this many bisects", not as the first few bisects alone with every host.
    let registered = register_hosts(&fleet, hosts, name).await?;
    let mut ids = Vec::new();
    for _ in 0..count {
        ids.push(submit(&s.api, name, name).await?.0);
    }
    // Each submit shrinks the others' shares and wakes them, so the scheduler is still
    // answering those wake-ups when the last submit returns: the hosts start once it is done,
    // to measure a lab whose bisects are planned (a start amid the planning is what the
    // claim p99 measured before: the same burst, fighting the scheduler for the cores).
    let submitted = Instant::now();
    settle(&s.api, Duration::from_secs(args.limit_secs)).await?;
    if count > 1 {
        println!(
            "  the scheduler answered the submits' wake-ups {:.1} s after the last submit; the hosts start now, each at a random instant within {} ms (--start-spread-ms)",
            submitted.elapsed().as_secs_f64(),
            args.start_spread_ms
        );
    }
    let started = Instant::now();
    let handles = spawn_hosts(&fleet, registered, args.start_spread());
    let early = {
        let (fleet, api) = (fleet.clone(), s.api.clone());
        tokio::spawn(async move {
            tokio::time::sleep(START_UP).await;
            if let Ok(text) = metrics_text(&api).await {
                *fleet.early.lock().expect("early") = Some(text);
            }
        })
    };
    let done = wait_all(&s.api, &ids, Duration::from_secs(args.limit_secs), || {}).await;
    early.abort();
    let took = started.elapsed();
    stop_hosts(&fleet, handles).await;
    let done = done?;
    print_ended(&done, &repo, took);
    Ok((done, fleet, s, took))
}

/// Waits until the server's scheduler has no wake-up left to answer (`/metrics`).
async fn settle(api: &Api, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let text = metrics_text(api).await?;
        let pending = text
            .lines()
            .find_map(|l| l.strip_prefix("perfbisect_scheduler_wakeups "))
            .and_then(|n| n.trim().parse::<f64>().ok())
            .context("/metrics has no perfbisect_scheduler_wakeups")?;
        if pending == 0.0 {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "the scheduler still had {pending} wake-ups after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Prints how many of `done` ended in `took` and how many missed `repo`'s planted commit.
pub(crate) fn print_ended(done: &[perfbisect_wire::api::Bisect], repo: &Repo, took: Duration) {
    let wrong = done
        .iter()
        .filter(|b| {
            b.culprit
                .as_ref()
                .and_then(|c| repo.index.get(&c.commit.sha))
                != Some(&repo.planted)
        })
        .count();
    // One step is planted: a second change named beside it is a false report that would
    // be mailed, even when the first culprit is right.
    let extra = done
        .iter()
        .filter(|b| {
            b.findings
                .as_ref()
                .is_some_and(|f| f.changes.len() > 1 || f.more_than_one_change)
        })
        .count();
    println!(
        "  {} bisects ended in {:.1} s; {} did not name the planted commit; {} named more than one change   [target 0 and 0]",
        done.len(),
        took.as_secs_f64(),
        wrong,
        extra
    );
}

async fn fleet(args: &LoadtestArgs, alone: Option<Runs>) -> anyhow::Result<()> {
    println!(
        "== fleet: {} bisects of {} candidates, {} fake hosts",
        args.bisects, args.small_commits, args.hosts
    );
    let (done, fleet, mut s, _) = small(args, "fleet", args.bisects, args.hosts).await?;
    let runs = Runs::of(done.iter().map(|b| b.runs_done).collect());
    let text = metrics_text(&s.api).await?;
    let early = fleet.early.lock().expect("early").clone();
    let parts = [
        ("claim_seconds", "claim"),
        ("claim_acquire_seconds", "  of which connection wait:"),
        ("claim_statement_seconds", "  of which statement:"),
    ];
    for (name, what) in parts {
        let h = Hist::parse(&text, name)?;
        if name == "claim_seconds" {
            println!(
                "  claim {} over {} claims (server side: connection wait and statement, not the long-poll wait)   [target <= 50 ms]",
                h.describe(),
                h.count
            );
            // The margin the p99 has: 1% of the claims may take longer than the target.
            if let Some(over) = h.over(0.05) {
                println!(
                    "  claims over 50 ms: {over} ({:.2}%; 1% would be {})",
                    over as f64 * 100.0 / h.count.max(1) as f64,
                    h.count / 100
                );
            }
        } else {
            println!("  {what} {}", h.describe());
        }
    }
    // The same without the start, when every host polled at once (each part on its own).
    if let Some(early) = &early {
        // What shared the machine with the first claims: every host's first task at once,
        // then their runs' uploads.
        let during = |name: &str| -> anyhow::Result<Hist> { Hist::parse(early, name) };
        let (claims, uploads, completes) = (
            during("claim_seconds")?,
            during("upload_seconds")?,
            during("complete_seconds")?,
        );
        println!(
            "  in the first {} s: {} claims, {} run uploads (upload {}), {} completes",
            START_UP.as_secs(),
            claims.count,
            uploads.count,
            uploads.describe(),
            completes.count
        );
        for (name, what) in parts {
            let h = Hist::parse(&text, name)?.since(&Hist::parse(early, name)?);
            println!(
                "  {} after the first {} s: {} over {} claims",
                what.trim(),
                START_UP.as_secs(),
                h.describe(),
                h.count
            );
        }
        // The writes of a task's end, once the start's burst is over (in the server).
        let after = |name: &str| -> anyhow::Result<Hist> {
            Ok(Hist::parse(&text, name)?.since(&Hist::parse(early, name)?))
        };
        let (uploads, completes) = (after("upload_seconds")?, after("complete_seconds")?);
        println!(
            "  in the server after the first {} s: upload {} over {} uploads; complete {} over {} completes",
            START_UP.as_secs(),
            uploads.describe(),
            uploads.count,
            completes.describe(),
            completes.count
        );
    }
    let mut expired = 0;
    for b in &done {
        let events: serde_json::Value =
            reqwest::get(format!("{}/api/v1/bisects/{}/events", s.api.base(), b.id))
                .await?
                .json()
                .await?;
        expired += events
            .as_array()
            .map(|e| e.iter().filter(|e| e["kind"] == "lease_expired").count())
            .unwrap_or(0);
    }
    println!("  lease expiries (no fake host ever dies): {expired}   [target 0]");
    println!("  runs per bisect: {}", runs.describe());
    if let Some(alone) = alone {
        // The ratio's own uncertainty, from both means' standard errors (a first-order
        // propagation): a baseline too small to tell 1.1x from 1.3x shows it here.
        let ratio = runs.mean() / alone.mean();
        let spread = ratio
            * ((runs.se() / runs.mean()).powi(2) + (alone.se() / alone.mean()).powi(2)).sqrt();
        println!(
            "  runs per bisect against alone with one host: {:.1} / {:.1} = {ratio:.2}x ± {spread:.2}   [target <= 1.2x]",
            runs.mean(),
            alone.mean()
        );
    }
    println!(
        "  upload p99 {}, complete p99 {}",
        ms(fleet.upload.quantile(0.99)),
        ms(fleet.complete.quantile(0.99))
    );
    // Reads with every bisect stored.
    for path in ["/bisects", "/api/v1/bisects"] {
        let lat = Latencies::default();
        for _ in 0..40 {
            let t = Instant::now();
            reqwest::get(format!("{}{path}", s.api.base()))
                .await?
                .error_for_status()?
                .bytes()
                .await?;
            lat.add(t.elapsed());
        }
        println!(
            "  GET {path} with {} bisects stored: p50 {}   [target p50 <= 20 ms with 10,000 stored]",
            done.len(),
            ms(lat.quantile(0.5))
        );
    }
    report_errors(&fleet);
    s.process.stop(Duration::from_secs(30));
    Ok(())
}

/// Mean runs of `--alone` bisects of the small range, each alone with one host.
///
/// `--alone-lanes` bisects run at a time, each in a host group of its own with one host, so
/// each is still alone with one host (its share is that host) while the baseline takes a
/// lane's share of the time. The baseline needs its hundreds: a bisect's runs have a long
/// right tail (most take 25–27, a few in a hundred 50–110 when the one-change check reads a
/// chance difference as a second step), and a mean of 20 missed it in most
/// runs (20-bisect means of 25.4–27.2 against the fleet's 500).
async fn alone(args: &LoadtestArgs) -> anyhow::Result<Runs> {
    let lanes = args.alone_lanes.clamp(1, args.alone.max(1));
    println!(
        "== alone: {} bisects of {} candidates, {lanes} at a time, each alone in a group of one fake host",
        args.alone, args.small_commits
    );
    let repo = Arc::new(generate(&args.dir.join("alone.git"), args.small_commits)?);
    let mut s = server(args, "server-alone").await?;
    s.api
        .add_repository("alone", &repo.path.display().to_string())
        .await?;
    let fleet = Fleet::new(
        s.api.base(),
        Duration::from_millis(args.run_ms),
        vec![repo.clone()],
    );
    let mut hosts = Vec::new();
    for lane in 0..lanes {
        hosts.extend(start_hosts(&fleet, 1, &format!("alone-{lane}")).await?);
    }
    let (left, started) = (
        Arc::new(AtomicUsize::new(args.alone.max(1))),
        Instant::now(),
    );
    let limit = Duration::from_secs(args.limit_secs);
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let (api, left) = (s.api.clone(), left.clone());
        tasks.spawn(async move {
            let group = format!("alone-{lane}");
            let mut ended = Vec::new();
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                let id = submit(&api, "alone", &group).await?.0;
                ended.extend(wait_all(&api, &[id], limit, || {}).await?);
            }
            anyhow::Ok(ended)
        });
    }
    let mut ended = Vec::new();
    while let Some(lane) = tasks.join_next().await {
        ended.extend(lane??);
    }
    stop_hosts(&fleet, hosts).await;
    print_ended(&ended, &repo, started.elapsed());
    let runs = Runs::of(ended.iter().map(|b| b.runs_done).collect());
    println!("  runs: {}", runs.describe());
    report_errors(&fleet);
    s.process.stop(Duration::from_secs(30));
    Ok(runs)
}

/// Runs per bisect over a set of bisects.
struct Runs(Vec<usize>);

impl Runs {
    fn of(mut runs: Vec<usize>) -> Runs {
        runs.sort_unstable();
        Runs(runs)
    }

    fn mean(&self) -> f64 {
        self.0.iter().sum::<usize>() as f64 / self.0.len().max(1) as f64
    }

    /// The standard error of the mean.
    fn se(&self) -> f64 {
        let n = self.0.len() as f64;
        if n < 2.0 {
            return 0.0;
        }
        let m = self.mean();
        let var = self.0.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (n - 1.0);
        (var / n).sqrt()
    }

    fn quantile(&self, q: f64) -> usize {
        nearest_rank(&self.0, q).unwrap_or(0)
    }

    fn describe(&self) -> String {
        format!(
            "mean {:.1} ± {:.1} (standard error) over {} bisects; p50 {}, p90 {}, p99 {}, max {}",
            self.mean(),
            self.se(),
            self.0.len(),
            self.quantile(0.5),
            self.quantile(0.9),
            self.quantile(0.99),
            self.quantile(1.0)
        )
    }
}

pub async fn run(args: LoadtestArgs) -> anyhow::Result<()> {
    if args.dir.exists() {
        std::fs::remove_dir_all(&args.dir)
            .with_context(|| format!("removing {}", args.dir.display()))?;
    }
    std::fs::create_dir_all(&args.dir)?;
    let args = LoadtestArgs {
        dir: std::fs::canonicalize(&args.dir)?,
        ..args
    };
    let wants = |s: &str| args.only.iter().any(|o| o == s);
    if wants("large") {
        large(&args).await?;
    }
    let alone = if wants("alone") {
        Some(alone(&args).await?)
    } else {
        None
    };
    if wants("fleet") {
        fleet(&args, alone).await?;
    }
    if wants("reads") {
        crate::loadtest_reads::run(&args).await?;
    }
    if wants("faults") {
        crate::loadtest_faults::run(&args).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim line's figures read from `/metrics` text: the p99's bucket and the count
    /// over the target's bound.
    #[test]
    fn a_histogram_from_metrics_gives_its_p99_bucket_and_the_count_over_a_bound() {
        let text = "\
perfbisect_claim_seconds_bucket{le=\"0.01\"} 950
perfbisect_claim_seconds_bucket{le=\"0.05\"} 992
perfbisect_claim_seconds_bucket{le=\"0.1\"} 999
perfbisect_claim_seconds_bucket{le=\"+Inf\"} 1000
perfbisect_claim_seconds_sum 9.5
perfbisect_claim_seconds_count 1000
";
        let h = Hist::parse(text, "claim_seconds").unwrap();
        assert_eq!(h.quantile(0.99), Some(0.05));
        assert_eq!(h.quantile(0.999), Some(0.1));
        assert_eq!(h.over(0.05), Some(8));
        assert_eq!(h.over(0.02), None, "0.02 is no bucket's bound");
        assert!((h.mean() - 0.0095).abs() < 1e-12);
    }
}
