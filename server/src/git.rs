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
    let (mut range, details) = range_outline(repo, good_rev, bad_rev, use_merge_base)?;
    details.read(|i, subject, author| {
        let c = &mut range.candidates[i];
        (c.subject, c.author) = (subject, author);
        true
    })?;
    Ok(range)
}

/// `range` without the candidates' subjects and authors, and where to read them: a
/// caller can store the candidates first and read them later (`Details::read`).
pub fn range_outline(
    repo: &Repository,
    good_rev: &str,
    bad_rev: &str,
    use_merge_base: bool,
) -> Result<(Range, Details), RangeError> {
    let (good, bad) = resolve_range(repo, good_rev, bad_rev)?;
    range_outline_of(repo, good_rev, bad_rev, good, bad, use_merge_base)
}

/// The commits good and bad name, each refusal naming its field.
pub fn resolve_range(
    repo: &Repository,
    good_rev: &str,
    bad_rev: &str,
) -> Result<(Oid, Oid), RangeError> {
    let good = resolve(repo, good_rev).map_err(|_| RangeError::UnknownRevision {
        field: "good",
        rev: good_rev.into(),
    })?;
    let bad = resolve(repo, bad_rev).map_err(|_| RangeError::UnknownRevision {
        field: "bad",
        rev: bad_rev.into(),
    })?;
    Ok((good, bad))
}

/// `range_outline` of the commits `good_rev` and `bad_rev` resolved to (`resolve_range`):
/// the same for the same two commits, whatever the names mean by then.
pub fn range_outline_of(
    repo: &Repository,
    good_rev: &str,
    bad_rev: &str,
    good: Oid,
    bad: Oid,
    use_merge_base: bool,
) -> Result<(Range, Details), RangeError> {
    let mut good = good;
    let mut note = None;
    // One walk answers the usual case: `bad ^good` is empty exactly when bad is good or one
    // of its ancestors, and good is an ancestor of bad exactly when some commit of the walk
    // has good as a parent. (libgit2's descendant checks would walk the range twice more.)
    let (walked, read) = walk_range(repo, bad, good)?;
    if walked.is_empty() {
        return Err(RangeError::Empty {
            good: good_rev.into(),
            bad: bad_rev.into(),
        });
    }
    let good_is_ancestor = walked.iter().any(|w| w.parents.contains(&good));
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
    let (walked, read) = if good_is_ancestor {
        (walked, read)
    } else {
        walk_range(repo, bad, good)?
    };
    let index: HashMap<Oid, usize> = walked.iter().enumerate().map(|(i, w)| (w.oid, i)).collect();
    let details = if read {
        Details::Read
    } else {
        Details::Pending {
            mirror: repo.path().to_path_buf(),
            commits: walked.iter().map(|w| w.oid).collect(),
        }
    };
    let mut candidates = Vec::with_capacity(walked.len());
    for w in walked {
        let inside = |p: &Oid| index.contains_key(p);
        candidates.push(CandidateCommit {
            sha: w.oid.to_string(),
            parents: w
                .parents
                .iter()
                .filter_map(|p| index.get(p).copied())
                .collect(),
            first_parent_outside: w.parents.first().is_some_and(|p| !inside(p))
                && w.parents.iter().any(inside),
            subject: w.subject,
            author: w.author,
        });
    }
    // libgit2's topological order puts bad last when walking from bad alone; keep it an invariant.
    debug_assert_eq!(
        candidates.last().map(|c| c.sha.as_str()),
        Some(bad.to_string().as_str())
    );
    let gc = repo.find_commit(good)?;
    let range = Range {
        good: good.to_string(),
        bad: bad.to_string(),
        merge_base_note: note,
        candidates,
        good_subject: summary(&gc),
        good_author: author(&gc),
    };
    Ok((range, details))
}

/// One commit of a walk: its parents, summary and author (empty until read).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Walked {
    oid: Oid,
    parents: Vec<Oid>,
    subject: String,
    author: String,
}

/// The commits reachable from `bad` and not from `good`, parents first (libgit2's
/// topological order, see `libgit2_topo_order`), and whether their subjects and authors
/// are read. Walked with `git rev-list`, which reads the commit-graph the fetch writes
/// (0.15-0.3 s for 100,000 commits, where libgit2's revwalk took 1.4 s reading every commit);
/// libgit2's revwalk stays as the fallback should the command fail.
fn walk_range(repo: &Repository, bad: Oid, good: Oid) -> Result<(Vec<Walked>, bool), git2::Error> {
    match walk_with_git(repo.path(), bad, good) {
        Ok(walked) => Ok((walked, false)),
        Err(e) => {
            tracing::warn!(
                mirror = %repo.path().display(),
                error = %e,
                "git rev-list failed; walking the range with libgit2"
            );
            Ok((walk_with_git2(repo, bad, good)?, true))
        }
    }
}

/// `git` on a mirror, as the server reads it: replace refs ignored (libgit2 ignores them).
fn git_command(mirror: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("--no-replace-objects")
        .arg("--git-dir")
        .arg(mirror)
        .env_remove("GIT_DIR")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Waits for `child` once its output is read, turning a failure into an error.
fn finish(mut child: std::process::Child, what: &str) -> std::io::Result<()> {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "git {what}: {status}: {}",
            err.trim()
        )))
    }
}

/// The walk's commits and parents, from `git rev-list --parents` (ordered here).
fn walk_with_git(mirror: &Path, bad: Oid, good: Oid) -> std::io::Result<Vec<Walked>> {
    use std::io::BufRead;
    let mut child = git_command(mirror)
        .args(["rev-list", "--parents"])
        .arg(bad.to_string())
        .arg(format!("^{good}"))
        .arg("--")
        .spawn()?;
    let stdout = std::io::BufReader::with_capacity(1 << 16, child.stdout.take().expect("piped"));
    let oid = |s: &str| {
        Oid::from_str(s).map_err(|_| std::io::Error::other("git rev-list: not a commit id"))
    };
    let parsed: std::io::Result<Vec<Walked>> = stdout
        .lines()
        .map(|line| {
            let line = line?;
            let mut ids = line.split(' ');
            Ok(Walked {
                oid: oid(ids.next().unwrap_or_default())?,
                parents: ids.map(oid).collect::<std::io::Result<_>>()?,
                subject: String::new(),
                author: String::new(),
            })
        })
        .collect();
    if parsed.is_err() {
        let _ = child.kill();
    }
    finish(child, "rev-list")?;
    Ok(libgit2_topo_order(parsed?, bad))
}

/// Where a range's subjects and authors come from (`range_outline`).
#[derive(Debug)]
pub enum Details {
    /// In the range already (the libgit2 walk read them).
    Read,
    /// To be read from the mirror: the candidates' commits, by index.
    Pending { mirror: PathBuf, commits: Vec<Oid> },
}

impl Details {
    /// Hands each candidate's subject and author to `each`, by index, as they are read
    /// (`git cat-file --batch`: the raw commits, parsed as libgit2 parses them); `each`
    /// returns false to stop. Nothing for `Read`. Blocking.
    pub fn read(self, mut each: impl FnMut(usize, String, String) -> bool) -> Result<(), GitError> {
        let Details::Pending { mirror, commits } = self else {
            return Ok(());
        };
        let mut next = 0;
        let batch = read_with_git(&mirror, &commits, &mut |i, s, a| {
            next = i + 1;
            each(i, s, a)
        });
        match batch {
            // Every commit read, or `each` asked to stop: nothing more to hand over.
            Ok(_) => return Ok(()),
            Err(e) => {
                tracing::warn!(mirror = %mirror.display(), error = %e, "git cat-file failed; reading the commits with libgit2")
            }
        }
        // What git did not give, libgit2 reads.
        let repo = Repository::open_bare(&mirror)?;
        for (i, oid) in commits.iter().enumerate().skip(next) {
            let c = repo.find_commit(*oid)?;
            if !each(i, summary(&c), author(&c)) {
                break;
            }
        }
        Ok(())
    }
}

/// Reads `commits` through `git cat-file --batch`, handing each to `each` in order; false
/// when `each` stopped it (git ending early is an error).
fn read_with_git(
    mirror: &Path,
    commits: &[Oid],
    each: &mut dyn FnMut(usize, String, String) -> bool,
) -> std::io::Result<bool> {
    use std::io::{BufRead, Read, Write};
    let mut child = git_command(mirror)
        .args(["cat-file", "--batch", "--buffer"])
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let ids: Vec<Oid> = commits.to_vec();
    // Written beside the reading: git answers while it is asked, and a pipe holds little.
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut stdin);
        for id in ids {
            writeln!(w, "{id}")?;
        }
        w.flush()
    });
    let mut out = std::io::BufReader::with_capacity(1 << 16, child.stdout.take().expect("piped"));
    let mut header = String::new();
    let mut raw = Vec::new();
    let mut done = true;
    let bad = |what: &str| std::io::Error::other(format!("git cat-file: {what}"));
    let result = (|| -> std::io::Result<()> {
        for (i, oid) in commits.iter().enumerate() {
            header.clear();
            out.read_line(&mut header)?;
            let mut h = header.trim_end().split(' ');
            if h.next() != Some(&oid.to_string()) || h.next() != Some("commit") {
                return Err(bad(header.trim_end()));
            }
            let size: usize = h
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| bad("size"))?;
            raw.resize(size + 1, 0);
            out.read_exact(&mut raw)?;
            if raw.pop() != Some(b'\n') {
                return Err(bad("record end"));
            }
            let (subject, author) = raw_commit_details(&raw);
            if !each(i, subject, author) {
                done = false;
                return Ok(());
            }
        }
        Ok(())
    })();
    if result.is_err() || !done {
        let _ = child.kill();
    }
    let _ = writer.join();
    let finished = finish(child, "cat-file");
    result?;
    if done {
        finished?;
    }
    Ok(done)
}

/// The summary and author of a raw commit object, as libgit2 reads them (`summary`,
/// `author`): the message follows the first empty line; the author line's email lies
/// between its last `<` and its last `>`, name and email trimmed of "crud".
fn raw_commit_details(raw: &[u8]) -> (String, String) {
    let body = raw
        .windows(2)
        .position(|w| w == b"\n\n")
        .map_or(raw.len(), |p| p + 2);
    let headers = &raw[..body.min(raw.len())];
    let message = raw.get(body..).unwrap_or_default();
    // libgit2's message is a C string.
    let message = message.split(|&b| b == 0).next().unwrap_or_default();
    let author = headers
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"author "))
        .and_then(|line| {
            let lt = line.iter().rposition(|&b| b == b'<')?;
            let gt = line.iter().rposition(|&b| b == b'>')?;
            (gt > lt).then(|| (crud_trimmed(&line[..lt]), crud_trimmed(&line[lt + 1..gt])))
        })
        .map(|(name, email)| {
            format!(
                "{} <{}>",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(email)
            )
        })
        .unwrap_or_else(|| " <>".into());
    (
        String::from_utf8_lossy(&libgit2_summary(message)).into_owned(),
        author,
    )
}

/// libgit2's trimming of a signature's name and email (`extract_trimmed`): control
/// characters, spaces and `,:;<>"\'` off both ends.
fn crud_trimmed(s: &[u8]) -> &[u8] {
    let crud = |c: &u8| *c <= 32 || b",:;<>\"\\'".contains(c);
    let start = s.iter().position(|c| !crud(c)).unwrap_or(s.len());
    let end = s.iter().rposition(|c| !crud(c)).map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// libgit2's `git_commit_summary` of a raw message: the first paragraph, leading newlines
/// dropped, every run of whitespace that holds a newline made one space, trailing
/// whitespace dropped.
fn libgit2_summary(message: &[u8]) -> Vec<u8> {
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = message
        .iter()
        .position(|&c| c != b'\n')
        .unwrap_or(message.len());
    let msg = &message[start..];
    let mut summary = Vec::new();
    let mut space: Option<(usize, bool)> = None;
    for (i, &c) in msg.iter().enumerate() {
        if c == b'\n' {
            let rest = &msg[i + 1..];
            let blank = rest
                .iter()
                .position(|&b| !(is_space(b) && b != b'\n'))
                .is_none_or(|j| rest[j] == b'\n');
            if blank {
                break;
            }
        }
        if is_space(c) {
            let (at, newline) = space.unwrap_or((i, false));
            space = Some((at, newline || c == b'\n'));
        } else {
            if let Some((at, newline)) = space.take() {
                if newline {
                    summary.push(b' ');
                } else {
                    summary.extend_from_slice(&msg[at..i]);
                }
            }
            summary.push(c);
        }
    }
    summary
}

/// The order of libgit2's `TOPOLOGICAL | REVERSE` revwalk from `bad`, whatever order the
/// commits come in: its topological sort keeps a stack that starts with the one tip
/// (`bad`: every candidate is reached from it through candidates), pops a commit, and
/// pushes each parent, in parent order, once all its children are out; reversed, parents
/// come first. Parents outside the set are ignored.
fn libgit2_topo_order(walked: Vec<Walked>, bad: Oid) -> Vec<Walked> {
    let index: HashMap<Oid, usize> = walked.iter().enumerate().map(|(i, w)| (w.oid, i)).collect();
    let mut children = vec![0u32; walked.len()];
    for w in &walked {
        for p in &w.parents {
            if let Some(&j) = index.get(p) {
                children[j] += 1;
            }
        }
    }
    let mut order = Vec::with_capacity(walked.len());
    let mut stack: Vec<usize> = index.get(&bad).copied().into_iter().collect();
    while let Some(i) = stack.pop() {
        for p in &walked[i].parents {
            if let Some(&j) = index.get(p) {
                children[j] -= 1;
                if children[j] == 0 {
                    stack.push(j);
                }
            }
        }
        order.push(i);
    }
    debug_assert_eq!(
        order.len(),
        walked.len(),
        "every candidate is reached from bad"
    );
    let mut slots: Vec<Option<Walked>> = walked.into_iter().map(Some).collect();
    order
        .into_iter()
        .rev()
        .filter_map(|i| slots[i].take())
        .collect()
}

/// The same walk with libgit2's revwalk, each commit parsed once.
fn walk_with_git2(repo: &Repository, bad: Oid, good: Oid) -> Result<Vec<Walked>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.push(bad)?;
    walk.hide(good)?;
    walk.map(|oid| {
        let oid = oid?;
        let c = repo.find_commit(oid)?;
        Ok(Walked {
            oid,
            parents: c.parent_ids().collect(),
            subject: summary(&c),
            author: author(&c),
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    fn git(dir: &Path, args: &[&str], input: Option<&[u8]>) -> String {
        let mut child = Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        if let Some(input) = input {
            stdin.write_all(input).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// The walk and the commits' details as the server reads them with the git command.
    fn through_git(repo: &Repository, bad: Oid, good: Oid) -> Vec<Walked> {
        let mut walked = walk_with_git(repo.path(), bad, good).unwrap();
        let commits: Vec<Oid> = walked.iter().map(|w| w.oid).collect();
        let all = read_with_git(repo.path(), &commits, &mut |i, s, a| {
            (walked[i].subject, walked[i].author) = (s, a);
            true
        })
        .unwrap();
        assert!(all, "git cat-file read every commit");
        walked
    }

    /// A small xorshift generator: the same histories on every run.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// A history of `n` commits where a commit has one to three parents among the recent
    /// ones (octopus merges, criss-crosses), committer times with ties and some skew.
    fn random_history(dir: &Path, n: usize, seed: u64) -> Vec<String> {
        git(dir, &["init", "-q", "--bare"], None);
        let mut rng = Rng(seed);
        let mut import = String::new();
        for i in 1..=n {
            let t = 1_600_000_000 + i / 3 * 60 - rng.below(3) * 100;
            let msg = format!("commit {i}\n\nbody {i}\n");
            import += &format!(
                "commit refs/heads/c{i}\nmark :{i}\nauthor A{} <a{}@example.invalid> {t} +0000\n\
                 committer C <c@example.invalid> {t} +0000\ndata {}\n{msg}",
                i % 5,
                i % 7,
                msg.len()
            );
            if i > 1 {
                let parents = 1 + usize::from(rng.below(3) == 0) + usize::from(rng.below(8) == 0);
                let mut chosen = Vec::new();
                for _ in 0..parents {
                    let p = i - 1 - rng.below((i - 1).min(12));
                    if !chosen.contains(&p) {
                        chosen.push(p);
                    }
                }
                for (k, p) in chosen.iter().enumerate() {
                    import += &format!("{} :{p}\n", if k == 0 { "from" } else { "merge" });
                }
            }
            import += &format!("M 644 inline f{}\ndata 2\n{}\n\n", i % 4, i % 10);
        }
        git(dir, &["fast-import", "--quiet"], Some(import.as_bytes()));
        (1..=n)
            .map(|i| git(dir, &["rev-parse", &format!("c{i}")], None))
            .collect()
    }

    #[test]
    fn the_git_walk_gives_libgit2s_candidates_in_libgit2s_order() {
        for seed in [1u64, 7, 42] {
            let dir = tempfile::tempdir().unwrap();
            let shas = random_history(dir.path(), 300, seed);
            let repo = Repository::open_bare(dir.path()).unwrap();
            let mut rng = Rng(seed * 31 + 5);
            let mut compared = 0;
            for _ in 0..40 {
                let bad = Oid::from_str(&shas[100 + rng.below(200)]).unwrap();
                let good = Oid::from_str(&shas[rng.below(200)]).unwrap();
                let by_git = through_git(&repo, bad, good);
                let by_git2 = walk_with_git2(&repo, bad, good).unwrap();
                assert_eq!(by_git, by_git2, "seed {seed}: {good}..{bad}");
                compared += by_git.len();
            }
            assert!(
                compared > 1000,
                "the ranges are not all trivial: {compared}"
            );
        }
    }

    #[test]
    fn range_is_the_same_through_git_and_libgit2_with_merges_and_merge_bases() {
        let dir = tempfile::tempdir().unwrap();
        let shas = random_history(dir.path(), 200, 3);
        let repo = Repository::open_bare(dir.path()).unwrap();
        let (good, bad) = (&shas[60], &shas[199]);
        let r = range(&repo, good, bad, true).unwrap();
        let oracle = walk_with_git2(
            &repo,
            Oid::from_str(bad).unwrap(),
            Oid::from_str(&r.good).unwrap(),
        )
        .unwrap();
        assert_eq!(
            r.candidates.iter().map(|c| &c.sha).collect::<Vec<_>>(),
            oracle
                .iter()
                .map(|w| w.oid.to_string())
                .collect::<Vec<_>>()
                .iter()
                .collect::<Vec<_>>()
        );
        assert!(
            r.candidates.iter().any(|c| c.parents.len() > 1),
            "the range has merges"
        );
    }

    /// Raw commit objects that only a hand (or another tool) writes: messages and idents
    /// whose summary and author a careless parser would read differently.
    #[test]
    fn subjects_and_authors_are_libgit2s_for_odd_messages() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "--bare"], None);
        let tree = git(
            dir.path(),
            &["hash-object", "-t", "tree", "-w", "--stdin"],
            Some(b""),
        );
        let messages: &[&[u8]] = &[
            b"plain subject\n\nbody\n",
            b"\n\nleading newlines\n",
            b"two  spaces\tand a tab   \n",
            b"wrapped subject\n   continued here  \n  and here\n\nbody",
            b"  leading spaces\r\nwith crlf\r\n\r\nbody\r\n",
            b"   \nfirst line only spaces\n",
            b"",
            b"no newline at the end",
            b"caf\xe9 in latin-1\n",
            b"subject\n \t \nafter a blank-ish line\n",
        ];
        let authors: &[&[u8]] = &[
            b"A U Thor <a@example.invalid>",
            b"  Spaced   Name   <  spaced@example.invalid  >",
            b"<only@example.invalid>",
            b"Ren\xe9 <latin@example.invalid>",
            b"J\xc3\xa9r\xc3\xb4me <utf8@example.invalid>",
            b"Odd <Name> \"Quoted\" <odd@example.invalid>",
        ];
        let mut parent: Option<String> = None;
        let mut made = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            for (j, a) in authors.iter().enumerate() {
                let mut raw = format!("tree {tree}\n").into_bytes();
                if let Some(p) = &parent {
                    raw.extend_from_slice(format!("parent {p}\n").as_bytes());
                }
                raw.extend_from_slice(b"author ");
                raw.extend_from_slice(a);
                raw.extend_from_slice(
                    format!(" {} +0100\n", 1_600_000_000 + i * 10 + j).as_bytes(),
                );
                raw.extend_from_slice(b"committer C <c@example.invalid> 1600000000 +0000\n");
                if j % 2 == 0 {
                    // A signature's header runs on over lines that start with a space.
                    raw.extend_from_slice(
                        b"gpgsig -----BEGIN SIG-----\n \n author X <x@y>\n -----END SIG-----\n",
                    );
                }
                if m.contains(&0xe9) {
                    raw.extend_from_slice(b"encoding ISO-8859-1\n");
                }
                raw.push(b'\n');
                raw.extend_from_slice(m);
                let sha = git(
                    dir.path(),
                    &[
                        "hash-object",
                        "-t",
                        "commit",
                        "-w",
                        "--literally",
                        "--stdin",
                    ],
                    Some(&raw),
                );
                made.push(sha.clone());
                parent = Some(sha);
            }
        }
        let repo = Repository::open_bare(dir.path()).unwrap();
        let bad = Oid::from_str(made.last().unwrap()).unwrap();
        let good = Oid::from_str(&made[0]).unwrap();
        let by_git = through_git(&repo, bad, good);
        let by_git2 = walk_with_git2(&repo, bad, good).unwrap();
        assert_eq!(by_git.len(), made.len() - 1);
        for (a, b) in by_git.iter().zip(&by_git2) {
            assert_eq!(a, b);
        }
    }

    #[test]
    fn summary_is_the_first_paragraph_with_wrapped_lines_joined() {
        let s = |m: &[u8]| String::from_utf8(libgit2_summary(m)).unwrap();
        assert_eq!(s(b"a  b\n c\n\nd"), "a  b c");
        assert_eq!(s(b"\n\nx \n"), "x");
        assert_eq!(s(b" x\n \ny"), " x");
        assert_eq!(s(b""), "");
    }
}
