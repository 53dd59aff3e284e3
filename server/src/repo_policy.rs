//! Bounds on what fetching a repository may cost: libgit2's connect and read timeouts, so a
//! remote that accepts a connection and never answers fails the fetch (and the request that
//! asked for it) with a clear error instead of holding it for minutes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Default limits: long enough for a slow server's first byte, short enough that a silent
/// one costs a request at most this much.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

static READ_MS: AtomicU64 = AtomicU64::new(0);

/// Sets libgit2's process-wide server timeouts (idempotent; the last call wins).
pub fn set_fetch_timeouts(connect: Duration, read: Duration) {
    let ms = |d: Duration| d.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: libgit2's global options are plain integers; setting them while no fetch
    // runs is how libgit2 documents them, and a fetch that races reads the old or the new
    // value, both valid.
    unsafe {
        let _ = git2::opts::set_server_connect_timeout_in_milliseconds(ms(connect));
        let _ = git2::opts::set_server_timeout_in_milliseconds(ms(read));
    }
    READ_MS.store(read.as_millis() as u64, Ordering::Relaxed);
    // Mirrors are fetched with the git command (`perfbisect-gitfetch`): the same limits.
    perfbisect_gitfetch::set_timeouts(connect, read);
}

/// Sets the default timeouts unless some were set already.
pub fn ensure_fetch_timeouts() {
    if READ_MS.load(Ordering::Relaxed) == 0 {
        set_fetch_timeouts(CONNECT_TIMEOUT, READ_TIMEOUT);
    }
}

/// The read timeout in force, for messages.
pub fn read_timeout() -> Duration {
    Duration::from_millis(READ_MS.load(Ordering::Relaxed))
}
