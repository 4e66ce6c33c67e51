//! A one-line summary after every panic's report: where it panicked and the message's first
//! line. A failing test's report often ends in a long claimd log and a backtrace, and CI
//! shows only the ends of a run's output; this line is the last of the report, so the tail
//! names the failed assertion.

use std::sync::Once;

/// Installs the summary once per test process (idempotent).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            report(info);
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("(not a string)");
            let first: String = message
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(300)
                .collect();
            let at = info.location().map(|l| l.to_string()).unwrap_or_default();
            eprintln!("panic summary: at {at}: {first}");
        }));
    });
}
