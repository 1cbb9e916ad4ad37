//! Settings of the rushd process itself, made once at start.

/// Turns transparent huge pages off for this process, or leaves the
/// kernel's choice (`/sys/kernel/mm/transparent_hugepage/enabled`) when
/// `allowed`. mimalloc asks for huge pages on its arenas (`MADV_HUGEPAGE`),
/// so with the kernel's usual `madvise` mode every heap fault zeroes 2 MiB;
/// the pending runs, row cache tables and memtable arenas that writes keep
/// growing then cost up to 1.8× the CPU per operation (kv-incr, limits;
/// bench/results/NOTES.md). Redis keeps off them as well (`disable-thp`,
/// and an allocator that does not ask for them by default). Returns false if the kernel
/// refused.
pub fn set_transparent_huge_pages(allowed: bool) -> bool {
    if allowed {
        return true;
    }
    // SAFETY: prctl with integer arguments only; it sets a flag of this
    // process that the kernel checks at each page fault, so it applies to
    // memory mapped before the call as well.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 }
}
