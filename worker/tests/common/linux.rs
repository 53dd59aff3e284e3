//! A real kernel tree for the opt-in kernel tests: Debian's `linux-source-6.1`, unpacked
//! once under the target directory (`test-linux`), its `make tinyconfig` output, and a git
//! repository of it (the import is cached beside the tree; each test adds its own history
//! on top, with git's plumbing, so no work tree is checked out).
//!
//! Needs `apt-get install -y linux-source-6.1 flex bison bc libelf-dev`.
#![allow(dead_code)] // each test file uses a different part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const TARBALL: &str = "/usr/src/linux-source-6.1.tar.xz";

/// The target directory (worker/ and cli/ are both one level below the checkout's root).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn root() -> PathBuf {
    target_dir().join("test-linux")
}

/// The unpacked tree, cached under the target directory.
pub fn linux_tree() -> PathBuf {
    assert!(
        Path::new(TARBALL).exists(),
        "{TARBALL} is missing: apt-get install linux-source-6.1 flex bison bc libelf-dev"
    );
    let root = root();
    let tree = root.join("linux-source-6.1");
    if !root.join("unpacked").exists() {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let status = Command::new("tar")
            .args(["-xJf", TARBALL, "-C"])
            .arg(&root)
            .status()
            .unwrap();
        assert!(status.success(), "unpacking {TARBALL}");
        std::fs::write(root.join("unpacked"), "").unwrap();
    }
    tree
}

/// `make tinyconfig`'s `.config` for x86_64 (the stored kconfig the jobs name).
pub fn tinyconfig() -> String {
    let src = linux_tree();
    let base = root().join("tinyconfig");
    let config = base.join(".config");
    if !config.exists() {
        let status = Command::new("make")
            .arg("-C")
            .arg(&src)
            .arg(format!("O={}", base.display()))
            .args(["ARCH=x86_64", "tinyconfig"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "make tinyconfig");
    }
    std::fs::read_to_string(config).unwrap()
}

/// `VERSION.PATCHLEVEL.SUBLEVEL` and `EXTRAVERSION` of the tree's Makefile: the release
/// the recipe's kernels start with.
pub fn base_release() -> String {
    let makefile = std::fs::read_to_string(linux_tree().join("Makefile")).unwrap();
    let var = |name: &str| -> String {
        makefile
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix('='))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{}.{}.{}{}",
        var("VERSION"),
        var("PATCHLEVEL"),
        var("SUBLEVEL"),
        var("EXTRAVERSION")
    )
}

/// Runs git with `args` in the repository `git_dir`; its stdout, trimmed.
pub fn git(git_dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> String {
    use std::io::Write;
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
        if *k == "GIT_WORK_TREE" {
            // Pathspecs are relative to the working directory.
            cmd.current_dir(v);
        }
    }
    let mut child = cmd.spawn().expect("git");
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The author and committer of the test's commits, at `minute` minutes after a fixed time,
/// so the same history always has the same shas.
fn identity(minute: u32) -> Vec<(&'static str, String)> {
    let date = format!("{} +0000", 1_700_000_000 + u64::from(minute) * 60);
    vec![
        ("GIT_AUTHOR_NAME", "Lab".into()),
        ("GIT_AUTHOR_EMAIL", "lab@example.invalid".into()),
        ("GIT_AUTHOR_DATE", date.clone()),
        ("GIT_COMMITTER_NAME", "Lab".into()),
        ("GIT_COMMITTER_EMAIL", "lab@example.invalid".into()),
        ("GIT_COMMITTER_DATE", date),
    ]
}

/// A bare repository holding the unpacked tree as one commit (`refs/heads/main`), cached.
fn imported() -> PathBuf {
    let tree = linux_tree();
    let repo = root().join("import.git");
    if repo.join("imported").exists() {
        return repo;
    }
    let _ = std::fs::remove_dir_all(&repo);
    let status = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(status.success());
    let index = repo.join("import-index");
    let work = tree.display().to_string();
    let idx = index.display().to_string();
    let env = [
        ("GIT_WORK_TREE", work.as_str()),
        ("GIT_INDEX_FILE", idx.as_str()),
    ];
    // `-f`: the tarball is the tree, whatever its .gitignore files say.
    git(&repo, &["add", "-A", "-f", "."], &env, None);
    let tree_id = git(&repo, &["write-tree"], &env, None);
    let who = identity(0);
    let who: Vec<(&str, &str)> = who.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let commit = git(
        &repo,
        &[
            "commit-tree",
            &tree_id,
            "-m",
            "Import Debian's linux-source-6.1",
        ],
        &who,
        None,
    );
    git(
        &repo,
        &["update-ref", "refs/heads/main", &commit],
        &[],
        None,
    );
    let _ = std::fs::remove_file(&index);
    // One pack, so every clone and fetch of it (the server's mirror, each worker's) reuses
    // its deltas instead of compressing 80,000 loose objects again.
    git(&repo, &["repack", "-a", "-d", "-q"], &[], None);
    git(&repo, &["prune-packed"], &[], None);
    std::fs::write(repo.join("imported"), "").unwrap();
    repo
}

/// One commit of a test's history: its subject and the files it rewrites (path in the
/// tree, new content).
pub struct Change {
    pub subject: String,
    pub files: Vec<(String, String)>,
}

/// A bare repository at `dest` (sharing the cached import's objects) holding the imported
/// tree and then `changes`, one commit each, on `refs/heads/main`. Returns the shas, the
/// import first.
pub fn linux_repo(dest: &Path, changes: &[Change]) -> Vec<String> {
    let import = imported();
    let status = Command::new("git")
        .args(["clone", "-q", "--bare", "--shared"])
        .arg(&import)
        .arg(dest)
        .status()
        .unwrap();
    assert!(status.success());
    let mut parent = git(dest, &["rev-parse", "refs/heads/main"], &[], None);
    let mut shas = vec![parent.clone()];
    let index = dest.join("history-index");
    let idx = index.display().to_string();
    let with_index = [("GIT_INDEX_FILE", idx.as_str())];
    for (i, change) in changes.iter().enumerate() {
        git(dest, &["read-tree", &parent], &with_index, None);
        for (path, content) in &change.files {
            let blob = git(
                dest,
                &["hash-object", "-w", "--stdin"],
                &[],
                Some(content.as_bytes()),
            );
            let info = format!("100644,{blob},{path}");
            git(
                dest,
                &["update-index", "--add", "--cacheinfo", &info],
                &with_index,
                None,
            );
        }
        let tree = git(dest, &["write-tree"], &with_index, None);
        let who = identity(i as u32 + 1);
        let who: Vec<(&str, &str)> = who.iter().map(|(k, v)| (*k, v.as_str())).collect();
        parent = git(
            dest,
            &["commit-tree", &tree, "-p", &parent, "-m", &change.subject],
            &who,
            None,
        );
        shas.push(parent.clone());
    }
    git(dest, &["update-ref", "refs/heads/main", &parent], &[], None);
    let _ = std::fs::remove_file(&index);
    shas
}

/// The content of `path` in the imported tree (what a change edits).
pub fn original(path: &str) -> String {
    std::fs::read_to_string(linux_tree().join(path)).unwrap()
}
