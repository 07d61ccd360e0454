//! The progress bar on a terminal: a `silt_ingest::Observer` drawn with indicatif (bytes read
//! against the inputs' size when known, events and rejects so far), and the first rejects
//! printed as they come (all of them are kept in the rejects file).
//!
//! Touches standard error only.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use silt_core::Reject;
use silt_ingest::{Observer, Progress};

/// Rejects printed as they come; the rest are counted in the summary.
const SHOWN_REJECTS: u64 = 5;

/// See the module documentation.
pub struct Bar {
    bar: ProgressBar,
    shown: u64,
    total_set: bool,
}

impl Bar {
    /// A bar on standard error when it is a terminal and `quiet` is not set; otherwise only the
    /// first rejects are printed.
    pub fn new(quiet: bool) -> Self {
        let show = !quiet && std::io::stderr().is_terminal();
        Self {
            bar: if show {
                let b = ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {bytes} read ({bytes_per_sec}) {msg}",
                    )
                    .expect("template"),
                );
                b.set_draw_target(ProgressDrawTarget::stderr());
                b.enable_steady_tick(Duration::from_millis(200));
                b
            } else {
                ProgressBar::hidden()
            },
            shown: 0,
            total_set: false,
        }
    }
}

impl Observer for Bar {
    fn progress(&mut self, p: &Progress) {
        if self.bar.is_hidden() {
            return;
        }
        if let (Some(t), false) = (p.total, self.total_set) {
            self.total_set = true;
            self.bar.set_length(t);
            self.bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta}) {msg}",
                )
                .expect("template"),
            );
        }
        self.bar.set_position(p.raw_bytes);
        self.bar
            .set_message(format!("{} events, {} rejects", p.events, p.rejects));
    }

    fn reject(&mut self, r: &Reject) {
        self.shown += 1;
        if self.shown <= SHOWN_REJECTS {
            self.bar
                .suspend(|| eprintln!("reject: {}:{}: {}", r.source, r.line, r.reason));
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
