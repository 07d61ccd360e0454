//! The process's global allocator: mimalloc for small blocks, the system allocator (glibc) for
//! the rest.
//!
//! Why split by size, measured on the benchmarks (docs/benchmarks.md, "Allocator"):
//! - readers of JSON-like formats allocate many small values per record; with glibc malloc for
//!   everything the NDJSON conversions of the web-log benchmark took 1.5-1.7x as long, so small
//!   blocks go to mimalloc;
//! - Arrow buffers, sort buffers and encoded pages are large and cross threads (read on one,
//!   sorted on another, encoded and freed on a third). mimalloc held on to such blocks: a Zeek
//!   conn import with 143 MiB of live allocations peaked at 290-350 MiB RSS, and web-log
//!   conversions at 214-260 MiB; with blocks of 4 KiB and up going to glibc they peak at about
//!   210 and 125-145 MiB, at the same wall time.
//!
//! A block is freed by the allocator its size chose, which Rust's allocator contract makes
//! possible: `dealloc` and `realloc` receive the layout the block was allocated with.
//!
//! [`limit_arenas`] caps glibc's malloc arenas. glibc gives each thread that allocates while
//! another holds an arena an arena of its own, up to 8 per core, and each keeps the blocks freed
//! into it for reuse by that arena only. An import's blocks are allocated on one thread and freed
//! on another (see above), so the freed memory piles up in several arenas at once: the
//! generated-conn import had 144 MiB of live allocations (heaptrack) at 215-232 MiB peak RSS.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks of at least this many bytes go to the system allocator.
const LARGE: usize = 4096;

pub struct SplitAlloc;

// SAFETY: each block is allocated and freed by the same underlying allocator, chosen by its
// size (the layout Rust passes back to `dealloc`/`realloc` is the one it was allocated with);
// a `realloc` that crosses the threshold allocates in the other allocator, copies, and frees.
unsafe impl GlobalAlloc for SplitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= LARGE {
            System.alloc(layout)
        } else {
            MiMalloc.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= LARGE {
            System.alloc_zeroed(layout)
        } else {
            MiMalloc.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= LARGE {
            System.dealloc(ptr, layout)
        } else {
            MiMalloc.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (layout.size() >= LARGE, new_size >= LARGE) {
            (true, true) => System.realloc(ptr, layout, new_size),
            (false, false) => MiMalloc.realloc(ptr, layout, new_size),
            (was_large, _) => {
                // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, does
                // not overflow isize (GlobalAlloc::realloc's contract).
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    if was_large {
                        System.dealloc(ptr, layout)
                    } else {
                        MiMalloc.dealloc(ptr, layout)
                    }
                }
                new
            }
        }
    }
}

/// Caps glibc's malloc arenas at one per four cores (at least one), before the process starts
/// any thread. Measured on 2 cores (one arena), three alternated runs each: the generated-conn
/// import (2M rows) peaked at 202-204 MiB RSS against 219-225, in the same time (1.22-1.25 s
/// against 1.25-1.28); a `GROUP BY` with `count(distinct uid)` over its lake at 552-575 MiB
/// against 674, in 1.04-1.15 s against 1.13-1.23. Large blocks are allocated a few thousand
/// times a second, so threads rarely wait on a shared arena's lock; more cores get more arenas
/// all the same. No-op off glibc (its allocator has no arenas to cap).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = cores.div_ceil(4).clamp(1, 64) as libc::c_int;
        // SAFETY: mallopt only sets a parameter of glibc's allocator; called before any thread
        // of ours exists. Its result (0 when refused) changes nothing we rely on.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
