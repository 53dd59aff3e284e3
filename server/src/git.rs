//! Bare mirrors of the repositories, and what the server asks of them: resolve revisions,
//! check ancestry, build a bisect's candidate set.
//!
//! Everything here blocks (libgit2); async callers wrap it in `spawn_blocking`.

use git2::{Oid, Repository, Sort};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot fetch `{url}`: {source}")]
    Fetch { url: String, source: git2::Error },
    #[error("revision `{rev}` is not known in the repository")]
    UnknownRevision { rev: String },
    #[error("revision `{rev}` is ambiguous")]
    AmbiguousRevision { rev: String },
    #[error(transparent)]
    Git(#[from] git2::Error),
    /// Fetching over the network (the git command: https, ssh, local paths).
    #[error(transparent)]
    Remote(#[from] perfbisect_gitfetch::FetchError),
    /// The repository URL policy refuses the URL (`url_policy`).
    #[error("refused by the repository URL policy: {0}")]
    Refused(#[from] crate::url_policy::UrlRefused),
}

/// The mirror directory of every repository, under one root.
#[derive(Debug, Clone)]
pub struct Mirrors {
    root: PathBuf,
    /// How remotes are reached (CA file, credential store, ssh key, known_hosts).
    auth: perfbisect_gitfetch::GitAuth,
    /// Which URLs may be fetched at all.
    urls: std::sync::Arc<crate::url_policy::UrlPolicy>,
}

/// One commit of a candidate set.
#[derive(Debug, Clone)]
pub struct CandidateCommit {
    pub sha: String,
    /// Indices (into the candidate list) of parents that are candidates too.
    pub parents: Vec<usize>,
    /// The first parent is on the good side while another parent is a candidate, so
    /// `parents[0]` is not the first parent (first-parent mode needs to know).
    pub first_parent_outside: bool,
    pub subject: String,
    pub author: String,
}

/// The resolved range of a bisect.
#[derive(Debug, Clone)]
pub struct Range {
    pub good: String,
    pub bad: String,
    /// Set when good was not an ancestor of bad and the merge base stands in for it.
    pub merge_base_note: Option<String>,
    /// Topological order, parents first; the bad commit last.
    pub candidates: Vec<CandidateCommit>,
    pub good_subject: String,
    pub good_author: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    #[error("revision `{rev}` is not known in the repository")]
    UnknownRevision { field: &'static str, rev: String },
    #[error("good ({good}) and bad ({bad}) have no common history")]
    Unrelated { good: String, bad: String },
    #[error(
        "good `{good}` is not an ancestor of bad `{bad}`; their merge base is {merge_base}: submit again with \
         good = {merge_base}, or with use_merge_base = true"
    )]
    NotAncestor {
        good: String,
        bad: String,
        merge_base: String,
    },
    #[error("the range {good}..{bad} is empty: bad is an ancestor of (or the same commit as) good")]
    Empty { good: String, bad: String },
    #[error(transparent)]
    Git(#[from] GitError),
}

impl From<git2::Error> for RangeError {
    fn from(e: git2::Error) -> Self {
        RangeError::Git(GitError::Git(e))
    }
}

impl Mirrors {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            auth: Default::default(),
            urls: Default::default(),
        }
    }

    /// Checks every URL against `policy` before fetching it.
    pub fn with_url_policy(mut self, policy: crate::url_policy::UrlPolicy) -> Self {
        self.urls = std::sync::Arc::new(policy);
        self
    }

    /// Checks `url` against the URL policy alone (may resolve its host: blocking).
    pub fn check_url(&self, url: &str) -> Result<(), crate::url_policy::UrlRefused> {
        self.urls.check(url)
    }

    /// Checks `url` against the URL policy off the async threads, for a request: a refusal
    /// is a 422 naming `field`. A host name whose lookup takes longer than a few seconds is
    /// left to the fetch, which checks the policy again before it connects.
    pub async fn check_url_for_request(
        &self,
        url: &str,
        field: &str,
    ) -> Result<(), crate::error::ApiError> {
        let (mirrors, owned) = (self.clone(), url.to_string());
        let lookup = tokio::task::spawn_blocking(move || mirrors.check_url(&owned));
        match tokio::time::timeout(std::time::Duration::from_secs(5), lookup).await {
            Ok(Ok(Err(refused))) => Err(crate::error::ApiError::unprocessable(
                field,
                format!("refused by the repository URL policy: {refused}"),
            )),
            _ => Ok(()),
        }
    }

    /// Uses `auth` for every fetch from now on.
    pub fn with_auth(mut self, auth: perfbisect_gitfetch::GitAuth) -> Self {
        self.auth = auth;
        self
    }

    pub fn path(&self, repo_id: i64) -> PathBuf {
        self.root.join(format!("{repo_id}.git"))
    }

    /// Creates or updates the bare mirror of `url` for repository `repo_id`, with the git
    /// command (incremental; https and ssh with the configured credentials).
    pub fn fetch(&self, repo_id: i64, url: &str) -> Result<(), GitError> {
        self.urls.check(url)?;
        Ok(self.auth.fetch(&self.path(repo_id), url)?)
    }

    pub fn open(&self, repo_id: i64) -> Result<Repository, GitError> {
        Ok(Repository::open_bare(self.path(repo_id))?)
    }
}

/// Fetches every branch and tag of `url` into `repo`, mirror-style.
pub fn fetch_all(repo: &Repository, url: &str) -> Result<(), GitError> {
    let mut remote = repo
        .remote_anonymous(url)
        .map_err(|source| GitError::Fetch {
            url: url.into(),
            source,
        })?;
    remote
        .fetch(
            &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
            None,
            None,
        )
        .map_err(|source| GitError::Fetch {
            url: url.into(),
            source,
        })
}

/// Resolves a sha, short sha, branch, tag or any revspec to a commit.
pub fn resolve(repo: &Repository, rev: &str) -> Result<Oid, GitError> {
    match repo.revparse_single(rev) {
        Ok(obj) => Ok(obj
            .peel_to_commit()
            .map_err(|_| GitError::UnknownRevision { rev: rev.into() })?
            .id()),
        Err(e) if e.code() == git2::ErrorCode::Ambiguous => {
            Err(GitError::AmbiguousRevision { rev: rev.into() })
        }
        Err(_) => Err(GitError::UnknownRevision { rev: rev.into() }),
    }
}

/// Resolves good and bad and builds the candidate set: commits reachable from bad and not
/// from good, merges included, parents first.
pub fn range(
    repo: &Repository,
    good_rev: &str,
    bad_rev: &str,
    use_merge_base: bool,
) -> Result<Range, RangeError> {
    let mut good = resolve(repo, good_rev).map_err(|_| RangeError::UnknownRevision {
        field: "good",
        rev: good_rev.into(),
    })?;
    let bad = resolve(repo, bad_rev).map_err(|_| RangeError::UnknownRevision {
        field: "bad",
        rev: bad_rev.into(),
    })?;
    let mut note = None;
    // One walk answers the usual case: `bad ^good` is empty exactly when bad is good or one
    // of its ancestors, and good is an ancestor of bad exactly when some commit of the walk
    // has good as a parent. (libgit2's descendant checks would walk the range twice more.)
    let walked = walk_range(repo, bad, good)?;
    if walked.is_empty() {
        return Err(RangeError::Empty {
            good: good_rev.into(),
            bad: bad_rev.into(),
        });
    }
    let good_is_ancestor = walked
        .iter()
        .any(|(_, c)| c.parent_ids().any(|p| p == good));
    if !good_is_ancestor {
        let base = repo
            .merge_base(good, bad)
            .map_err(|_| RangeError::Unrelated {
                good: good_rev.into(),
                bad: bad_rev.into(),
            })?;
        if !use_merge_base {
            return Err(RangeError::NotAncestor {
                good: good_rev.into(),
                bad: bad_rev.into(),
                merge_base: short(base),
            });
        }
        note = Some(format!(
            "good {} is not an ancestor of bad {}; bisecting from their merge base {}",
            short(good),
            short(bad),
            short(base)
        ));
        good = base;
    }
    let walked = if good_is_ancestor {
        walked
    } else {
        walk_range(repo, bad, good)?
    };
    let index: HashMap<Oid, usize> = walked
        .iter()
        .enumerate()
        .map(|(i, (o, _))| (*o, i))
        .collect();
    let mut candidates = Vec::with_capacity(walked.len());
    for (oid, c) in &walked {
        candidates.push(CandidateCommit {
            sha: oid.to_string(),
            parents: c
                .parent_ids()
                .filter_map(|p| index.get(&p).copied())
                .collect(),
            first_parent_outside: c.parent_id(0).is_ok_and(|p| !index.contains_key(&p))
                && c.parent_ids().any(|p| index.contains_key(&p)),
            subject: summary(c),
            author: author(c),
        });
    }
    // libgit2's topological order puts bad last when walking from bad alone; keep it an invariant.
    debug_assert_eq!(
        candidates.last().map(|c| c.sha.as_str()),
        Some(bad.to_string().as_str())
    );
    let gc = repo.find_commit(good)?;
    Ok(Range {
        good: good.to_string(),
        bad: bad.to_string(),
        merge_base_note: note,
        candidates,
        good_subject: summary(&gc),
        good_author: author(&gc),
    })
}

/// The commits reachable from `bad` and not from `good`, parents first, each parsed once.
fn walk_range(
    repo: &Repository,
    bad: Oid,
    good: Oid,
) -> Result<Vec<(Oid, git2::Commit<'_>)>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.push(bad)?;
    walk.hide(good)?;
    walk.map(|oid| {
        let oid = oid?;
        Ok((oid, repo.find_commit(oid)?))
    })
    .collect()
}

fn summary(c: &git2::Commit) -> String {
    String::from_utf8_lossy(c.summary_bytes().unwrap_or_default()).into_owned()
}

fn author(c: &git2::Commit) -> String {
    let a = c.author();
    format!(
        "{} <{}>",
        String::from_utf8_lossy(a.name_bytes()),
        String::from_utf8_lossy(a.email_bytes())
    )
}

fn short(oid: Oid) -> String {
    oid.to_string()[..12].to_string()
}

/// True when `path` holds a bare repository.
pub fn is_mirror(path: &Path) -> bool {
    Repository::open_bare(path).is_ok()
}
