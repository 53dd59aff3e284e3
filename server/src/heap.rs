//! The allocator's handling of freed memory, so the server's size returns after a large
//! bisect ends (issue 14: "returned after the bisect ends").
//!
//! glibc keeps what the program frees. By default its thresholds move: once a large block
//! that was mapped on its own is freed, blocks up to that size come from the arenas, and an
//! arena's free top is given back only when it exceeds twice that. After a 100,000-candidate
//! bisect that left tens of MB free at the top of the tokio threads' arenas, resident for
//! good, where `malloc_trim` does not reach (it trims only the main arena's top). Fixed
//! thresholds keep large blocks mapped on their own (unmapped when freed) and give an
//! arena's free top back as soon as it passes 1 MiB.

/// Blocks from this size on are mapped on their own and unmapped when freed.
const MMAP_THRESHOLD: i32 = 256 << 10;
/// An arena's free top above this is given back to the system when memory is freed.
const TRIM_THRESHOLD: i32 = 1 << 20;

/// Fixes the allocator's thresholds (see the module's comment). Called once at start.
pub fn keep_small() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's parameters; it is called before the
    // server's threads allocate much, and glibc takes its own lock for it.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        nix::libc::mallopt(nix::libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

/// Gives free memory inside the arenas back to the system (every arena's free pages; the
/// main arena's top too). For after a large block of state was freed.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}
