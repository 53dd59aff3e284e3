use clap::Parser;

#[derive(Parser)]
#[command(name = "perfbisect-server", about = "The perfbisect server")]
struct Cli {
    #[command(flatten)]
    config: perfbisect_server::ServerConfig,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    perfbisect_server::init_tracing();
    perfbisect_server::run(Cli::parse().config).await
}
