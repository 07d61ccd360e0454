//! Running library code that may panic on bad input, as an error instead of a crash.
//!
//! Some readers of other projects panic on corrupt data instead of returning an error
//! (parquet-rs on a damaged page: `offset + len out of bounds`, arithmetic overflow in its
//! decoders). silt calls them inside [`catch`], which turns such a panic into an `Err` with the
//! panic's message; while it runs, the thread is marked ([`quiet`]) so that the process's panic
//! hook (the `silt` binary's) can leave out the "thread panicked at" lines of a panic that is
//! reported as an error anyway.
//!
//! Touches nothing but a thread-local flag.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// `f()`, or its panic's message as `Err`. The caller must not use state `f` left half-changed
/// after an `Err` (the closure is taken as unwind-safe).
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let was = QUIET.with(|q| q.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r.map_err(|p| {
        p.downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("a panic without a message")
            .to_string()
    })
}

/// Whether the current thread runs inside [`catch`].
pub fn quiet() -> bool {
    QUIET.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_the_flag_is_restored() {
        assert!(!quiet());
        assert_eq!(catch(|| 2 + 2), Ok(4));
        let inner = catch(|| {
            assert!(quiet());
            let v: Vec<u8> = Vec::new();
            v[std::hint::black_box(3)]
        });
        assert!(inner.unwrap_err().contains("index out of bounds"));
        assert!(!quiet());
        let s = catch(|| -> u8 { panic!("{}", String::from("owned")) });
        assert_eq!(s.unwrap_err(), "owned");
    }
}
