use anyhow::Context;
use clap::{Parser, Subcommand};
use perfbisect_cli::api::{Api, render};
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
    /// API token (submit, cancel, repo add). Defaults to the local server's `api-token` file.
    #[arg(long, env = "PERFBISECT_TOKEN", global = true)]
    token: Option<String>,
}

impl Remote {
    fn api(&self) -> Api {
        let token = self.token.clone().or_else(|| {
            std::fs::read_to_string(".perfbisect/server/api-token")
                .ok()
                .map(|t| t.trim().to_string())
        });
        Api::new(&self.server, token)
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// The whole service on this machine, on a generated repository with a planted change.
    Demo(perfbisect_cli::demo::DemoArgs),
    /// Run the server.
    Server(perfbisect_server::ServerConfig),
    /// Run a worker.
    Worker(Box<perfbisect_worker::WorkerConfig>),
    /// Register a repository (the server mirrors it).
    RepoAdd {
        name: String,
        url: String,
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
        /// Follow progress until the bisect ends.
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
    /// Follow a bisect until it ends.
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
            perfbisect_server::run(config).await
        }
        Cmd::Worker(config) => {
            perfbisect_server::init_tracing();
            perfbisect_worker::run(*config).await
        }
        other => client(other).await,
    };
    if let Err(e) = result {
        eprintln!("perfbisect: {e:#}");
        std::process::exit(1);
    }
}

async fn client(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Demo(args) => perfbisect_cli::demo::run(args).await,
        Cmd::RepoAdd { name, url, remote } => {
            let r = remote.api().add_repository(&name, &url).await?;
            println!("repository {} ({}) mirrored", r.name, r.url);
            Ok(())
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
            let api = remote.api();
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
            }
            Ok(())
        }
        Cmd::Status { id, json, remote } => {
            let b = remote.api().bisect(id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&b)?);
            } else {
                print!("{}", render(&b));
            }
            Ok(())
        }
        Cmd::Watch { id, remote } => {
            let api = remote.api();
            let done =
                perfbisect_cli::demo::watch(&api, id, Duration::from_secs(u64::MAX / 4)).await?;
            println!("\n{}", render(&done));
            Ok(())
        }
        Cmd::Cancel { id, remote } => {
            let b = remote.api().cancel(id).await?;
            println!("bisect {} is {}", b.id, b.status);
            Ok(())
        }
        Cmd::List { status, remote } => {
            let list = remote.api().list(status.as_deref()).await?;
            for b in list.bisects {
                println!(
                    "{:>6}  {:<14} {:<12} {}..{}  {}  {}",
                    b.id,
                    b.status,
                    b.repository,
                    b.good,
                    b.bad,
                    b.metric,
                    b.culprit.as_deref().map(|c| &c[..12]).unwrap_or("")
                );
            }
            println!("({} in all)", list.total);
            Ok(())
        }
        Cmd::Watches { cmd, remote } => perfbisect_cli::watches::run(cmd, &remote.api()).await,
        Cmd::Server(_) | Cmd::Worker(_) => unreachable!("handled in main"),
    }
}
