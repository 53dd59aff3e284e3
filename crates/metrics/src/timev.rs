//! GNU `/usr/bin/time -v` output.
//!
//! Names follow LKP's `stats/time`: the label without its parenthesised parts, spaces
//! turned into `_`, lower-cased, under `time.` — `Maximum resident set size (kbytes)`
//! becomes `time.maximum_resident_set_size`. Units are time's own: seconds for the times
//! (the wall clock converted from `h:mm:ss` / `m:ss.ss`), kbytes for sizes, a count for the
//! rest, percent for `time.percent_of_cpu_this_job_got` (absent when time prints `?%`).

use crate::number::{self, Number};
use crate::{Location, Metrics, ParseError};

/// The labels GNU time -v prints, exactly. Only these lines are read, so the benchmark's
/// own output around them is left alone.
const LABELS: [&str; 22] = [
    "User time (seconds)",
    "System time (seconds)",
    "Percent of CPU this job got",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)",
    "Average shared text size (kbytes)",
    "Average unshared data size (kbytes)",
    "Average stack size (kbytes)",
    "Average total size (kbytes)",
    "Maximum resident set size (kbytes)",
    "Average resident set size (kbytes)",
    "Major (requiring I/O) page faults",
    "Minor (reclaiming a frame) page faults",
    "Voluntary context switches",
    "Involuntary context switches",
    "Swaps",
    "File system inputs",
    "File system outputs",
    "Socket messages sent",
    "Socket messages received",
    "Signals delivered",
    "Page size (bytes)",
    "Exit status",
];

/// Whether `line` is time -v's wall-clock line (used by format detection).
pub(crate) fn is_elapsed_line(line: &str) -> bool {
    line.trim_start().starts_with("Elapsed (wall clock) time")
}

pub(crate) fn parse(text: &str) -> Result<Metrics, ParseError> {
    let mut metrics = Metrics::new();
    for (i, line) in text.lines().enumerate() {
        let Some((label, value)) = line.trim().split_once(": ") else {
            continue;
        };
        if !LABELS.contains(&label) {
            continue;
        }
        let name = normalise(label);
        let at = Location::Line(i + 1);
        let value = value.trim();
        let v = match name.as_str() {
            "elapsed_time" => elapsed_seconds(value).ok_or_else(|| ParseError::BadElapsedTime {
                at: at.clone(),
                value: value.to_owned(),
            })?,
            "percent_of_cpu_this_job_got" if value == "?%" => continue,
            "percent_of_cpu_this_job_got" => {
                finite(value.strip_suffix('%').unwrap_or(value), at.clone())?
            }
            _ => finite(value, at.clone())?,
        };
        metrics.insert(format!("time.{name}"), v);
    }
    Ok(metrics)
}

fn finite(value: &str, at: Location) -> Result<f64, ParseError> {
    match number::plain(value) {
        Number::Finite(v) => Ok(v),
        Number::NonFinite => Err(ParseError::NonFinite {
            at,
            value: value.to_owned(),
        }),
        Number::Not => Err(ParseError::NotANumber {
            at,
            value: value.to_owned(),
        }),
    }
}

/// `Elapsed (wall clock) time (h:mm:ss or m:ss)` → `elapsed_time`.
fn normalise(label: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in label.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
        .to_lowercase()
}

/// `h:mm:ss` or `m:ss.ss` → seconds. Every part but the last is a whole number.
fn elapsed_seconds(value: &str) -> Option<f64> {
    let parts: Vec<&str> = value.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let (last, whole) = parts.split_last()?;
    let mut seconds = 0.0;
    for part in whole {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        seconds = seconds * 60.0 + part.parse::<f64>().ok()?;
    }
    match number::plain(last) {
        Number::Finite(s) if s >= 0.0 && !last.starts_with(['+', '-']) => Some(seconds * 60.0 + s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_normalised_like_lkp() {
        assert_eq!(
            normalise("Elapsed (wall clock) time (h:mm:ss or m:ss)"),
            "elapsed_time"
        );
        assert_eq!(
            normalise("Major (requiring I/O) page faults"),
            "major_page_faults"
        );
        assert_eq!(
            normalise("Maximum resident set size (kbytes)"),
            "maximum_resident_set_size"
        );
        assert_eq!(
            normalise("Percent of CPU this job got"),
            "percent_of_cpu_this_job_got"
        );
    }

    #[test]
    fn elapsed_forms() {
        assert_eq!(elapsed_seconds("0:00.32"), Some(0.32));
        assert_eq!(elapsed_seconds("2:03.50"), Some(123.5));
        assert_eq!(elapsed_seconds("1:02:03"), Some(3723.0));
        for bad in [
            "", "12", "1:2:3:4", "a:00", "1:-5", ":30", "1:nan", "1.5:00",
        ] {
            assert_eq!(elapsed_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn unknown_cpu_percent_is_skipped() {
        let m = parse("\tPercent of CPU this job got: ?%\n\tExit status: 0\n").unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["time.exit_status"]);
    }

    #[test]
    fn malformed_values_name_the_line() {
        let err = parse("\tUser time (seconds): 0.1\n\tSystem time (seconds): lots\n").unwrap_err();
        assert_eq!(err.to_string(), "line 2: `lots` is not a number");
        let err = parse("\tElapsed (wall clock) time (h:mm:ss or m:ss): soon\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: elapsed time `soon` is not h:mm:ss or m:ss.ss"
        );
        let err = parse("\tUser time (seconds): inf\n").unwrap_err();
        assert!(matches!(err, ParseError::NonFinite { .. }), "{err}");
    }

    #[test]
    fn other_colon_lines_are_left_alone() {
        let text = "Swapsies: 3\nuser time: 5\nUser time: 5\nCommand being timed: \"x\"\n";
        let m = parse(text).unwrap();
        assert!(m.is_empty(), "{m:?}");
    }
}
