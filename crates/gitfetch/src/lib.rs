//! Fetching remote repositories into bare mirrors with the `git` command.
//!
//! Why the command and not libgit2: git already speaks https (with a CA file and a
//! credential store) and ssh (keys, agents, known_hosts) the way operators configure them,
//! fetches incrementally (only the objects a mirror lacks), and needs no OpenSSL or libssh2
//! build. libgit2 stays for everything local (revision walks, checkouts).
//!
//! Credentials come only from files and agents named in [`GitAuth`]: a URL with a password in
//! it is refused, and every message this crate returns has URLs stripped of any user info, so
//! nothing secret reaches the database, events or logs.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Connect and stall limits of every fetch, in milliseconds (process-wide, like libgit2's
/// own server timeouts; the server and the worker set them from their configuration).
static CONNECT_MS: AtomicU64 = AtomicU64::new(10_000);
static STALL_MS: AtomicU64 = AtomicU64::new(300_000);

/// Sets how long a fetch may take to connect (ssh) and how long it may go without any sign
/// of progress before it is stopped (every transport: git prints progress throughout a
/// transfer, so silence means a remote that stopped answering).
pub fn set_timeouts(connect: Duration, stall: Duration) {
    CONNECT_MS.store(connect.as_millis().max(1) as u64, Ordering::Relaxed);
    STALL_MS.store(stall.as_millis().max(1) as u64, Ordering::Relaxed);
}

/// How to reach remotes: flags (and environment variables) of the server and the worker.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GitAuth {
    /// PEM file of the CA certificates to trust for https remotes (a private CA).
    #[arg(
        id = "git_ca_file",
        long = "git-ca-file",
        env = "PERFBISECT_GIT_CA_FILE"
    )]
    pub ca_file: Option<PathBuf>,
    /// A git credential store (lines `https://user:token@host`) for https remotes.
    #[arg(
        id = "git_credentials_file",
        long = "git-credentials-file",
        env = "PERFBISECT_GIT_CREDENTIALS_FILE"
    )]
    pub credentials_file: Option<PathBuf>,
    /// Private key for ssh remotes. Without it, ssh's defaults and the agent in
    /// `SSH_AUTH_SOCK` are used.
    #[arg(
        id = "git_ssh_key",
        long = "git-ssh-key",
        env = "PERFBISECT_GIT_SSH_KEY"
    )]
    pub ssh_key: Option<PathBuf>,
    /// known_hosts file for ssh remotes; a host that is not in it is refused.
    #[arg(
        id = "git_ssh_known_hosts",
        long = "git-ssh-known-hosts",
        env = "PERFBISECT_GIT_SSH_KNOWN_HOSTS"
    )]
    pub ssh_known_hosts: Option<PathBuf>,
    /// Fetch from a lab-local mirror instead: `MIRROR=ORIGINAL` (URL prefixes, as git's
    /// `url.MIRROR.insteadOf=ORIGINAL`). Set it on the workers of a host group so that a
    /// large tree is not cloned from the internet by every host. Repeat, or separate by commas.
    #[arg(
        id = "git_mirrors",
        value_name = "MIRROR=ORIGINAL",
        long = "git-mirror",
        env = "PERFBISECT_GIT_MIRRORS",
        value_delimiter = ','
    )]
    pub mirrors: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("`{url}`: put credentials in the credentials file or the ssh key, not in the URL")]
    SecretInUrl { url: String },
    #[error("--git-mirror `{0}` is not MIRROR=ORIGINAL")]
    Mirror(String),
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("cannot fetch `{url}`: {reason}")]
    Failed { url: String, reason: String },
    #[error("cannot fetch `{url}`: timed out: the remote sent nothing for {secs} s")]
    TimedOut { url: String, secs: u64 },
}

/// `scheme://user:password@host/...` → `scheme://host/...`; other text unchanged. Applied
/// to every URL this crate prints, in case one came from somewhere that had a secret.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match word.split_once("://") {
            Some((scheme, rest)) => {
                let end = rest.find('/').unwrap_or(rest.len());
                match rest[..end].rfind('@') {
                    Some(at) => {
                        out.push_str(scheme);
                        out.push_str("://");
                        out.push_str(&rest[at + 1..]);
                    }
                    None => out.push_str(word),
                }
            }
            None => out.push_str(word),
        }
    }
    out
}

/// Refuses a URL that carries a password, before anything stores it: credentials belong in
/// the credentials file or the ssh key.
pub fn check_url(url: &str) -> Result<(), FetchError> {
    if has_password(url) {
        return Err(FetchError::SecretInUrl { url: redact(url) });
    }
    Ok(())
}

/// True when `url` carries a password (`https://user:secret@host`).
fn has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority
        .rfind('@')
        .is_some_and(|at| authority[..at].contains(':'))
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

impl GitAuth {
    /// The `git -c` settings and environment of every fetch.
    fn command(&self, mirror: &Path) -> Result<Command, FetchError> {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(mirror);
        // Never ask a terminal for a password: a wrong credential is an error, not a hang.
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "true")
            .env("SSH_ASKPASS", "true")
            .env_remove("GIT_DIR");
        if let Some(ca) = &self.ca_file {
            // The environment variable, because it outranks every config file (and some
            // hosts set it to the system bundle).
            cmd.env("GIT_SSL_CAINFO", ca);
        }
        if let Some(store) = &self.credentials_file {
            // Read-only use of the store: git's own `store` helper would erase a credential
            // from the operator's file after one failed attempt.
            cmd.arg("-c").arg("credential.helper=").arg("-c").arg(format!(
                "credential.helper=!f() {{ test \"$1\" = get && git credential-store --file={} get; }}; f",
                quote(store)
            ));
        }
        let connect_secs = CONNECT_MS.load(Ordering::Relaxed).div_ceil(1000);
        let stall_secs = STALL_MS.load(Ordering::Relaxed).div_ceil(1000);
        // http(s): curl gives up below 1 byte/s over the stall limit.
        cmd.arg("-c")
            .arg("http.lowSpeedLimit=1")
            .arg("-c")
            .arg(format!("http.lowSpeedTime={stall_secs}"));
        let mut ssh = format!("ssh -o BatchMode=yes -o ConnectTimeout={connect_secs}");
        if let Some(key) = &self.ssh_key {
            ssh += &format!(" -i {} -o IdentitiesOnly=yes", quote(key));
        }
        if let Some(hosts) = &self.ssh_known_hosts {
            ssh += &format!(
                " -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes",
                quote(hosts)
            );
        }
        cmd.env("GIT_SSH_COMMAND", ssh);
        for m in &self.mirrors {
            let (mirror, original) = m
                .split_once('=')
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .ok_or_else(|| FetchError::Mirror(m.clone()))?;
            cmd.arg("-c")
                .arg(format!("url.{mirror}.insteadOf={original}"));
        }
        Ok(cmd)
    }

    /// Creates (if needed) the bare repository `mirror` and fetches every branch and tag of
    /// `url` into it, mirror-style. Incremental: only missing objects travel.
    pub fn fetch(&self, mirror: &Path, url: &str) -> Result<(), FetchError> {
        check_url(url)?;
        if !mirror.join("HEAD").exists() {
            std::fs::create_dir_all(mirror).map_err(FetchError::Spawn)?;
            let out = Command::new("git")
                .args(["init", "--bare", "--quiet"])
                .arg(mirror)
                .stdin(Stdio::null())
                .output()
                .map_err(FetchError::Spawn)?;
            if !out.status.success() {
                return Err(FetchError::Failed {
                    url: redact(url),
                    reason: redact(String::from_utf8_lossy(&out.stderr).trim()),
                });
            }
        }
        let mut cmd = self.command(mirror)?;
        // A commit-graph, kept up to date by every fetch (split, so a fetch adds only its new
        // commits): walks read parents from it instead of parsing each commit, 0.2 s against
        // 0.7 s for the server's walk of 100,000 candidates (`git rev-list --parents`).
        cmd.arg("-c").arg("fetch.writeCommitGraph=true");
        // --progress: git reports on stderr all through a transfer, which is how a stalled
        // remote (git:// and ssh have no timeout of their own) is told from a slow one.
        cmd.args([
            "fetch",
            "--progress",
            "--prune",
            "--no-write-fetch-head",
            "--",
        ])
        .arg(url)
        .args(["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        tracing::debug!(url = %redact(url), mirror = %mirror.display(), "git fetch");
        let (status, stderr) =
            run_watched(cmd, Duration::from_millis(STALL_MS.load(Ordering::Relaxed))).map_err(
                |e| match e {
                    Watched::Spawn(e) => FetchError::Spawn(e),
                    Watched::Stalled(d) => FetchError::TimedOut {
                        url: redact(url),
                        secs: d.as_secs().max(1),
                    },
                },
            )?;
        if status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&stderr);
        // Progress lines are rewritten in place with `\r`; only the messages remain.
        let reason = stderr
            .lines()
            .filter_map(|l| l.rsplit('\r').next())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .filter(|l| !is_progress(l))
            .collect::<Vec<_>>()
            .join("; ");
        Err(FetchError::Failed {
            url: redact(url),
            reason: redact(&reason),
        })
    }
}

fn is_progress(line: &str) -> bool {
    let l = line.trim_start_matches("remote: ");
    [
        "Enumerating objects",
        "Counting objects",
        "Compressing objects",
        "Receiving objects",
        "Resolving deltas",
        "Total ",
    ]
    .iter()
    .any(|p| l.starts_with(p))
}

enum Watched {
    Spawn(std::io::Error),
    Stalled(Duration),
}

/// Runs `cmd` (stderr piped) to its end, and kills it once its stderr has been silent for
/// `stall`. Returns its status and everything it wrote on stderr.
fn run_watched(
    mut cmd: Command,
    stall: Duration,
) -> Result<(std::process::ExitStatus, Vec<u8>), Watched> {
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(Watched::Spawn)?;
    let mut err = child.stderr.take().expect("stderr is piped");
    let last = Arc::new(AtomicU64::new(0));
    let seen = last.clone();
    // Dropped by the reader when the child's stderr closes: the child is exiting.
    let (closing, closed) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let _closing = closing;
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            seen.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        all
    });
    loop {
        if let Some(status) = child.try_wait().map_err(Watched::Spawn)? {
            let stderr = reader.join().unwrap_or_default();
            return Ok((status, stderr));
        }
        let quiet = started
            .elapsed()
            .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
        if quiet >= stall {
            let _ = child.kill();
            let _ = child.wait();
            // Not joined: a helper git started (ssh, a remote helper) may still hold the pipe.
            drop(reader);
            return Err(Watched::Stalled(stall));
        }
        // The child's end is polled (std has no wait with a deadline): every 100 ms while
        // its stderr is open, and at once when it closes (a no-op fetch takes ~25 ms).
        if let Err(std::sync::mpsc::RecvTimeoutError::Disconnected) =
            closed.recv_timeout(Duration::from_millis(100))
        {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn secrets_are_stripped_from_urls_and_refused_in_them() {
        assert_eq!(
            redact("cannot reach https://bob:hunter2@git.example.org/linux.git now"),
            "cannot reach https://git.example.org/linux.git now"
        );
        assert_eq!(redact("ssh://git@host:22/x.git"), "ssh://host:22/x.git");
        assert_eq!(redact("/srv/git/a@b.git"), "/srv/git/a@b.git");
        let dir = tempfile::tempdir().unwrap();
        let e = GitAuth::default()
            .fetch(
                &dir.path().join("m.git"),
                "https://bob:hunter2@git.example.org/x.git",
            )
            .unwrap_err();
        assert!(matches!(e, FetchError::SecretInUrl { .. }));
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(!dir.path().join("m.git").exists(), "nothing is created");
    }

    #[test]
    fn fetches_incrementally_and_through_a_mirror_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        git(&src, &["init", "-q", "-b", "main"]);
        git(&src, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let mirror = dir.path().join("m.git");
        let auth = GitAuth::default();
        auth.fetch(&mirror, src.to_str().unwrap()).unwrap();
        git(&src, &["commit", "-q", "--allow-empty", "-m", "two"]);
        git(&src, &["tag", "v1"]);
        auth.fetch(&mirror, src.to_str().unwrap()).unwrap();
        let log = Command::new("git")
            .args([
                "--git-dir",
                mirror.to_str().unwrap(),
                "log",
                "--format=%s",
                "v1",
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&log.stdout), "two\none\n");

        // A URL nobody can reach is served by the lab's mirror.
        let rewritten = GitAuth {
            mirrors: vec![format!(
                "{}/=https://git.example.invalid/",
                dir.path().display()
            )],
            ..GitAuth::default()
        };
        let other = dir.path().join("other.git");
        rewritten
            .fetch(&other, "https://git.example.invalid/src")
            .unwrap();
        assert!(other.join("refs/tags/v1").exists() || other.join("packed-refs").exists());

        let e = auth
            .fetch(&dir.path().join("x.git"), "/nonexistent/repo")
            .unwrap_err();
        assert!(matches!(e, FetchError::Failed { .. }), "{e}");
    }
}
