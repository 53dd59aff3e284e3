//! Power control of a bare-metal test host: the last resort when it does not come back.
//!
//! A driver does one [`PowerAction`] and says what happened; the ssh runner only asks for
//! a cycle (and the state, for its log). Three drivers, chosen by `--power-driver`:
//! - `ipmi`: the host's BMC with `ipmitool -I lanplus` (address, user and a password file,
//!   never a password on the command line), as a lab's servers have;
//! - `qmp`: a qemu VM's monitor socket (`system_reset`, `quit`, `query-status`), for hosts
//!   that are VMs;
//! - `script`: a command of the lab's own (a PDU, a smart plug, a relay), given the action
//!   as `PERFBISECT_POWER_ACTION`.
//!
//! A lab adds a driver by implementing [`PowerDriver`].

use crate::exec;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;

/// How long one power command may take.
const POWER_SECS: u64 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerAction {
    On,
    Off,
    /// Off then on (or a hard reset where that is all the driver has).
    Cycle,
    Status,
}

impl PowerAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::On => "on",
            PowerAction::Off => "off",
            PowerAction::Cycle => "cycle",
            PowerAction::Status => "status",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The driver's command or protocol said no.
    #[error("power {action} through {driver} failed: {message}")]
    Failed {
        driver: &'static str,
        action: &'static str,
        message: String,
    },
    #[error("power control is not configured: {0}")]
    NotConfigured(String),
}

pub type PowerFuture<'a> = Pin<Box<dyn Future<Output = Result<String, PowerError>> + Send + 'a>>;

/// One way to switch a test host off and on. `act` returns the driver's answer (for a
/// status: `on` or `off`), for the run's log.
pub trait PowerDriver: Send + Sync {
    fn name(&self) -> &'static str;
    fn act(&self, action: PowerAction) -> PowerFuture<'_>;
}

/// `ipmitool -I lanplus` against the host's BMC.
#[derive(Debug, Clone)]
pub struct Ipmi {
    pub host: String,
    pub port: u16,
    pub user: String,
    /// A file holding the password (`ipmitool -f`).
    pub password_file: PathBuf,
    /// `-C`: the cipher suite, for BMCs that refuse ipmitool's default.
    pub cipher_suite: Option<u8>,
}

impl Ipmi {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("ipmitool");
        cmd.args(["-I", "lanplus", "-H", &self.host])
            .args(["-p", &self.port.to_string()])
            .args(["-U", &self.user])
            .arg("-f")
            .arg(&self.password_file);
        if let Some(c) = self.cipher_suite {
            cmd.args(["-C", &c.to_string()]);
        }
        cmd.args(["-N", "2", "-R", "3"]);
        cmd.args(args);
        cmd
    }

    async fn ipmitool(&self, action: PowerAction, args: &[&str]) -> Result<String, PowerError> {
        let (_tx, mut never) = watch::channel(false);
        let out = exec::run(
            self.command(args),
            None,
            Duration::from_secs(POWER_SECS),
            &mut never,
        )
        .await?;
        if out.success() {
            Ok(out.stdout.trim().to_string())
        } else {
            Err(PowerError::Failed {
                driver: "ipmi",
                action: action.as_str(),
                message: format!("ipmitool {}: {}", out.describe(), out.log().trim()),
            })
        }
    }
}

impl PowerDriver for Ipmi {
    fn name(&self) -> &'static str {
        "ipmi"
    }

    fn act(&self, action: PowerAction) -> PowerFuture<'_> {
        Box::pin(async move {
            match action {
                PowerAction::Status => {
                    let text = self
                        .ipmitool(action, &["chassis", "power", "status"])
                        .await?;
                    Ok(if text.ends_with(" on") { "on" } else { "off" }.to_string())
                }
                PowerAction::Cycle => {
                    // A BMC refuses a cycle of a host that is off: then it is only "on".
                    let status = self.act(PowerAction::Status).await?;
                    let verb = if status == "on" { "cycle" } else { "on" };
                    self.ipmitool(action, &["chassis", "power", verb]).await
                }
                other => {
                    self.ipmitool(other, &["chassis", "power", other.as_str()])
                        .await
                }
            }
        })
    }
}

/// A qemu VM's QMP socket.
#[derive(Debug, Clone)]
pub struct Qmp {
    pub socket: PathBuf,
}

impl Qmp {
    /// Sends one command after the capabilities handshake; its `return` (as JSON text).
    pub async fn execute(&self, command: &str) -> Result<String, PowerError> {
        let fail = |message: String| PowerError::Failed {
            driver: "qmp",
            action: "command",
            message,
        };
        let talk = async {
            let stream = tokio::net::UnixStream::connect(&self.socket).await?;
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            let answer = async |lines: &mut tokio::io::Lines<
                BufReader<tokio::net::unix::OwnedReadHalf>,
            >| loop {
                let Some(line) = lines.next_line().await? else {
                    return Err(fail("the monitor closed the connection".into()));
                };
                let v: serde_json::Value = serde_json::from_str(&line)
                    .map_err(|e| fail(format!("unreadable reply {line:?}: {e}")))?;
                // Events arrive unasked; the reply is the line with `return` or `error`.
                if let Some(r) = v.get("return") {
                    return Ok(r.to_string());
                }
                if let Some(e) = v.get("error") {
                    return Err(fail(e.to_string()));
                }
            };
            let greeting = lines.next_line().await?.unwrap_or_default();
            if !greeting.contains("QMP") {
                return Err(fail(format!("not a QMP greeting: {greeting:?}")));
            }
            write
                .write_all(b"{\"execute\": \"qmp_capabilities\"}\n")
                .await?;
            answer(&mut lines).await?;
            write
                .write_all(format!("{{\"execute\": \"{command}\"}}\n").as_bytes())
                .await?;
            match answer(&mut lines).await {
                // `quit` may close the socket before its reply.
                Err(PowerError::Failed { message, .. })
                    if command == "quit" && message.contains("closed") =>
                {
                    Ok("{}".to_string())
                }
                other => other,
            }
        };
        tokio::time::timeout(Duration::from_secs(POWER_SECS), talk)
            .await
            .map_err(|_| fail(format!("no answer within {POWER_SECS} s")))?
    }
}

impl PowerDriver for Qmp {
    fn name(&self) -> &'static str {
        "qmp"
    }

    fn act(&self, action: PowerAction) -> PowerFuture<'_> {
        Box::pin(async move {
            match action {
                PowerAction::Status => match self.execute("query-status").await {
                    Ok(_) => Ok("on".into()),
                    // No monitor: the VM process is gone.
                    Err(PowerError::Io(_)) => Ok("off".into()),
                    Err(e) => Err(e),
                },
                // A VM's reset button: the machine restarts at once, even a hung one.
                PowerAction::Cycle => {
                    self.execute("system_reset").await?;
                    // A VM stopped (`stop`) stays stopped through a reset.
                    self.execute("cont").await
                }
                PowerAction::Off => self.execute("quit").await,
                PowerAction::On => Err(PowerError::Failed {
                    driver: "qmp",
                    action: "on",
                    message: "a VM that quit cannot be started through its own monitor".into(),
                }),
            }
        })
    }
}

/// A lab's own command, given `PERFBISECT_POWER_ACTION`.
#[derive(Debug, Clone)]
pub struct Script {
    pub command: String,
}

impl PowerDriver for Script {
    fn name(&self) -> &'static str {
        "script"
    }

    fn act(&self, action: PowerAction) -> PowerFuture<'_> {
        Box::pin(async move {
            let (_tx, mut never) = watch::channel(false);
            let env = [(
                "PERFBISECT_POWER_ACTION".to_string(),
                action.as_str().to_string(),
            )];
            let out = exec::shell(
                &self.command,
                &std::env::temp_dir(),
                &env,
                Duration::from_secs(POWER_SECS),
                &mut never,
            )
            .await?;
            if out.success() {
                Ok(out.log().trim().to_string())
            } else {
                Err(PowerError::Failed {
                    driver: "script",
                    action: action.as_str(),
                    message: format!("{}: {}", out.describe(), exec::tail(&out.log(), 5)),
                })
            }
        })
    }
}

/// The driver the configuration names, if any.
pub fn from_config(
    cfg: &crate::config::SshConfig,
) -> Result<Option<Box<dyn PowerDriver>>, PowerError> {
    let kind = cfg.power_driver.clone().or_else(|| {
        if cfg.bmc_host.is_some() {
            Some("ipmi".into())
        } else if cfg.qmp_socket.is_some() {
            Some("qmp".into())
        } else if cfg.power_cycle_command.is_some() {
            Some("script".into())
        } else {
            None
        }
    });
    let missing = |what: &str| PowerError::NotConfigured(format!("--power-driver needs {what}"));
    Ok(match kind.as_deref() {
        None => None,
        Some("ipmi") => Some(Box::new(Ipmi {
            host: cfg.bmc_host.clone().ok_or_else(|| missing("--bmc-host"))?,
            port: cfg.bmc_port,
            user: cfg.bmc_user.clone(),
            password_file: cfg
                .bmc_password_file
                .clone()
                .ok_or_else(|| missing("--bmc-password-file"))?,
            cipher_suite: cfg.bmc_cipher_suite,
        })),
        Some("qmp") => Some(Box::new(Qmp {
            socket: cfg
                .qmp_socket
                .clone()
                .ok_or_else(|| missing("--qmp-socket"))?,
        })),
        Some("script") => Some(Box::new(Script {
            command: cfg
                .power_cycle_command
                .clone()
                .ok_or_else(|| missing("--power-cycle-command"))?,
        })),
        Some(other) => {
            return Err(PowerError::NotConfigured(format!(
                "unknown --power-driver `{other}` (ipmi, qmp, script)"
            )));
        }
    })
}
