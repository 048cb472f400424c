//! Progress lines on stderr for long runs: which step, and the seconds elapsed since the start.

use std::io::Write;
use std::time::Instant;

/// Writes `[  12.3 s] step` lines to stderr (or nowhere, for tests).
#[derive(Debug, Clone)]
pub struct Progress {
    started: Instant,
    quiet: bool,
    prefix: String,
}

impl Progress {
    /// Progress on stderr, timed from now.
    pub fn stderr() -> Progress {
        Progress {
            started: Instant::now(),
            quiet: false,
            prefix: String::new(),
        }
    }

    /// Progress that prints nothing.
    pub fn quiet() -> Progress {
        Progress {
            started: Instant::now(),
            quiet: true,
            prefix: String::new(),
        }
    }

    /// Progress of a task running beside this one (another thread): the same clock and
    /// output, each line starting with `[prefix] `.
    pub fn beside(&self, prefix: &str) -> Progress {
        Progress {
            started: self.started,
            quiet: self.quiet,
            prefix: format!("[{prefix}] "),
        }
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Announces a step.
    pub fn step(&mut self, what: &str) {
        if !self.quiet {
            let _ = writeln!(
                std::io::stderr(),
                "[{:7.1} s] {}{what}",
                self.elapsed(),
                self.prefix
            );
        }
    }
}
