//! Server configuration: one clap struct serves as flags and environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct ServerConfig {
    /// Address to listen on.
    #[arg(long, env = "PERFBISECT_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where git mirrors (and, without DATABASE_URL, the embedded PostgreSQL cluster) live.
    #[arg(
        long,
        env = "PERFBISECT_DATA_DIR",
        default_value = ".perfbisect/server"
    )]
    pub data_dir: PathBuf,
    /// PostgreSQL to use. Without it the server runs its own cluster in the data directory.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// API token for submitting and cancelling bisects (added to the database at start).
    #[arg(long, env = "PERFBISECT_API_TOKEN")]
    pub api_token: Option<String>,
    /// Enrollment token that workers present to register (added to the database at start).
    #[arg(long, env = "PERFBISECT_ENROLL_TOKEN")]
    pub enroll_token: Option<String>,
    /// How long a claimed task stays with its worker without a heartbeat.
    #[arg(long, env = "PERFBISECT_LEASE_SECS", default_value_t = 60)]
    pub lease_secs: u64,
    /// The address people use to reach this server (for links in reports and mails).
    #[arg(long, env = "PERFBISECT_PUBLIC_URL")]
    pub public_url: Option<String>,
    #[command(flatten)]
    pub mail: Box<crate::notify::MailConfig>,
    /// How the mirrors reach remote repositories (https CA and credentials, ssh key).
    #[command(flatten)]
    pub git: perfbisect_gitfetch::GitAuth,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, env = "PERFBISECT_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "PERFBISECT_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl ServerConfig {
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| {
            let scheme = if self.tls_cert.is_some() {
                "https"
            } else {
                "http"
            };
            format!("{scheme}://{}", self.listen)
        })
    }
}

#[cfg(test)]
mod flag_tests {
    use clap::CommandFactory;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        config: super::ServerConfig,
    }

    #[test]
    fn the_flags_do_not_collide() {
        Flags::command().debug_assert();
    }
}
