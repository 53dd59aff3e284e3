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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
        let mut ssh = String::from("ssh -o BatchMode=yes");
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
        if has_password(url) {
            return Err(FetchError::SecretInUrl { url: redact(url) });
        }
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
        cmd.args(["fetch", "--quiet", "--prune", "--no-write-fetch-head", "--"])
            .arg(url)
            .args(["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"])
            .stdin(Stdio::null());
        tracing::debug!(url = %redact(url), mirror = %mirror.display(), "git fetch");
        let out = cmd.output().map_err(FetchError::Spawn)?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        Err(FetchError::Failed {
            url: redact(url),
            reason: redact(&reason),
        })
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
