//! CPU time of the whole process (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`).
//!
//! Process time, not thread time, because silt's Parquet writer encodes column chunks on
//! several threads (`silt_lake::store`); the calling thread's CPU time would miss most of the
//! work. While a file is written nothing else in the process is busy (readers have finished,
//! DataFusion's runtime is idle), so the process figure is the writer's. The standard library
//! has no CPU clock, hence libc.

/// Seconds of CPU time used by this process so far.
pub fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer we pass, which is valid.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_clock_advances_with_work() {
        let a = super::process_cpu_seconds();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = super::process_cpu_seconds();
        assert!(b > a, "{a} -> {b}");
    }
}
