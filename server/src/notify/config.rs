//! Mail flags (each also an environment variable) and their validation into `MailSettings`.

use super::{Event, MailSettings, Security, SmtpSettings};
use lettre::message::Mailbox;
use perfbisect_report::{KpiTable, ReportConfig};
use std::path::PathBuf;
use std::time::Duration;

const DEFAULT_FROM: &str = "perfbisect <perfbisect@localhost>";
const DEFAULT_EVENTS: &str = "found,not_reproduced,inconclusive,failed";
const DEFAULT_TIMEOUT_SECS: u64 = 60;
const DEFAULT_MAX_ATTEMPTS: i32 = 8;
const DEFAULT_RETRY_SECS: u64 = 30;
const DEFAULT_ROBOT: &str = "perfbisect";

/// Directions the server knows beyond the report crate's built-in KPIs: the example
/// benchmark's score (`perfbisect demo`) is higher-is-better.
const SERVER_KPIS: &str = "demo.score: higher\n";

#[derive(Debug, Clone, clap::Args)]
pub struct MailConfig {
    /// SMTP server: `smtp://host:port` (no TLS), `smtp+starttls://host:port` (STARTTLS
    /// required) or `smtps://host:port` (TLS). Without it mails wait in the outbox.
    #[arg(long, env = "PERFBISECT_SMTP_URL")]
    pub smtp_url: Option<String>,
    /// SMTP user (authentication is used when a user is set).
    #[arg(long, env = "PERFBISECT_SMTP_USER")]
    pub smtp_user: Option<String>,
    #[arg(long, env = "PERFBISECT_SMTP_PASSWORD", hide_env_values = true)]
    pub smtp_password: Option<String>,
    /// PEM file of an extra root certificate to trust (a relay with a private CA).
    #[arg(long, env = "PERFBISECT_SMTP_CA_FILE")]
    pub smtp_ca_file: Option<PathBuf>,
    /// Bound on one delivery attempt, in seconds.
    #[arg(long, env = "PERFBISECT_SMTP_TIMEOUT_SECS", default_value_t = DEFAULT_TIMEOUT_SECS)]
    pub smtp_timeout_secs: u64,
    /// The From address, `Name <address>`; Message-IDs use its domain.
    #[arg(long, env = "PERFBISECT_MAIL_FROM", default_value = DEFAULT_FROM)]
    pub mail_from: String,
    #[arg(long, env = "PERFBISECT_MAIL_REPLY_TO")]
    pub mail_reply_to: Option<String>,
    /// Extra header on every mail, `Name: value`; repeat the flag, or separate with newlines.
    #[arg(
        long = "mail-header",
        env = "PERFBISECT_MAIL_HEADERS",
        value_delimiter = '\n'
    )]
    pub mail_headers: Vec<String>,
    /// Events that are mailed: found, not_reproduced, inconclusive, failed, started.
    #[arg(long, env = "PERFBISECT_MAIL_EVENTS", value_delimiter = ',', default_value = DEFAULT_EVENTS)]
    pub mail_events: Vec<String>,
    /// Also mail the culprit's author.
    #[arg(long, env = "PERFBISECT_MAIL_CULPRIT_AUTHOR")]
    pub mail_culprit_author: bool,
    /// Also copy the addresses in the culprit's Signed-off-by: and Cc: trailers.
    #[arg(long, env = "PERFBISECT_MAIL_TRAILERS")]
    pub mail_trailers: bool,
    /// Delivery attempts before a mail is marked failed.
    #[arg(long, env = "PERFBISECT_MAIL_MAX_ATTEMPTS", default_value_t = DEFAULT_MAX_ATTEMPTS)]
    pub mail_max_attempts: i32,
    /// Seconds before the first retry; the delay doubles with every attempt (at most 1 h).
    #[arg(long, env = "PERFBISECT_MAIL_RETRY_SECS", default_value_t = DEFAULT_RETRY_SECS)]
    pub mail_retry_secs: u64,
    /// Who signs the reports ("<name> noticed a 54.8% improvement ...").
    #[arg(long, env = "PERFBISECT_MAIL_ROBOT_NAME", default_value = DEFAULT_ROBOT)]
    pub mail_robot_name: String,
    /// Add an HTML alternative to the text report. Off by default: kernel mailing lists
    /// refuse HTML mail.
    #[arg(long, env = "PERFBISECT_MAIL_HTML")]
    pub mail_html: bool,
    /// YAML map `metric glob: higher|lower`, checked before the built-in KPI directions.
    #[arg(long, env = "PERFBISECT_KPI_FILE")]
    pub kpi_file: Option<PathBuf>,
}

impl Default for MailConfig {
    fn default() -> Self {
        MailConfig {
            smtp_url: None,
            smtp_user: None,
            smtp_password: None,
            smtp_ca_file: None,
            smtp_timeout_secs: DEFAULT_TIMEOUT_SECS,
            mail_from: DEFAULT_FROM.into(),
            mail_reply_to: None,
            mail_headers: Vec::new(),
            mail_events: DEFAULT_EVENTS.split(',').map(str::to_string).collect(),
            mail_culprit_author: false,
            mail_trailers: false,
            mail_max_attempts: DEFAULT_MAX_ATTEMPTS,
            mail_retry_secs: DEFAULT_RETRY_SECS,
            mail_robot_name: DEFAULT_ROBOT.into(),
            mail_html: false,
            kpi_file: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MailConfigError {
    #[error("PERFBISECT_SMTP_URL `{url}`: {problem}")]
    SmtpUrl { url: String, problem: String },
    #[error("{what} `{value}` is not a mailbox (`Name <user@example.org>`): {source}")]
    Mailbox {
        what: &'static str,
        value: String,
        source: lettre::address::AddressError,
    },
    #[error("mail header `{0}` is not `Name: value` with a valid name")]
    Header(String),
    #[error(
        "mail event `{0}` is not one of started, reproduced, found, not_reproduced, inconclusive, failed"
    )]
    Event(String),
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("KPI file {path}: {source}")]
    Kpi {
        path: PathBuf,
        source: yaml_serde::Error,
    },
    #[error("PERFBISECT_MAIL_MAX_ATTEMPTS must be at least 1")]
    Attempts,
}

fn mailbox(what: &'static str, value: &str) -> Result<Mailbox, MailConfigError> {
    value.parse().map_err(|source| MailConfigError::Mailbox {
        what,
        value: value.to_string(),
        source,
    })
}

/// `Name: value`, with a name of printable ASCII without a colon.
pub fn parse_header(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once(':')?;
    let name = name.trim();
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':');
    let value = value.trim();
    (ok && !value.contains(['\r', '\n'])).then(|| (name.to_string(), value.to_string()))
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse().ok()?),
        None => None,
    };
    Some((host, port))
}

fn smtp(url: &str, c: &MailConfig) -> Result<SmtpSettings, MailConfigError> {
    let bad = |problem: &str| MailConfigError::SmtpUrl {
        url: url.to_string(),
        problem: problem.to_string(),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("expected smtp://, smtp+starttls:// or smtps://"))?;
    let (security, default_port) = match scheme {
        "smtp" => (Security::Plain, 25),
        "smtp+starttls" => (Security::StartTls, 587),
        "smtps" => (Security::Tls, 465),
        _ => return Err(bad("expected smtp://, smtp+starttls:// or smtps://")),
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains(['@', '/', '?']) {
        return Err(bad(
            "give only host and port; credentials go in PERFBISECT_SMTP_USER/PASSWORD",
        ));
    }
    let (host, port) = split_host_port(authority).ok_or_else(|| bad("the port is not a number"))?;
    let port = port.unwrap_or(default_port);
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let ca_pem = match &c.smtp_ca_file {
        Some(path) => Some(std::fs::read(path).map_err(|source| MailConfigError::Read {
            path: path.clone(),
            source,
        })?),
        None => None,
    };
    Ok(SmtpSettings {
        host: host.to_string(),
        port,
        security,
        credentials: c
            .smtp_user
            .clone()
            .map(|u| (u, c.smtp_password.clone().unwrap_or_default())),
        ca_pem,
        timeout: Duration::from_secs(c.smtp_timeout_secs.max(1)),
    })
}

impl MailConfig {
    /// Validates the flags; a server with a bad mail configuration refuses to start.
    pub fn settings(&self) -> Result<MailSettings, MailConfigError> {
        let smtp = self
            .smtp_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .map(|u| smtp(u, self))
            .transpose()?;
        let headers = self
            .mail_headers
            .iter()
            .filter(|h| !h.trim().is_empty())
            .map(|h| parse_header(h).ok_or_else(|| MailConfigError::Header(h.clone())))
            .collect::<Result<_, _>>()?;
        let mut events = Vec::new();
        for e in self.mail_events.iter().map(|e| e.trim()) {
            if e.is_empty() {
                continue;
            }
            events.push(Event::parse(e).ok_or_else(|| MailConfigError::Event(e.to_string()))?);
        }
        let mut kpi: KpiTable =
            yaml_serde::from_str(SERVER_KPIS).expect("the server's KPI list is valid YAML");
        if let Some(path) = &self.kpi_file {
            let text = std::fs::read_to_string(path).map_err(|source| MailConfigError::Read {
                path: path.clone(),
                source,
            })?;
            let user: KpiTable =
                yaml_serde::from_str(&text).map_err(|source| MailConfigError::Kpi {
                    path: path.clone(),
                    source,
                })?;
            kpi = user.then(kpi);
        }
        if self.mail_max_attempts < 1 {
            return Err(MailConfigError::Attempts);
        }
        let timeout = Duration::from_secs(self.smtp_timeout_secs.max(1));
        Ok(MailSettings {
            smtp,
            from: mailbox("PERFBISECT_MAIL_FROM", &self.mail_from)?,
            reply_to: self
                .mail_reply_to
                .as_deref()
                .map(|r| mailbox("PERFBISECT_MAIL_REPLY_TO", r))
                .transpose()?,
            headers,
            events,
            culprit_author: self.mail_culprit_author,
            trailers: self.mail_trailers,
            max_attempts: self.mail_max_attempts,
            retry_base: Duration::from_secs(self.mail_retry_secs),
            // A claimed row outlives one whole attempt, so no other sender takes it over
            // while this one may still be talking to the SMTP server.
            lease: timeout * 2 + Duration::from_secs(5),
            report: ReportConfig {
                kpi,
                ..ReportConfig::default()
            },
            robot_name: self.mail_robot_name.clone(),
            html: self.mail_html,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfbisect_report::Direction;

    fn with_url(url: &str) -> Result<MailSettings, MailConfigError> {
        MailConfig {
            smtp_url: Some(url.into()),
            ..MailConfig::default()
        }
        .settings()
    }

    #[test]
    fn smtp_urls_choose_the_security_and_default_port() {
        let s = with_url("smtp://127.0.0.1:2525").unwrap().smtp.unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.security),
            ("127.0.0.1", 2525, Security::Plain)
        );
        let s = with_url("smtp+starttls://mail.example.org")
            .unwrap()
            .smtp
            .unwrap();
        assert_eq!((s.port, s.security), (587, Security::StartTls));
        let s = with_url("smtps://mail.example.org").unwrap().smtp.unwrap();
        assert_eq!((s.port, s.security), (465, Security::Tls));
        assert!(with_url("http://x").is_err());
        assert!(with_url("smtp://u:p@x:25").is_err());
        assert!(with_url("smtp://x:port").is_err());
    }

    #[test]
    fn defaults_are_valid_and_demo_score_is_higher_is_better() {
        let s = MailSettings::default();
        assert!(s.smtp.is_none());
        assert_eq!(s.events, Event::DEFAULT);
        assert_eq!(s.message_id_domain(), "localhost");
        let kpi = s.report.kpi_table();
        assert_eq!(kpi.direction("demo.score"), Some(Direction::HigherIsBetter));
        assert_eq!(
            kpi.direction("fio.write_iops"),
            Some(Direction::HigherIsBetter)
        );
    }

    #[test]
    fn headers_and_events_are_checked() {
        assert_eq!(
            parse_header("X-Patchwork-Hint: ignore"),
            Some(("X-Patchwork-Hint".into(), "ignore".into()))
        );
        assert_eq!(parse_header("Bad Name: x"), None);
        assert_eq!(parse_header("novalue"), None);
        let c = MailConfig {
            mail_events: vec!["found".into(), "exploded".into()],
            ..MailConfig::default()
        };
        assert!(matches!(c.settings(), Err(MailConfigError::Event(e)) if e == "exploded"));
    }

    #[test]
    fn a_kpi_file_goes_before_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kpi.yaml");
        std::fs::write(&path, "fio.write_iops: lower\nmyapp.*_ops: higher\n").unwrap();
        let c = MailConfig {
            kpi_file: Some(path),
            ..MailConfig::default()
        };
        let kpi = c.settings().unwrap().report.kpi_table();
        assert_eq!(
            kpi.direction("fio.write_iops"),
            Some(Direction::LowerIsBetter)
        );
        assert_eq!(
            kpi.direction("myapp.read_ops"),
            Some(Direction::HigherIsBetter)
        );
        assert_eq!(kpi.direction("demo.score"), Some(Direction::HigherIsBetter));
    }
}
