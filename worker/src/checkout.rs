//! The worker's own git mirrors, and checkouts from them.
//!
//! One bare mirror per repository URL, fetched when a commit is missing. A command build
//! checks its commit out into a fresh directory (which becomes its cache entry); a kernel
//! build reuses one source tree per repository, moved from commit to commit, so that make
//! only rebuilds what changed.

use git2::{Oid, Repository, build::CheckoutBuilder};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("commit {sha} is not in {url}")]
    MissingCommit { sha: String, url: String },
    #[error(transparent)]
    Fetch(#[from] perfbisect_gitfetch::FetchError),
}

#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// How remotes are reached, and the lab-local mirrors that stand in for them.
    auth: perfbisect_gitfetch::GitAuth,
}

/// Stable and short: FNV-1a is enough to name a directory after a URL.
pub fn short_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

impl Workspace {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            auth: Default::default(),
        }
    }

    /// Fetches with `auth` from now on.
    pub fn with_auth(mut self, auth: perfbisect_gitfetch::GitAuth) -> Self {
        self.auth = auth;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn mirror_path(&self, url: &str) -> PathBuf {
        self.root
            .join("mirrors")
            .join(format!("{}.git", short_hash(url)))
    }

    /// The mirror of `url`, holding `sha` (fetched if it did not).
    fn mirror_with(&self, url: &str, sha: &str) -> Result<(Repository, Oid), CheckoutError> {
        let path = self.mirror_path(url);
        let oid = Oid::from_str(sha)?;
        let has =
            |path: &Path| Repository::open_bare(path).is_ok_and(|r| r.find_commit(oid).is_ok());
        if !has(&path) {
            // The git command: https and ssh with the configured credentials, through a
            // lab-local mirror when one is configured, and only the missing objects.
            self.auth.fetch(&path, url)?;
        }
        let repo = Repository::open_bare(&path)?;
        if repo.find_commit(oid).is_err() {
            return Err(CheckoutError::MissingCommit {
                sha: sha.into(),
                url: url.into(),
            });
        }
        Ok((repo, oid))
    }

    /// Checks `sha` out into `dir`, which must be empty or absent.
    pub fn checkout_into(&self, url: &str, sha: &str, dir: &Path) -> Result<(), CheckoutError> {
        let (repo, oid) = self.mirror_with(url, sha)?;
        let commit = repo.find_commit(oid)?;
        std::fs::create_dir_all(dir)?;
        repo.checkout_tree(
            commit.as_object(),
            Some(CheckoutBuilder::new().force().target_dir(dir)),
        )?;
        Ok(())
    }

    /// The persistent source tree of `url` for kernel builds, moved to `sha`. It is a
    /// repository of its own borrowing the mirror's objects (no copy), so checkout only
    /// rewrites the files that differ and make's timestamps stay meaningful.
    pub fn source_tree(&self, url: &str, sha: &str) -> Result<PathBuf, CheckoutError> {
        let (_mirror, oid) = self.mirror_with(url, sha)?;
        let dir = self.root.join("src").join(short_hash(url));
        let repo = match Repository::open(&dir) {
            Ok(r) => r,
            Err(_) => {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)?;
                }
                let repo = Repository::init(&dir)?;
                let objects = self.mirror_path(url).join("objects");
                std::fs::write(
                    dir.join(".git/objects/info/alternates"),
                    format!("{}\n", objects.canonicalize()?.display()),
                )?;
                drop(repo);
                Repository::open(&dir)?
            }
        };
        let commit = repo.find_commit(oid)?;
        repo.checkout_tree(
            commit.as_object(),
            Some(CheckoutBuilder::new().force().remove_untracked(true)),
        )?;
        repo.set_head_detached(oid)?;
        Ok(dir)
    }
}
