//! The worker's own mirrors and build trees.
//!
//! A build tree is one directory per (commit, build recipe hash); a marker file says its
//! build succeeded, so a commit measured again is never rebuilt.

use git2::{Oid, Repository, build::CheckoutBuilder};
use std::path::{Path, PathBuf};

const BUILT_MARKER: &str = ".perfbisect-built";

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("commit {sha} is not in {url}")]
    MissingCommit { sha: String, url: String },
}

#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// A checked-out tree, and whether its build is already done.
#[derive(Debug)]
pub struct Tree {
    pub dir: PathBuf,
    pub built: bool,
}

fn short_hash(s: &str) -> String {
    // Stable and short: FNV-1a is enough to name a directory after a URL.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

impl Workspace {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn mirror(&self, url: &str) -> Result<Repository, CheckoutError> {
        let path = self
            .root
            .join("mirrors")
            .join(format!("{}.git", short_hash(url)));
        match Repository::open_bare(&path) {
            Ok(r) => Ok(r),
            Err(_) => {
                std::fs::create_dir_all(&path)?;
                Ok(Repository::init_bare(&path)?)
            }
        }
    }

    /// The tree for `sha` built with the recipe hashed as `build_hash`, checked out if needed.
    pub fn prepare(&self, url: &str, sha: &str, build_hash: &str) -> Result<Tree, CheckoutError> {
        let dir = self
            .root
            .join("builds")
            .join(format!("{sha}-{}", &build_hash[..12.min(build_hash.len())]));
        if dir.join(BUILT_MARKER).exists() {
            return Ok(Tree { dir, built: true });
        }
        let repo = self.mirror(url)?;
        let oid = Oid::from_str(sha)?;
        if repo.find_commit(oid).is_err() {
            let mut remote = repo.remote_anonymous(url)?;
            remote.fetch(
                &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
                None,
                None,
            )?;
        }
        let commit = repo
            .find_commit(oid)
            .map_err(|_| CheckoutError::MissingCommit {
                sha: sha.into(),
                url: url.into(),
            })?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        repo.checkout_tree(
            commit.as_object(),
            Some(CheckoutBuilder::new().force().target_dir(&dir)),
        )?;
        Ok(Tree { dir, built: false })
    }

    pub fn mark_built(tree: &Path) -> std::io::Result<()> {
        std::fs::write(tree.join(BUILT_MARKER), b"")
    }
}
