//! `perfbisect demo`: the whole service on one machine, on a generated repository.
//!
//! Starts the server (with its embedded PostgreSQL) and two workers as real processes,
//! generates an example repository with a planted change, submits the bisect through the
//! REST API, shows progress, and prints the culprit with its per-commit numbers.

use crate::api::{Api, progress_line, render};
use crate::example::{self, ExampleOptions};
use crate::processes::{Process, free_port};
use anyhow::{Context, bail};
use perfbisect_wire::api::{SubmitBisect, status_is_final};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Where the demo keeps its server data, workers and example repository.
    #[arg(long, default_value = ".perfbisect/demo")]
    pub dir: PathBuf,
    /// Commits in the example range.
    #[arg(long, default_value_t = 240)]
    pub commits: usize,
    /// Planted change, in percent; negative for a regression (`--change-pct -8`).
    #[arg(long, default_value_t = 6.0, allow_negative_numbers = true)]
    pub change_pct: f64,
    /// Noise of the benchmark (coefficient of variation, percent).
    #[arg(long, default_value_t = 3.0)]
    pub noise_pct: f64,
    /// Seed for the example history (random when not given).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Port for the server (a free one when not given).
    #[arg(long)]
    pub port: Option<u16>,
    /// Keep the server running after the bisect ends, until Ctrl-C.
    #[arg(long)]
    pub keep_running: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_secs: u64,
}

fn exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("finding the perfbisect executable")
}

/// Checks what the demo needs from the machine; says exactly what is missing.
fn preflight() -> anyhow::Result<()> {
    if perfbisect_server::pg::find_bin_dir().is_err() {
        bail!(
            "PostgreSQL is not installed: run `apt-get install -y postgresql` (the demo runs its own cluster)"
        );
    }
    if Command::new("cc").arg("--version").output().is_err() {
        bail!(
            "a C compiler is needed to build the example benchmark: run `apt-get install -y gcc`"
        );
    }
    Ok(())
}

/// Writes the demo's API token to `<dir>/api-token`, readable by its owner only, so the
/// dashboard and the CLI can submit and cancel while the demo keeps running.
pub fn write_token(dir: &std::path::Path, token: &str) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("api-token");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
    writeln!(f, "{token}")?;
    Ok(path)
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    preflight()?;
    std::fs::create_dir_all(&args.dir)?;
    let dir = args.dir.canonicalize()?;
    let port = match args.port {
        Some(p) => p,
        None => free_port()?,
    };
    let url = format!("http://127.0.0.1:{port}");
    let api_token = perfbisect_server::auth::new_token();
    let enroll_token = perfbisect_server::auth::new_token();

    let seed = args.seed.unwrap_or_else(rand::random);
    let opts = ExampleOptions {
        commits: args.commits,
        change: args.change_pct / 100.0,
        noise_cv: args.noise_pct / 100.0,
        seed,
        broken_commits: 2,
    };
    let ex = example::generate(&dir.join("example.git"), &opts)?;
    println!(
        "example repository: {} ({} commits, {} merges, change of {:+}% planted at {}, seed {seed})",
        ex.path.display(),
        ex.commits,
        ex.merges,
        args.change_pct,
        &ex.planted[..12]
    );

    let exe = exe()?;
    let mut server = start_server(&exe, &dir, port, &api_token, &enroll_token, None, 30)?;
    let api = Api::new(&url, Some(api_token.clone()));
    wait_healthy(&api, &mut server, Duration::from_secs(120)).await?;
    let mut workers = Vec::new();
    for i in 1..=2 {
        workers.push(start_worker(
            &exe,
            &dir,
            &url,
            &enroll_token,
            &format!("demo-worker-{i}"),
        )?);
    }
    println!("server: {url}  (logs in {})", dir.display());
    let token_file = write_token(&dir, &api_token)?;
    println!(
        "API token: {api_token}\n  (also in {}: paste it on the dashboard's Submit page, or\n   export PERFBISECT_SERVER={url} PERFBISECT_TOKEN=$(cat {}) for the CLI)",
        token_file.display(),
        token_file.display()
    );

    api.add_repository("example", &ex.path.display().to_string())
        .await?;
    let submitted = api
        .submit(&SubmitBisect {
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
        })
        .await?;
    println!(
        "submitted bisect {} over {} candidates",
        submitted.id, submitted.candidates_total
    );
    let done = tokio::select! {
        done = watch(&api, submitted.id, Duration::from_secs(args.timeout_secs)) => done?,
        _ = tokio::signal::ctrl_c() => bail!("interrupted; bisect {} left as it was", submitted.id),
    };
    println!("\n{}", render(&done));
    let found = done.culprit.as_ref().map(|c| c.commit.sha.as_str());
    let ok = found == Some(ex.planted.as_str());
    if ok {
        println!("the culprit is the planted commit {}", &ex.planted[..12]);
    } else {
        println!(
            "the planted commit was {}, the bisect says {:?}",
            ex.planted, found
        );
    }
    println!("\nAPI:        {url}/api/v1/bisects/{}", done.id);
    println!("dashboard:  {url}/");
    println!("OpenAPI:    {url}/docs");
    if args.keep_running {
        println!("\nserver and workers keep running; Ctrl-C stops them");
        tokio::signal::ctrl_c().await?;
    }
    // Workers first, so none is left polling a server that is gone.
    drop(workers);
    drop(server);
    if !ok {
        bail!("the demo did not find the planted commit");
    }
    Ok(())
}

/// Starts `perfbisect server` as a child process; logs go to `<dir>/server.log`.
pub fn start_server(
    exe: &Path,
    dir: &Path,
    port: u16,
    api_token: &str,
    enroll_token: &str,
    database_url: Option<&str>,
    lease_secs: u64,
) -> anyhow::Result<Process> {
    let cmd = server_command(
        exe,
        dir,
        port,
        api_token,
        enroll_token,
        database_url,
        lease_secs,
    );
    Ok(Process::spawn("server", cmd, &dir.join("server.log"))?)
}

/// The command `start_server` spawns, for callers that add settings of their own.
pub fn server_command(
    exe: &Path,
    dir: &Path,
    port: u16,
    api_token: &str,
    enroll_token: &str,
    database_url: Option<&str>,
    lease_secs: u64,
) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("server")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.join("server"))
        .env("PERFBISECT_API_TOKEN", api_token)
        .env("PERFBISECT_ENROLL_TOKEN", enroll_token)
        .env("PERFBISECT_LEASE_SECS", lease_secs.to_string());
    match database_url {
        Some(u) => cmd.env("DATABASE_URL", u),
        None => cmd.env_remove("DATABASE_URL"),
    };
    cmd
}

pub fn start_worker(
    exe: &Path,
    dir: &Path,
    url: &str,
    enroll_token: &str,
    name: &str,
) -> anyhow::Result<Process> {
    let mut cmd = Command::new(exe);
    cmd.arg("worker")
        .arg("--server")
        .arg(url)
        .arg("--name")
        .arg(name)
        .arg("--host-group")
        .arg("local")
        .arg("--work-dir")
        .arg(dir.join(name))
        .env("PERFBISECT_ENROLL_TOKEN", enroll_token);
    Ok(Process::spawn(name, cmd, &dir.join(format!("{name}.log")))?)
}

pub async fn wait_healthy(api: &Api, server: &mut Process, limit: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    while !api.healthy().await {
        if server.has_exited() {
            bail!("the server exited during start-up; see server.log in the demo directory");
        }
        if start.elapsed() > limit {
            bail!("the server did not answer within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Prints progress whenever it changes, until the bisect ends; returns its final view.
pub async fn watch(
    api: &Api,
    id: i64,
    limit: Duration,
) -> anyhow::Result<perfbisect_wire::api::Bisect> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let b = api.bisect(id).await?;
        let line = progress_line(&b);
        if line != last {
            println!("[{:>5.1}s] {line}", start.elapsed().as_secs_f64());
            last = line;
        }
        if status_is_final(&b.status) {
            return Ok(b);
        }
        if start.elapsed() > limit {
            bail!("bisect {id} did not end within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod token_tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_demo_token_is_written_for_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = super::write_token(dir.path(), "pbt_secret").unwrap();
        assert_eq!(path, dir.path().join("api-token"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "pbt_secret\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
