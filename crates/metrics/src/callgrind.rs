//! `valgrind --tool=callgrind` (and `cachegrind`) summaries, as the tool prints them on
//! stderr: instruction counts are deterministic, which makes them the metric of choice on
//! machines where `perf stat` has no hardware counters (most VMs).
//!
//! Two kinds of lines give metrics, both behind valgrind's `==PID==` prefix:
//! - `Events    : Ir Dr ...` with `Collected : 325999 27449 ...`: one metric per event,
//!   `callgrind.Ir`, `callgrind.Dr`, ... (exact counts, no separators);
//! - the summary, `I   refs:      325,999` or `D1  miss rate:  4.0% ( ... )`: the key's words
//!   joined by `_` (`callgrind.I_refs`, `callgrind.D1_miss_rate%`), the value with its `,`
//!   thousands separators read (valgrind always groups by three), the parenthesised split
//!   ignored.
//!
//! Other lines (the program's own output, valgrind's banner) are ignored. The prefix is
//! `cachegrind.` when the banner says Cachegrind.

use crate::number::{Number, grouped, plain};
use crate::{Location, Metrics, ParseError, one_word};

/// The `==1234== ` prefix valgrind puts on its lines; `None` for other lines.
fn valgrind_body(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("==")?;
    let end = rest.find("==")?;
    rest[..end]
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| rest[end + 2..].trim())
        .filter(|_| end > 0)
}

/// Whether `text` holds a callgrind or cachegrind summary.
pub(crate) fn looks_like_callgrind(text: &str) -> bool {
    text.lines().filter_map(valgrind_body).any(|body| {
        body.starts_with("Callgrind, ")
            || body.starts_with("Cachegrind, ")
            || body.starts_with("Collected :")
            || body.starts_with("I   refs:")
    })
}

pub(crate) fn parse(text: &str) -> Result<Metrics, ParseError> {
    let prefix = if text
        .lines()
        .filter_map(valgrind_body)
        .any(|b| b.starts_with("Cachegrind, "))
    {
        "cachegrind"
    } else {
        "callgrind"
    };
    let mut metrics = Metrics::new();
    let mut events: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = || Location::Line(i + 1);
        let Some(body) = valgrind_body(line) else {
            continue;
        };
        if let Some(names) = body.strip_prefix("Events    :") {
            events = names.split_whitespace().map(str::to_owned).collect();
            continue;
        }
        if let Some(counts) = body.strip_prefix("Collected :") {
            for (name, count) in events.iter().zip(counts.split_whitespace()) {
                match plain(count) {
                    Number::Finite(v) => {
                        metrics.insert(format!("{prefix}.{name}"), v);
                    }
                    Number::NonFinite => {
                        return Err(ParseError::NonFinite {
                            at: at(),
                            value: count.to_owned(),
                        });
                    }
                    Number::Not => {
                        return Err(ParseError::NotANumber {
                            at: at(),
                            value: count.to_owned(),
                        });
                    }
                }
            }
            continue;
        }
        // The summary: `key: value [ (split) ]`, the key letters, digits and spaces.
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty()
            || !key.starts_with(|c: char| c.is_ascii_alphabetic())
            || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
        {
            continue;
        }
        let value = value.split('(').next().unwrap_or("").trim();
        let (value, pct) = match value.strip_suffix('%') {
            Some(v) => (v.trim(), true),
            None => (value, false),
        };
        match grouped(value) {
            Number::Finite(v) => {
                let name = format!("{prefix}.{}{}", one_word(key), if pct { "%" } else { "" });
                metrics.insert(name, v);
            }
            Number::NonFinite => {
                return Err(ParseError::NonFinite {
                    at: at(),
                    value: value.to_owned(),
                });
            }
            // Banner lines with a colon (`Command: ./bench`) are not metrics.
            Number::Not => {}
        }
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_valgrinds_only() {
        assert_eq!(valgrind_body("==123== I   refs: 1"), Some("I   refs: 1"));
        assert_eq!(valgrind_body("== I refs"), None);
        assert_eq!(valgrind_body("====  x"), None);
        assert_eq!(valgrind_body("score: 5"), None);
    }

    #[test]
    fn summary_lines_events_and_the_programs_own_lines() {
        let text = "score: 12\n==9== Callgrind, a call-graph generating cache profiler\n\
                    ==9== Command: ./bench --mode: fast\n==9== Events    : Ir\n\
                    ==9== Collected : 582559033\n==9== \n==9== I   refs:      582,559,033\n";
        let m = parse(text).unwrap();
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m["callgrind.Ir"], 582_559_033.0);
        assert_eq!(m["callgrind.I_refs"], 582_559_033.0);
        assert!(looks_like_callgrind(text));
        assert!(!looks_like_callgrind("score: 12\n"));
    }

    #[test]
    fn a_broken_count_is_an_error_naming_its_line() {
        let err = parse("==9== Events    : Ir\n==9== Collected : 12x\n").unwrap_err();
        assert_eq!(err.to_string(), "line 2: `12x` is not a number");
    }
}
