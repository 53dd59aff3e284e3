//! The build cache: one directory per (commit, build recipe hash), bounded in size.
//!
//! An entry is complete once its metadata file exists; the file is written last, by rename,
//! so a crash mid-build leaves an incomplete directory that is never used and is removed at
//! the next start. A commit measured again is never rebuilt while its entry is cached. Use
//! refreshes an entry's metadata time; beyond the size bound the least recently used
//! entries go, never one the current task holds.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Marks a complete entry and records what it holds.
pub const META_FILE: &str = ".perfbisect-entry.json";
/// The build's log, kept with the entry.
pub const LOG_FILE: &str = ".perfbisect-build.log";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EntryMeta {
    pub sha: String,
    pub build_hash: String,
    pub size_bytes: u64,
    pub build_secs: f64,
}

/// A complete cached build.
#[derive(Debug, Clone)]
pub struct Entry {
    pub dir: PathBuf,
    pub meta: EntryMeta,
}

impl Entry {
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join(LOG_FILE)).unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    max_bytes: u64,
}

/// Bytes of the regular files under `dir` (symlinks are not followed).
pub fn dir_size(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in std::fs::read_dir(&d)? {
            let item = item?;
            let kind = item.file_type()?;
            if kind.is_dir() {
                stack.push(item.path());
            } else if kind.is_file() {
                total += item.metadata()?.len();
            }
        }
    }
    Ok(total)
}

impl Cache {
    pub fn new(root: impl Into<PathBuf>, max_bytes: u64) -> Self {
        Self {
            root: root.into(),
            max_bytes,
        }
    }

    /// Where the build of `sha` with the recipe hashed `build_hash` lives.
    pub fn dir(&self, sha: &str, build_hash: &str) -> PathBuf {
        self.root
            .join(format!("{sha}-{}", &build_hash[..16.min(build_hash.len())]))
    }

    /// The complete entry for (sha, recipe), marked as just used.
    pub fn lookup(&self, sha: &str, build_hash: &str) -> Option<Entry> {
        let dir = self.dir(sha, build_hash);
        let meta_path = dir.join(META_FILE);
        let meta: EntryMeta = serde_json::from_slice(&std::fs::read(&meta_path).ok()?).ok()?;
        if meta.sha != sha || meta.build_hash != build_hash {
            return None;
        }
        touch(&meta_path);
        Some(Entry { dir, meta })
    }

    /// An empty directory to build (sha, recipe) into, replacing an incomplete one.
    pub fn begin(&self, sha: &str, build_hash: &str) -> std::io::Result<PathBuf> {
        let dir = self.dir(sha, build_hash);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Marks the build in `begin`'s directory complete, keeping its log.
    pub fn commit(
        &self,
        sha: &str,
        build_hash: &str,
        build_secs: f64,
        log: &str,
    ) -> std::io::Result<Entry> {
        let dir = self.dir(sha, build_hash);
        std::fs::write(dir.join(LOG_FILE), log)?;
        let meta = EntryMeta {
            sha: sha.to_string(),
            build_hash: build_hash.to_string(),
            size_bytes: dir_size(&dir)?,
            build_secs,
        };
        let tmp = dir.join(format!("{META_FILE}.tmp"));
        std::fs::write(
            &tmp,
            serde_json::to_vec(&meta).expect("metadata serializes"),
        )?;
        std::fs::rename(&tmp, dir.join(META_FILE))?;
        Ok(Entry { dir, meta })
    }

    /// Removes a directory that will not become an entry (a failed build).
    pub fn discard(&self, sha: &str, build_hash: &str) -> std::io::Result<()> {
        let dir = self.dir(sha, build_hash);
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        Ok(())
    }

    /// Complete entries with their last use, and incomplete directories.
    fn scan(&self) -> std::io::Result<Scan> {
        let mut complete = Vec::new();
        let mut incomplete = Vec::new();
        let items = match std::fs::read_dir(&self.root) {
            Ok(items) => items,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((complete, incomplete));
            }
            Err(e) => return Err(e),
        };
        for item in items {
            let dir = item?.path();
            if !dir.is_dir() {
                continue;
            }
            let meta_path = dir.join(META_FILE);
            let parsed = std::fs::read(&meta_path)
                .ok()
                .and_then(|b| serde_json::from_slice::<EntryMeta>(&b).ok());
            match parsed {
                Some(meta) => {
                    let used = std::fs::metadata(&meta_path)?.modified()?;
                    complete.push((used, Entry { dir, meta }));
                }
                None => incomplete.push(dir),
            }
        }
        Ok((complete, incomplete))
    }

    /// Removes what crashed builds left behind. Call before any build starts.
    pub fn remove_incomplete(&self) -> std::io::Result<usize> {
        let (_, incomplete) = self.scan()?;
        for dir in &incomplete {
            std::fs::remove_dir_all(dir)?;
        }
        Ok(incomplete.len())
    }

    /// Total size of the complete entries.
    pub fn size(&self) -> std::io::Result<u64> {
        Ok(self.scan()?.0.iter().map(|(_, e)| e.meta.size_bytes).sum())
    }

    /// Evicts least recently used entries until the cache fits its bound, sparing `keep`.
    /// Returns the evicted directories.
    pub fn evict(&self, keep: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
        let (mut entries, _) = self.scan()?;
        let mut total: u64 = entries.iter().map(|(_, e)| e.meta.size_bytes).sum();
        entries.sort_by_key(|(used, _)| *used);
        let mut evicted = Vec::new();
        for (_, entry) in entries {
            if total <= self.max_bytes {
                break;
            }
            if keep.contains(&entry.dir) {
                continue;
            }
            // Unmark first: a crash halfway leaves an incomplete entry, never a damaged one.
            std::fs::remove_file(entry.dir.join(META_FILE))?;
            std::fs::remove_dir_all(&entry.dir)?;
            total -= entry.meta.size_bytes;
            evicted.push(entry.dir);
        }
        Ok(evicted)
    }
}

/// What `scan` finds: complete entries with their last use, and incomplete directories.
type Scan = (Vec<(SystemTime, Entry)>, Vec<PathBuf>);

fn touch(path: &Path) {
    // Last use is the metadata file's mtime; failing to refresh it only ages the entry.
    if let Ok(f) = std::fs::File::options().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// For tests: makes an entry look used `ago` in the past.
#[doc(hidden)]
pub fn age(entry: &Entry, ago: Duration) {
    if let Ok(f) = std::fs::File::options()
        .write(true)
        .open(entry.dir.join(META_FILE))
    {
        let _ = f.set_modified(SystemTime::now() - ago);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(cache: &Cache, sha: &str, bytes: usize) -> Entry {
        let dir = cache.begin(sha, "recipe").unwrap();
        std::fs::write(dir.join("artifact"), vec![0u8; bytes]).unwrap();
        cache.commit(sha, "recipe", 1.0, "log").unwrap()
    }

    #[test]
    fn a_committed_build_is_found_and_an_unfinished_one_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path(), 1 << 20);
        assert!(cache.lookup("a", "recipe").is_none());
        let dir = cache.begin("a", "recipe").unwrap();
        std::fs::write(dir.join("artifact"), b"x").unwrap();
        assert!(cache.lookup("a", "recipe").is_none(), "not committed yet");
        cache.commit("a", "recipe", 2.5, "built").unwrap();
        let e = cache.lookup("a", "recipe").unwrap();
        assert_eq!(e.meta.build_secs, 2.5);
        assert_eq!(e.log(), "built");
        assert!(cache.lookup("a", "other-recipe").is_none());
    }

    #[test]
    fn crash_leftovers_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path(), 1 << 20);
        build(&cache, "a", 10);
        cache.begin("b", "recipe").unwrap();
        assert_eq!(cache.remove_incomplete().unwrap(), 1);
        assert!(cache.lookup("a", "recipe").is_some());
        assert!(!cache.dir("b", "recipe").exists());
    }

    #[test]
    fn eviction_takes_the_least_recently_used_and_spares_the_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path(), 2500);
        let a = build(&cache, "a", 1000);
        let b = build(&cache, "b", 1000);
        let c = build(&cache, "c", 1000);
        age(&a, Duration::from_secs(300));
        age(&b, Duration::from_secs(200));
        age(&c, Duration::from_secs(100));
        // `a` is the oldest but in use: `b` goes instead.
        let evicted = cache.evict(std::slice::from_ref(&a.dir)).unwrap();
        assert_eq!(evicted, vec![b.dir.clone()]);
        assert!(cache.lookup("a", "recipe").is_some());
        assert!(cache.lookup("b", "recipe").is_none());
        assert!(cache.size().unwrap() <= 2500);
        // A lookup refreshes: `a` is now the newest, so `c` goes next.
        build(&cache, "d", 1000);
        let evicted = cache.evict(&[]).unwrap();
        assert_eq!(evicted, vec![c.dir.clone()]);
    }
}
