use anyhow::Context;
use clap::{Parser, Subcommand};
use perfbisect_cli::api::{Api, ApiError, exit_code, render, render_list};
use perfbisect_wire::api::SubmitBisect;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "perfbisect",
    version,
    about = "Find the commit that changed a benchmark's result"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args, Clone)]
struct Remote {
    /// The server's base URL.
    #[arg(
        long,
        env = "PERFBISECT_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    server: String,
    /// API token (submit, cancel, repo-add). Without it: the `api-token` file in the data
    /// directory of a server started here (`$PERFBISECT_DATA_DIR`, else
    /// `.perfbisect/server`), which the server writes only when it generated the token; a
    /// server given `--api-token` writes none, so pass the same token here.
    #[arg(long, env = "PERFBISECT_TOKEN", global = true)]
    token: Option<String>,
    /// PEM file of the CA that signed an `https://` server's certificate (a private CA),
    /// trusted besides the system's roots.
    #[arg(long, env = "PERFBISECT_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
}

impl Remote {
    fn api(&self) -> anyhow::Result<Api> {
        let dir = std::env::var_os("PERFBISECT_DATA_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".perfbisect/server"));
        let token = self.token.clone().or_else(|| {
            std::fs::read_to_string(dir.join("api-token"))
                .ok()
                .map(|t| t.trim().to_string())
        });
        match &self.ca_file {
            Some(ca) => Api::with_ca(&self.server, token, ca),
            None => Ok(Api::new(&self.server, token)),
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// The whole service on this machine, on a generated repository with a planted change.
    Demo(perfbisect_cli::demo::DemoArgs),
    /// Run the server.
    Server(perfbisect_server::ServerConfig),
    /// Load benchmark: fake workers over the real protocol against real server processes.
    Loadtest(perfbisect_cli::loadtest::LoadtestArgs),
    /// Run a worker.
    Worker(Box<perfbisect_worker::WorkerConfig>),
    /// Register a repository and wait until the server has mirrored it.
    RepoAdd {
        name: String,
        url: String,
        /// The web view's commit URL, `{sha}` where the commit goes (reports link there).
        #[arg(long)]
        web_url: Option<String>,
        /// Return once registered (`mirroring`); `perfbisect repos` shows when it is ready.
        #[arg(long)]
        no_wait: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the registered repositories with their state (mirroring, ready, failed).
    Repos {
        #[command(flatten)]
        remote: Remote,
    },
    /// Submit a bisect.
    Submit {
        /// Registered repository name.
        #[arg(long)]
        repo: String,
        #[arg(long)]
        good: String,
        #[arg(long)]
        bad: String,
        /// Job spec (YAML file).
        #[arg(long)]
        job: PathBuf,
        #[arg(long)]
        metric: String,
        /// `increase` or `decrease`, if known.
        #[arg(long)]
        direction: Option<String>,
        #[arg(long)]
        confidence: Option<f64>,
        #[arg(long)]
        max_runs: Option<u32>,
        /// Bisect from the merge base when good is not an ancestor of bad.
        #[arg(long)]
        use_merge_base: bool,
        /// Answer at merge level first (search bad's first-parent chain).
        #[arg(long)]
        first_parent: bool,
        /// Follow progress until the bisect ends (exit status as `watch`).
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// Show a bisect.
    Status {
        id: i64,
        /// Print the JSON the API returns.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// Follow a bisect until it ends. Exits 0 with a culprit, 1 when the bisect failed, 2
    /// when it ended without one (not reproduced, inconclusive, cancelled).
    Watch {
        id: i64,
        #[command(flatten)]
        remote: Remote,
    },
    /// Cancel a bisect.
    Cancel {
        id: i64,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the metric names a job's output yields, as the worker will store them: parses
    /// a saved run output (stdout, plus stderr if the job's command sends it there) with the
    /// job's `run.format`. With `--metric`, fails unless that name is among them.
    Metrics {
        /// Job spec (YAML file).
        #[arg(long)]
        job: PathBuf,
        /// A saved output of the job's run command (`./bench > out.txt 2>&1`).
        #[arg(long)]
        output: PathBuf,
        /// The metric you mean to submit.
        #[arg(long)]
        metric: Option<String>,
    },
    /// Watched branches: `perfbisect watches add|set|list|show|push|changes`.
    Watches {
        #[command(subcommand)]
        cmd: perfbisect_cli::watches::WatchesCmd,
        #[command(flatten)]
        remote: Remote,
    },
    /// List bisects, newest first.
    List {
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Server(config) => {
            perfbisect_server::init_tracing();
            perfbisect_server::run(config).await.map(Ended::from)
        }
        Cmd::Worker(config) => {
            perfbisect_server::init_tracing();
            perfbisect_worker::run(*config).await.map(Ended::from)
        }
        other => client(other).await,
    };
    match result {
        Err(e) => {
            eprintln!("perfbisect: {e:#}");
            if let Some(ApiError::Refused { status: 401, .. }) = e.downcast_ref::<ApiError>() {
                eprintln!(
                    "perfbisect: pass the server's API token with --token or PERFBISECT_TOKEN"
                );
            }
            std::process::exit(1);
        }
        Ok(Ended(Some(status))) => std::process::exit(exit_code(&status)),
        Ok(_) => {}
    }
}

/// What a command leaves for the exit status: the final status of a watched bisect.
#[derive(Default)]
struct Ended(Option<String>);

impl From<()> for Ended {
    fn from(_: ()) -> Self {
        Ended(None)
    }
}

async fn client(cmd: Cmd) -> anyhow::Result<Ended> {
    match cmd {
        Cmd::Demo(args) => perfbisect_cli::demo::run(args).await.map(Ended::from),
        Cmd::Loadtest(args) => perfbisect_cli::loadtest::run(args).await.map(Ended::from),
        Cmd::RepoAdd {
            name,
            url,
            web_url,
            no_wait,
            remote,
        } => {
            let api = remote.api()?;
            let r = api
                .register_repository(&name, &url, web_url.as_deref())
                .await?;
            if no_wait {
                println!("repository {} ({}) {}", r.name, r.url, r.state);
                return Ok(Ended(None));
            }
            println!("repository {} ({}) registered, mirroring...", r.name, r.url);
            let r = api
                .wait_repository(&name, perfbisect_cli::api::REPOSITORY_WAIT)
                .await?;
            println!("repository {} ({}) mirrored", r.name, r.url);
            Ok(Ended(None))
        }
        Cmd::Repos { remote } => {
            for r in remote.api()?.repositories().await? {
                let error = r
                    .fetch_error
                    .map(|e| format!("  last fetch: {e}"))
                    .unwrap_or_default();
                println!("{:<20} {:<10} {}{error}", r.name, r.state, r.url);
            }
            Ok(Ended(None))
        }
        Cmd::Submit {
            repo,
            good,
            bad,
            job,
            metric,
            direction,
            confidence,
            max_runs,
            use_merge_base,
            first_parent,
            watch,
            remote,
        } => {
            let job = std::fs::read_to_string(&job)
                .with_context(|| format!("reading job spec {}", job.display()))?;
            let api = remote.api()?;
            let b = api
                .submit(&SubmitBisect {
                    repository: repo,
                    good,
                    bad,
                    job,
                    metric,
                    direction,
                    magnitude_pct: None,
                    confidence,
                    max_runs,
                    notify: vec![],
                    use_merge_base,
                    first_parent,
                })
                .await?;
            println!(
                "bisect {} submitted: {} candidates",
                b.id, b.candidates_total
            );
            if watch {
                let done =
                    perfbisect_cli::demo::watch(&api, b.id, Duration::from_secs(u64::MAX / 4))
                        .await?;
                println!("\n{}", render(&done));
                return Ok(Ended(Some(done.status)));
            }
            Ok(Ended(None))
        }
        Cmd::Status { id, json, remote } => {
            let b = remote.api()?.bisect(id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&b)?);
            } else {
                print!("{}", render(&b));
            }
            Ok(Ended(None))
        }
        Cmd::Watch { id, remote } => {
            let api = remote.api()?;
            let done =
                perfbisect_cli::demo::watch(&api, id, Duration::from_secs(u64::MAX / 4)).await?;
            println!("\n{}", render(&done));
            Ok(Ended(Some(done.status)))
        }
        Cmd::Metrics {
            job,
            output,
            metric,
        } => {
            let job = std::fs::read_to_string(&job)
                .with_context(|| format!("reading job spec {}", job.display()))?;
            let output = std::fs::read_to_string(&output)
                .with_context(|| format!("reading run output {}", output.display()))?;
            let metrics = perfbisect_cli::metrics_check::check(&job, &output, metric.as_deref())?;
            for (name, value) in &metrics {
                println!("{name} = {value}");
            }
            if let Some(m) = metric {
                println!(
                    "`{m}` is among the {} metrics: submit it as --metric {m}",
                    metrics.len()
                );
            }
            Ok(Ended(None))
        }
        Cmd::Cancel { id, remote } => {
            let b = remote.api()?.cancel(id).await?;
            println!("bisect {} is {}", b.id, b.status);
            Ok(Ended(None))
        }
        Cmd::List { status, remote } => {
            let list = remote.api()?.list(status.as_deref()).await?;
            print!("{}", render_list(&list, chrono::Utc::now()));
            Ok(Ended(None))
        }
        Cmd::Watches { cmd, remote } => perfbisect_cli::watches::run(cmd, &remote.api()?)
            .await
            .map(Ended::from),
        Cmd::Server(_) | Cmd::Worker(_) => unreachable!("handled in main"),
    }
}
