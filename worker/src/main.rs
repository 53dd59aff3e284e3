use clap::Parser;

#[derive(Parser)]
#[command(name = "perfbisect-worker", about = "The perfbisect worker")]
struct Cli {
    #[command(flatten)]
    config: perfbisect_worker::WorkerConfig,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    perfbisect_worker::run(Cli::parse().config).await
}
