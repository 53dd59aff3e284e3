//! How the pages write numbers, times and commit ids: one place, so every page agrees.

use chrono::{DateTime, Utc};
use perfbisect_report::format::format_g;

/// The first 12 hex digits of a commit id, as the CLI prints them.
pub fn short_sha(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// A measured value with six significant digits (`%g`), like the LKP tables.
pub fn number(v: f64) -> String {
    format_g(v, 6)
}

/// Relative standard deviation, `stddev / |mean|`, in percent; `-` where it is undefined.
pub fn pct_stddev(mean: Option<f64>, stddev: Option<f64>) -> String {
    match (mean, stddev) {
        (Some(m), Some(s)) if m != 0.0 => format!("{:.1}%", 100.0 * s / m.abs()),
        _ => "-".into(),
    }
}

/// A probability as a percentage that never rounds a real chance to zero, nor a confidence
/// short of certainty to 100%.
pub fn probability(p: f64) -> String {
    let pct = 100.0 * p;
    if pct > 0.0 && pct < 0.1 {
        "<0.1%".into()
    } else if (99.9..100.0).contains(&pct) {
        let s = format!("{pct:.2}%");
        if s == "100.00%" { ">99.99%".into() } else { s }
    } else {
        format!("{pct:.1}%")
    }
}

/// A length of time in the two largest units that matter: `42 s`, `5 min`, `3 h 12 min`, `2 d 4 h`.
pub fn duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

/// `5 min ago`, measured from `now` (passed in so that tests need no clock).
pub fn age(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - at).num_seconds();
    if secs < 2 {
        "just now".into()
    } else {
        format!("{} ago", duration(secs))
    }
}

/// An instant for a `<time datetime>` attribute and its tooltip.
pub fn iso(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The CSS class of a bisect status: running, found, failed, or ended without a culprit.
pub fn status_class(status: &str) -> &'static str {
    match status {
        "found" => "st-found",
        "failed" => "st-failed",
        "not_reproduced" | "inconclusive" | "cancelled" => "st-ended",
        _ => "st-running",
    }
}

/// A status as people read it: `not_reproduced` → `not reproduced`.
pub fn status_label(status: &str) -> String {
    status.replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_use_the_two_largest_units() {
        assert_eq!(duration(-3), "0 s");
        assert_eq!(duration(59), "59 s");
        assert_eq!(duration(61), "1 min");
        assert_eq!(duration(3 * 3600 + 12 * 60 + 5), "3 h 12 min");
        assert_eq!(duration(2 * 86400 + 4 * 3600), "2 d 4 h");
    }

    #[test]
    fn ages_are_relative_to_the_given_now() {
        let now = Utc::now();
        assert_eq!(age(now, now), "just now");
        assert_eq!(age(now - chrono::Duration::seconds(300), now), "5 min ago");
    }

    #[test]
    fn numbers_and_percentages() {
        assert_eq!(number(1234.5678), "1234.57");
        assert_eq!(pct_stddev(Some(200.0), Some(6.0)), "3.0%");
        assert_eq!(pct_stddev(Some(200.0), None), "-");
        assert_eq!(probability(0.99312), "99.3%");
        assert_eq!(probability(0.0002), "<0.1%");
        assert_eq!(probability(0.0), "0.0%");
        assert_eq!(probability(0.9995), "99.95%");
        assert_eq!(probability(0.99999), ">99.99%");
        assert_eq!(probability(1.0), "100.0%");
        assert_eq!(short_sha("0123456789abcdef"), "0123456789ab");
        assert_eq!(short_sha("abc"), "abc");
    }
}
