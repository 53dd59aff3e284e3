//! Building a commit for a job, through the cache: a commit built once for a recipe is
//! never built again while its entry is cached.
//!
//! Two recipes: `command` (any project: a shell command in a fresh checkout, which becomes
//! the artifact) and `kernel` (a Linux tree: the job's kconfig from the server, `make
//! olddefconfig`, image and modules, packed for booting).

pub mod command;
pub mod kernel;

use crate::cache::{Cache, Entry};
use crate::checkout::{CheckoutError, Workspace};
use crate::client::{Client, ClientError};
use crate::exec;
use perfbisect_wire::BuildKind;
use perfbisect_wire::worker::TaskAssignment;
use std::time::Instant;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("checking the commit out: {0}")]
    Checkout(#[from] CheckoutError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("fetching kconfig `{name}` from the server: {source}")]
    Kconfig {
        name: String,
        #[source]
        source: ClientError,
    },
    /// The worker lacks a tool the job needs: not the commit's fault.
    #[error("this worker cannot build the job: {0}")]
    NotConfigured(String),
}

/// Everything a build needs from the worker.
pub struct Builder {
    pub workspace: Workspace,
    pub cache: Cache,
    pub client: Client,
    pub jobs: usize,
    pub ccache: bool,
}

#[derive(Debug)]
pub enum Built {
    /// The artifacts, and whether they came from the cache.
    Ready {
        entry: Entry,
        cached: bool,
    },
    /// The commit does not build with this recipe: it is untestable.
    Failed {
        message: String,
        log: String,
    },
    Cancelled,
}

/// A finished build attempt, with its log and duration, for the build report.
pub struct Attempt {
    pub built: Built,
    pub log: String,
    pub secs: f64,
}

impl Builder {
    /// The artifacts of `sha` for the task's job: from the cache, or built now.
    pub async fn build(
        &self,
        task: &TaskAssignment,
        sha: &str,
        env: &[(String, String)],
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Attempt, BuildError> {
        let build_hash = task.job.build_hash();
        if let Some(entry) = self.cache.lookup(sha, &build_hash) {
            tracing::info!(sha, dir = %entry.dir.display(), "build cached");
            let log = entry.log();
            return Ok(Attempt {
                built: Built::Ready {
                    entry,
                    cached: true,
                },
                log,
                secs: 0.0,
            });
        }
        if let Some(cc) = &task.job.compiler
            && which(cc).is_none()
        {
            return Err(BuildError::NotConfigured(format!(
                "compiler `{cc}` is not installed"
            )));
        }
        tracing::info!(sha, kind = ?task.job.build.kind, "building");
        let started = Instant::now();
        let out = match task.job.build.kind {
            BuildKind::Command => command::build(self, task, sha, env, cancel).await?,
            BuildKind::Kernel => kernel::build(self, task, sha, env, cancel).await?,
        };
        let secs = started.elapsed().as_secs_f64();
        let log = out.log();
        let built = match out.ending {
            exec::Ending::Cancelled => {
                self.cache.discard(sha, &build_hash)?;
                Built::Cancelled
            }
            _ if out.success() => {
                let entry = self.cache.commit(sha, &build_hash, secs, &log)?;
                let evicted = self.cache.evict(std::slice::from_ref(&entry.dir))?;
                if !evicted.is_empty() {
                    tracing::info!(evicted = evicted.len(), "build cache over its bound");
                }
                Built::Ready {
                    entry,
                    cached: false,
                }
            }
            _ => {
                self.cache.discard(sha, &build_hash)?;
                tracing::warn!(
                    sha,
                    ending = out.describe(),
                    "build failed: commit untestable"
                );
                Built::Failed {
                    message: format!("build {}", out.describe()),
                    log: log.clone(),
                }
            }
        };
        Ok(Attempt { built, log, secs })
    }
}

/// The full path of `program` on PATH (or itself, if it is a path that exists).
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        let p = std::path::PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}
