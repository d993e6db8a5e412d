//! The commands, one file each: thin layers that turn parsed flags into a call on the library
//! and its outcome into the process exit code: 0 finished (even with failed requests), 1
//! aborted mid-run, 2 bad input, 3 worse than the baseline (`--fail-on-regression`), 130
//! interrupted. Nothing else in the crate imports this layer.

/// `eprintln!` that never panics: once the terminal is gone (a dropped SSH session) a failed
/// write must not abort servetop before it has stopped its server and saved the run.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        // Broken at spaces to a terminal's width (not mid-word by the terminal).
        let line = $crate::export::fit::for_stderr(&format!($($t)*));
        let _ = writeln!(std::io::stderr(), "{line}");
    }};
}

/// `println!` that never panics (see `say!`).
macro_rules! print_out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

pub mod attach;
pub mod demo;
pub mod detach;
pub mod execute;
pub mod gpu;
pub mod limits;
pub mod report;
pub mod run;
pub mod selfbench;
pub mod serve_sweep;
mod signals;
pub mod sim;
pub mod tune;

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a finished run with a level worse than `--baseline` by more than
/// `--fail-on-regression` allows.
pub const EXIT_REGRESSION: i32 = 3;
/// Exit code for a plan the user declined at the question before a long plan: nothing ran.
pub const EXIT_DECLINED: i32 = 4;
/// Exit code for a run stopped by the user.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Prints `msg` as servetop's one-line error; returns the bad-input exit code.
fn fail(msg: &str) -> i32 {
    eprintln!("servetop: {msg}");
    EXIT_BAD_INPUT
}
