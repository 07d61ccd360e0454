//! Handing memory freed by flushes back to the kernel.
//!
//! Large blocks (Arrow buffers, sort buffers, encoded pages) come from glibc's malloc
//! (`crates/silt/src/alloc.rs` says why), which keeps what is freed in its arenas for reuse. The
//! rows waiting for a flush rise and fall; after a backlog (a slow flush, a burst) glibc keeps
//! the memory of its highest point, so a server's RSS follows the highest backlog it has met,
//! not the present one (docs/serve.md, "Benchmark": a 10-minute run that met a 142 MB backlog
//! at 29 s stayed 150 MiB above 1-minute runs that had not). Giving memory back on every free
//! (a fixed 1 MiB mmap threshold) made the RSS follow the backlog but cost so much CPU that the
//! server fell 1.5 s behind. So the flush thread asks glibc to return its free pages
//! (`malloc_trim(0)`, which also releases whole free pages inside its arenas) only once the rows
//! waiting have fallen [`STEP`] below their high point since the last trim, and at most once
//! per [`EVERY`]: a few calls after a backlog, none while memory holds steady.
//!
//! Touches nothing but the process's allocator; counts its calls and their time for
//! `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Fall of the rows waiting (bytes) from their high point since the last trim that makes a
/// trim worth its cost.
pub const STEP: u64 = 64 << 20;

/// Shortest time between two trims.
pub const EVERY: Duration = Duration::from_secs(2);

/// Trims done and the time they took, for `/metrics`.
#[derive(Debug, Default)]
pub struct TrimStats {
    pub trims: AtomicU64,
    pub micros: AtomicU64,
}

/// When to trim: fed, after each flush, the highest bytes of rows waiting since the last flush
/// and the bytes waiting now.
#[derive(Debug)]
pub struct Trimmer {
    high: u64,
    last: Option<Instant>,
}

impl Default for Trimmer {
    fn default() -> Self {
        Self::new()
    }
}

impl Trimmer {
    pub fn new() -> Self {
        Trimmer {
            high: 0,
            last: None,
        }
    }

    /// Records that up to `high` bytes of rows waited since the last flush and `after` wait now
    /// that it is done; returns whether to trim now (and then counts it as done at `now`).
    pub fn after_flush(&mut self, high: u64, after: u64, now: Instant) -> bool {
        self.high = self.high.max(high);
        let due = self.last.is_none_or(|t| now.duration_since(t) >= EVERY);
        if due && self.high.saturating_sub(after) >= STEP {
            self.high = after;
            self.last = Some(now);
            return true;
        }
        false
    }
}

/// Returns the free pages of glibc's arenas to the kernel, and counts the call in `stats`.
/// Elsewhere than Linux with glibc, does nothing.
pub fn trim(stats: &TrimStats) {
    let t = Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own free lists under its arena locks; it takes no
    // pointer from us.
    unsafe {
        libc::malloc_trim(0);
    }
    stats.trims.fetch_add(1, Ordering::Relaxed);
    stats
        .micros
        .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn trims_after_a_fall_from_the_high_point_at_most_once_per_interval() {
        let mut t = Trimmer::new();
        let t0 = Instant::now();
        // Steady memory: no trim however often flushes come.
        assert!(!t.after_flush(60 * MIB, 20 * MIB, t0));
        assert!(!t.after_flush(60 * MIB, 20 * MIB, t0 + EVERY * 3));
        // A backlog of 200 MiB drained to 120: trim.
        assert!(t.after_flush(200 * MIB, 120 * MIB, t0 + EVERY * 4));
        // A backlog whose fall is spread over several flushes: trims once it adds up.
        let mut t = Trimmer::new();
        assert!(!t.after_flush(200 * MIB, 150 * MIB, t0));
        assert!(t.after_flush(100 * MIB, 30 * MIB, t0 + Duration::from_millis(300)));
        // The high point starts again from what was left: a further small fall does nothing.
        assert!(!t.after_flush(40 * MIB, 10 * MIB, t0 + EVERY * 2));
        // Another backlog soon after: waits for the interval.
        assert!(!t.after_flush(300 * MIB, 20 * MIB, t0 + EVERY));
        assert!(t.after_flush(
            30 * MIB,
            20 * MIB,
            t0 + EVERY * 2 + Duration::from_millis(300)
        ));
    }

    #[test]
    fn a_trim_is_counted() {
        let s = TrimStats::default();
        trim(&s);
        trim(&s);
        assert_eq!(s.trims.load(Ordering::Relaxed), 2);
    }
}
