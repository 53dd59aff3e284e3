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
    /// Submitter token (submit, cancel). Given at start, it replaces the previous start's;
    /// without it (or its file) one is generated into `<data-dir>/api-token`. A flag or
    /// the variable is taken out of `ps` and `/proc` at start (`conceal_secrets`).
    #[arg(long, env = "PERFBISECT_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    #[arg(long, env = "PERFBISECT_API_TOKEN_FILE")]
    pub api_token_file: Option<PathBuf>,
    /// Enrollment token that workers present to register (like `--api-token`;
    /// `<data-dir>/enroll-token`).
    #[arg(long, env = "PERFBISECT_ENROLL_TOKEN", hide_env_values = true)]
    pub enroll_token: Option<String>,
    #[arg(long, env = "PERFBISECT_ENROLL_TOKEN_FILE")]
    pub enroll_token_file: Option<PathBuf>,
    /// Operator token: manages tokens, takes over worker names (like `--api-token`;
    /// `<data-dir>/operator-token`).
    #[arg(long, env = "PERFBISECT_OPERATOR_TOKEN", hide_env_values = true)]
    pub operator_token: Option<String>,
    #[arg(long, env = "PERFBISECT_OPERATOR_TOKEN_FILE")]
    pub operator_token_file: Option<PathBuf>,
    /// Reading the API, the dashboard and the OpenAPI document needs a token too (any
    /// valid one: reader, submitter, operator or a worker's; bearer or the
    /// `perfbisect_token` cookie).
    #[arg(long, env = "PERFBISECT_REQUIRE_READ_TOKEN")]
    pub require_read_token: bool,
    /// With `--require-read-token`: a request carrying this header (set by a reverse proxy
    /// that authenticated the user, e.g. `X-Forwarded-User`) may read without a token.
    /// Only safe when nothing but that proxy can reach the server.
    #[arg(long, env = "PERFBISECT_TRUSTED_USER_HEADER")]
    pub trusted_user_header: Option<String>,
    /// How long a claimed task stays with its worker without a heartbeat.
    #[arg(long, env = "PERFBISECT_LEASE_SECS", default_value_t = 60)]
    pub lease_secs: u64,
    /// The address people use to reach this server (for links in reports and mails).
    #[arg(long, env = "PERFBISECT_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Let the embedded PostgreSQL also listen on TCP at this address (password required).
    /// Without it the cluster listens only on a private Unix socket in the data directory.
    #[arg(long, env = "PERFBISECT_EMBEDDED_PG_LISTEN")]
    pub embedded_pg_listen: Option<std::net::IpAddr>,
    /// The most runs a bisect may take. Its budget follows from the engine's prediction
    /// after the endpoints (three times the predicted runs, at least 40 more), never above
    /// this nor above the submitter's `max_runs`.
    #[arg(long, env = "PERFBISECT_MAX_RUNS_CEILING", default_value_t = crate::budget::DEFAULT_CEILING,
          value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub max_runs_ceiling: u32,
    /// The most hosts of its group one bisect works on at once. Hosts beyond every active
    /// bisect's cap stay idle: more parallel probes save few rounds and cost runs (see
    /// `allocator`).
    #[arg(long, env = "PERFBISECT_MAX_HOSTS_PER_BISECT",
          default_value_t = crate::allocator::DEFAULT_MAX_HOSTS_PER_BISECT,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_hosts_per_bisect: u32,
    /// How old, in milliseconds, a list page (`GET /bisects`, `GET /api/v1/bisects`) may be
    /// when served from this replica's cache: the running bisects' progress on it (runs,
    /// candidates left, change) is at most this old. New bisects and status changes show at
    /// once on every replica. 0 reads every page from the database.
    #[arg(long, env = "PERFBISECT_LIST_CACHE_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub list_cache_ms: u64,
    #[command(flatten)]
    pub mail: Box<crate::notify::MailConfig>,
    /// How the mirrors reach remote repositories (https CA and credentials, ssh key).
    #[command(flatten)]
    pub git: Box<perfbisect_gitfetch::GitAuth>,
    /// Which repository URLs may be registered and fetched.
    #[command(flatten)]
    pub repo_urls: crate::url_policy::UrlPolicyConfig,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, env = "PERFBISECT_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "PERFBISECT_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// File holding the secret that push webhooks from a forge are signed with (GitHub and
    /// Gitea: `X-Hub-Signature-256`/`X-Gitea-Signature`; GitLab: `X-Gitlab-Token`), as an
    /// alternative to an API token on `POST /api/v1/watches/{id}/push`.
    #[arg(long, env = "PERFBISECT_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// A connection must send a request's headers within this many seconds, or it is
    /// closed (slow or silent clients cannot hold connections open).
    /// At least 10 s: perfbisect's clients drop idle connections after 5 s, before the server
    /// would close them under a request.
    #[arg(long, env = "PERFBISECT_HEADER_READ_TIMEOUT_SECS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub header_read_timeout_secs: u64,
}

/// A token given directly, or in a file.
fn token_from(value: &Option<String>, file: &Option<PathBuf>) -> anyhow::Result<Option<String>> {
    if let Some(v) = value {
        return Ok(Some(v.trim().to_string()));
    }
    match file {
        Some(path) => {
            let t = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
            Ok(Some(t.trim().to_string()))
        }
        None => Ok(None),
    }
}

impl ServerConfig {
    /// Call first: secrets given as flags or in the environment (tokens, the database URL,
    /// the SMTP URL and password) leave `/proc/<server>/cmdline` (readable by every local
    /// user) and `environ` before anything runs. The server executes itself again without
    /// them (and this does not return); in the new image they come back through a pipe.
    pub fn conceal_secrets(&mut self) -> anyhow::Result<()> {
        use perfbisect_conceal::Secret;
        let secret = |flag, var| Secret { flag, var };
        let fields: [(Secret, &mut Option<String>); 6] = [
            (
                secret("--api-token", "PERFBISECT_API_TOKEN"),
                &mut self.api_token,
            ),
            (
                secret("--enroll-token", "PERFBISECT_ENROLL_TOKEN"),
                &mut self.enroll_token,
            ),
            (
                secret("--operator-token", "PERFBISECT_OPERATOR_TOKEN"),
                &mut self.operator_token,
            ),
            (
                secret("--database-url", "DATABASE_URL"),
                &mut self.database_url,
            ),
            (
                secret("--smtp-url", "PERFBISECT_SMTP_URL"),
                &mut self.mail.smtp_url,
            ),
            (
                secret("--smtp-password", "PERFBISECT_SMTP_PASSWORD"),
                &mut self.mail.smtp_password,
            ),
        ];
        let given: Vec<(Secret, Option<&str>)> =
            fields.iter().map(|(s, f)| (*s, f.as_deref())).collect();
        let mut values = perfbisect_conceal::conceal(&given)?;
        for (secret, field) in fields {
            if let Some(v) = values.remove(secret.flag) {
                *field = Some(v);
            }
        }
        Ok(())
    }

    pub fn api_token(&self) -> anyhow::Result<Option<String>> {
        token_from(&self.api_token, &self.api_token_file)
    }

    pub fn enroll_token(&self) -> anyhow::Result<Option<String>> {
        token_from(&self.enroll_token, &self.enroll_token_file)
    }

    pub fn operator_token(&self) -> anyhow::Result<Option<String>> {
        token_from(&self.operator_token, &self.operator_token_file)
    }

    pub fn webhook_secret(&self) -> anyhow::Result<Option<String>> {
        token_from(&None, &self.webhook_secret_file)
    }

    pub fn read_access(&self) -> anyhow::Result<crate::auth::ReadAccess> {
        let trusted_user_header = self
            .trusted_user_header
            .as_deref()
            .map(axum::http::HeaderName::try_from)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--trusted-user-header: {e}"))?;
        Ok(crate::auth::ReadAccess {
            require_token: self.require_read_token,
            trusted_user_header,
        })
    }

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
