//! `perf stat` output: the human-readable table, `-x,` CSV, and both with `-I` intervals.
//!
//! Each counted event becomes `perf-stat.<event>` with the value perf printed, in perf's
//! unit (counts for hardware and software events, msec for `task-clock` and `cpu-clock`,
//! ns for `duration_time`). A PMU-qualified event keeps its inner name and modifiers:
//! `cpu_core/instructions/u` → `perf-stat.instructions:u`; a modifier perf prints itself
//! (`instructions:u`) stays. Lines of the same event are added up — the core types of a
//! hybrid CPU, and the intervals of `-I` mode (each interval line is a delta, so the sum is
//! the whole run). `<not supported>` and `<not counted>` events are skipped. The human
//! table's footer gives `perf-stat.elapsed_time`, `perf-stat.user_time` and
//! `perf-stat.system_time` in seconds (`-r` prints only the elapsed time, as a mean).
//!
//! Lines are trusted only where perf wrote them: after the last `Performance counter stats
//! for` header when there is one; otherwise only `-I` interval lines (time stamp first) when
//! there are any; otherwise every `<number> [unit] <event>` line. In a CSV document only
//! CSV counter lines are read. Per-CPU, per-core and per-socket modes (`-A`, `--per-core`,
//! `--per-socket`) are not supported: their lines are skipped. Counts are read in the C /
//! English locale (`1,234,567`); a decimal comma is not a number. Derived ratios (IPC,
//! miss rates) are not computed: they can be derived from the counts.

use crate::number::{self, Number};
use crate::{Location, Metrics, ParseError};

const HEADER: &str = "Performance counter stats for";
const PREFIX: &str = "perf-stat.";

/// Units perf prints between a value and its event in the human table.
const UNITS: [&str; 17] = [
    "msec", "usec", "nsec", "ns", "us", "ms", "sec", "Joules", "J", "W", "Bytes", "bytes", "B",
    "KiB", "MiB", "GiB", "%",
];

/// One line's worth of perf stat.
#[derive(Debug, PartialEq)]
enum Record {
    /// `<not supported>` / `<not counted>`.
    Skip,
    Count {
        name: String,
        value: f64,
    },
    /// A footer time (`seconds time elapsed`, `seconds user`, `seconds sys`): not summed.
    Time {
        name: &'static str,
        value: f64,
    },
}

/// Whether `text` has perf stat's header, its `-I` column header, or a CSV counter line.
pub(crate) fn looks_like_perf_stat(text: &str) -> bool {
    text.lines().any(|line| {
        line.contains(HEADER) || is_interval_header(line) || matches!(csv(line, 0), Ok(Some(_)))
    })
}

pub(crate) fn parse(text: &str) -> Result<Metrics, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(r) = csv(line, i + 1)? {
            records.push(r);
        }
    }
    if records.is_empty() {
        records = human(&lines)?;
    }

    let mut metrics = Metrics::new();
    for record in records {
        match record {
            Record::Skip => {}
            Record::Count { name, value } => *metrics.entry(name).or_insert(0.0) += value,
            Record::Time { name, value } => {
                metrics.insert(format!("{PREFIX}{name}"), value);
            }
        }
    }
    Ok(metrics)
}

/// The records of the human-readable table, from the part of `lines` perf wrote.
fn human(lines: &[&str]) -> Result<Vec<Record>, ParseError> {
    let header = lines.iter().rposition(|l| l.contains(HEADER));
    let (first, intervals_only) = match header {
        Some(h) => (h + 1, false),
        None => {
            let any_interval = lines
                .iter()
                .enumerate()
                .any(|(i, l)| matches!(interval_line(l, i + 1), Ok(Some(_))));
            (0, any_interval)
        }
    };
    let mut records = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(first) {
        let n = i + 1;
        let record = if intervals_only {
            interval_line(line, n)?
        } else {
            summary_line(line, n)?
        };
        records.extend(record);
    }
    Ok(records)
}

/// `     0.100188104              99.90 msec task-clock   # ...`
fn interval_line(line: &str, n: usize) -> Result<Option<Record>, ParseError> {
    let body = line.split('#').next().unwrap_or("");
    let Some((stamp, rest)) = body.trim_start().split_once(char::is_whitespace) else {
        return Ok(None);
    };
    if !matches!(number::plain(stamp), Number::Finite(_)) {
        return Ok(None);
    }
    let rest = rest.trim_start();
    if !rest.starts_with("<not ") && number::grouped(first_word(rest)) == Number::Not {
        return Ok(None);
    }
    counter_line(rest, n)
}

/// A summary line of the table: a counter, or a footer time.
fn summary_line(line: &str, n: usize) -> Result<Option<Record>, ParseError> {
    let body = line.split('#').next().unwrap_or("").trim();
    let words: Vec<&str> = body.split_whitespace().collect();
    if let Some(s) = words.iter().position(|w| *w == "seconds") {
        let name = match &words[s + 1..] {
            ["time", "elapsed", ..] => "elapsed_time",
            ["user", ..] => "user_time",
            ["sys", ..] => "system_time",
            _ => return counter_line(body, n),
        };
        // `0.0437 seconds time elapsed`, or with -r `0.0437 +- 0.0024 seconds time elapsed`.
        if s == 1 || (s == 3 && words[1] == "+-") {
            let value = finite(number::grouped(words[0]), words[0], n)?;
            return Ok(value.map(|value| Record::Time { name, value }));
        }
    }
    counter_line(body, n)
}

/// `<value> [unit] <event> ...` or `<not supported> <event> ...`.
fn counter_line(body: &str, n: usize) -> Result<Option<Record>, ParseError> {
    let body = body.trim();
    if let Some(rest) = body.strip_prefix("<not ") {
        let event = rest
            .split_once('>')
            .map(|(_, e)| first_word(e.trim_start()));
        return Ok(event.filter(|e| is_event(e)).map(|_| Record::Skip));
    }
    let words: Vec<&str> = body.split_whitespace().collect();
    let Some(value) = words.first() else {
        return Ok(None);
    };
    let event_at = if words.get(1).is_some_and(|w| UNITS.contains(w)) {
        2
    } else {
        1
    };
    let Some(event) = words.get(event_at).filter(|e| is_event(e)) else {
        return Ok(None);
    };
    let Some(value) = finite(number::grouped(value), value, n)? else {
        return Ok(None);
    };
    Ok(Some(Record::Count {
        name: event_name(event),
        value,
    }))
}

/// A `-x,` line: `value,unit,event,run time,percent[,...]`, or with `-I`
/// `time,value,unit,event,...`. `Ok(None)` when the line is not one.
fn csv(line: &str, n: usize) -> Result<Option<Record>, ParseError> {
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    if fields.len() < 5 {
        return Ok(None);
    }
    let is_value = |s: &str| s.starts_with("<not ") || number::plain(s) != Number::Not;
    let interval = matches!(number::plain(fields[0]), Number::Finite(_)) && is_value(fields[1]);
    let (value, unit, event) = if interval {
        (fields[1], fields[2], fields.get(3).copied().unwrap_or(""))
    } else {
        (fields[0], fields[1], fields[2])
    };
    if !is_value(value) || number::plain(unit) != Number::Not || !is_event(event) {
        return Ok(None);
    }
    if value.starts_with("<not ") {
        return Ok(Some(Record::Skip));
    }
    Ok(
        finite(number::plain(value), value, n)?.map(|value| Record::Count {
            name: event_name(event),
            value,
        }),
    )
}

fn finite(parsed: Number, text: &str, n: usize) -> Result<Option<f64>, ParseError> {
    match parsed {
        Number::Finite(v) => Ok(Some(v)),
        Number::NonFinite => Err(ParseError::NonFinite {
            at: Location::Line(n),
            value: text.to_owned(),
        }),
        Number::Not => Ok(None),
    }
}

fn is_interval_header(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.starts_with(&["#", "time", "counts"])
}

/// An event as perf prints it: starts with a letter, no spaces.
fn is_event(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:/=,@".contains(c))
}

/// `cpu_core/instructions/u` → `perf-stat.instructions:u`; `cycles` → `perf-stat.cycles`.
fn event_name(event: &str) -> String {
    let parts: Vec<&str> = event.split('/').collect();
    match parts.as_slice() {
        [_pmu, inner, mods] if !inner.is_empty() && mods.is_empty() => format!("{PREFIX}{inner}"),
        [_pmu, inner, mods] if !inner.is_empty() => format!("{PREFIX}{inner}:{mods}"),
        _ => format!("{PREFIX}{event}"),
    }
}

fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names() {
        assert_eq!(event_name("cycles"), "perf-stat.cycles");
        assert_eq!(event_name("instructions:u"), "perf-stat.instructions:u");
        assert_eq!(
            event_name("cpu_core/instructions/"),
            "perf-stat.instructions"
        );
        assert_eq!(event_name("cpu_atom/cycles/u"), "perf-stat.cycles:u");
    }

    #[test]
    fn human_lines() {
        let line = "         12,345.67 msec task-clock      #    7.123 CPUs utilized";
        assert_eq!(
            summary_line(line, 1).unwrap(),
            Some(Record::Count {
                name: "perf-stat.task-clock".into(),
                value: 12345.67
            })
        );
        let line = "     1,234      instructions    ( +-  0.12% )";
        assert!(
            matches!(summary_line(line, 1).unwrap(), Some(Record::Count { value, .. }) if value == 1234.0)
        );
        let line = "   <not supported>      cycles";
        assert_eq!(summary_line(line, 1).unwrap(), Some(Record::Skip));
        let line = "           0.04379 +- 0.00244 seconds time elapsed  ( +-  5.57% )";
        assert_eq!(
            summary_line(line, 1).unwrap(),
            Some(Record::Time {
                name: "elapsed_time",
                value: 0.04379
            })
        );
        for not in [
            "",
            "20000+0 records in",
            "0,46 msec task-clock",
            "# comment 12",
            "12 34",
        ] {
            assert_eq!(summary_line(not, 1).unwrap(), None, "{not:?}");
        }
    }

    #[test]
    fn csv_lines() {
        let rec = csv(
            "40.62,msec,task-clock,40619988,100.00,0.983,CPUs utilized",
            1,
        )
        .unwrap();
        assert!(
            matches!(rec, Some(Record::Count { ref name, value }) if name == "perf-stat.task-clock" && value == 40.62)
        );
        let rec = csv(
            "     0.1002,153,,page-faults,99948580,100.00,1.531,K/sec",
            1,
        )
        .unwrap();
        assert!(matches!(rec, Some(Record::Count { value, .. }) if value == 153.0));
        let rec = csv("0.1002,<not supported>,,instructions,0,100.00,,", 1).unwrap();
        assert_eq!(rec, Some(Record::Skip));
        for not in [
            "1,234,567      instructions",
            "1,2,3,4,5",
            "a,b,c,d,e",
            "1310720000 bytes (1.3 GB, 1.2 GiB) copied, 0.03 s, 36.9 GB/s",
        ] {
            assert_eq!(csv(not, 1).unwrap(), None, "{not:?}");
        }
    }

    #[test]
    fn non_finite_counts_are_errors() {
        let text = " Performance counter stats for 'x':\n\n       nan      instructions\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.to_string(), "line 3: non-finite value `nan`");
        let err = parse("inf,,cycles,100,100.00,,\n").unwrap_err();
        assert_eq!(err.to_string(), "line 1: non-finite value `inf`");
    }

    #[test]
    fn only_the_last_table_is_read() {
        let text = "\
 Performance counter stats for 'a':
     100      instructions
 Performance counter stats for 'b':
     200      instructions
";
        let m = parse(text).unwrap();
        assert_eq!(m["perf-stat.instructions"], 200.0);
    }

    #[test]
    fn program_output_outside_the_table_is_ignored() {
        let text = "\
3 files copied
 Performance counter stats for 'cp':
     200      instructions
";
        let m = parse(text).unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["perf-stat.instructions"]);
    }
}
