//! Benchmark output parsers: one run's output in, named metrics out.
//!
//! The worker calls [`parse`] after each run with the run's stdout (and again with a results
//! file, if the job has one). Every metric is named in LKP's `<program>.<key>` form
//! (`fio.write_iops`, `time.elapsed_time`, `perf-stat.instructions`) and is a finite `f64`.
//! The crate does no I/O: it only reads the text it is given.
//!
//! # Formats and the names they produce
//!
//! | [`Format`] | input | names |
//! | --- | --- | --- |
//! | `Json` | a JSON object of name → number | `<program>.<key>`, nested keys joined with `.` |
//! | `LkpStats` | LKP's `stats.json` | the keys as they are (`aim7.jobs-per-min`) |
//! | `KeyValue` | `key: 123.4` or `key=123.4` lines | `<program>.<key>` |
//! | `Fio` | `fio --output-format=json` | `fio.write_iops`, `fio.write_clat_90%_ns`, ... |
//! | `TimeV` | GNU `/usr/bin/time -v` | `time.elapsed_time`, `time.maximum_resident_set_size`, ... |
//! | `PerfStat` | `perf stat`, human or `-x,` CSV, plain or `-I` interval | `perf-stat.instructions`, ... |
//! | `Callgrind` | `valgrind --tool=callgrind` (or cachegrind) on stderr | `callgrind.Ir`, `callgrind.I_refs`, ... |
//! | `Auto` | any of the above | see [`detect`] |
//!
//! ## The `program` prefix
//! `Json` and `KeyValue` names have no program of their own, so they get `<program>.` in
//! front — unless the name already starts with `<program>.` (so `{"aim7": {"jobs": 1}}` and
//! `{"aim7.jobs": 1}` both give `aim7.jobs` for program `aim7`). An empty `program` adds no
//! prefix. `LkpStats`, `Fio`, `TimeV` and `PerfStat` ignore `program`: their names are fixed
//! (`fio.`, `time.`, `perf-stat.`) or already complete. Runs of whitespace inside a name
//! become `_`, so a name is always one word in a report table.
//!
//! ## Numbers
//! Values are plain decimal numbers (`12`, `-0.5`, `1.2e9`). `NaN` and infinities (`nan`,
//! `inf`, `1e999`) are an error naming where they were, never a metric. In JSON, strings
//! holding such a number are accepted (`"42"`); other strings, booleans and nulls are
//! skipped. In JSON and `stats.json` an array of numbers (LKP stores one value per
//! iteration) becomes its **mean**; non-numeric elements are skipped.
//!
//! ## `key: value` lines
//! A line is a metric when it is `key: number` or `key=number` (spaces allowed around the
//! separator, a trailing `%` allowed) and the key is one word of letters, digits and
//! `_ . % / + -` starting with a letter or `_`. Every other line is ignored. A value with a
//! unit (`latency: 12 ms`) is ignored on purpose: programs often scale units on their own
//! (`900 ms`, then `1.2 s`), and comparing such numbers would be silently wrong — print the
//! unit in the key (`latency_ms: 12`) instead. Thousands separators (`1,234`) are refused
//! for the same reason (locale-dependent).
//!
//! ## Duplicates
//! Within one input the last value of a name wins (a benchmark that prints progress lines
//! ends with its final value), except in `perf stat` output, where counts of the same
//! event are added: hybrid CPUs print one line per core type (`cpu_core/cycles/`,
//! `cpu_atom/cycles/`) and interval mode prints one line per interval.
//!
//! An input that yields no metric at all is [`ParseError::NoMetrics`]: a run whose output
//! did not contain what the job expected is not a run with zero metrics.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

mod callgrind;
mod fio;
mod json;
mod keyvalue;
mod number;
mod perfstat;
mod timev;

/// Metric name → value. Names are LKP-style (`fio.write_iops`); values are finite.
pub type Metrics = BTreeMap<String, f64>;

/// The shape of a benchmark's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Detect the format from the text; see [`detect`].
    Auto,
    /// A JSON object of name → number, nested objects flattened with `.`.
    Json,
    /// `key: value` / `key=value` lines; other lines are ignored.
    KeyValue,
    /// LKP's `stats.json`: complete names → number or per-iteration array of numbers.
    LkpStats,
    /// `fio --output-format=json`.
    Fio,
    /// GNU `/usr/bin/time -v`.
    TimeV,
    /// `perf stat`, human-readable or `-x,` CSV, optionally with `-I`.
    PerfStat,
    /// `valgrind --tool=callgrind` or `--tool=cachegrind` summaries (their stderr).
    Callgrind,
}

impl Format {
    /// Every format, `Auto` first.
    pub const ALL: [Format; 8] = [
        Format::Auto,
        Format::Json,
        Format::KeyValue,
        Format::LkpStats,
        Format::Fio,
        Format::TimeV,
        Format::PerfStat,
        Format::Callgrind,
    ];

    /// The snake_case name used in job specs and in serde (`key_value`, `time_v`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Json => "json",
            Format::KeyValue => "key_value",
            Format::LkpStats => "lkp_stats",
            Format::Fio => "fio",
            Format::TimeV => "time_v",
            Format::PerfStat => "perf_stat",
            Format::Callgrind => "callgrind",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown format name given to [`Format::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown metrics format `{0}` (expected one of: auto, json, key_value, lkp_stats, fio, time_v, perf_stat, callgrind)"
)]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// Where in the input a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A 1-based line number.
    Line(usize),
    /// A JSON field path, e.g. `jobs[0].write.iops` or `aim7.jobs-per-min`.
    Field(String),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Field(path) => write!(f, "field `{path}`"),
        }
    }
}

/// Why an input could not be turned into metrics.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The input was read but held no metric in the expected format.
    #[error("no metrics found in the input (format {format})")]
    NoMetrics { format: Format },
    /// JSON input that is not valid JSON.
    #[error("invalid JSON: {source}")]
    Json {
        #[from]
        source: serde_json::Error,
    },
    /// JSON whose top level is not an object of metrics.
    #[error("expected a JSON object of metrics, found {found}")]
    NotAnObject { found: &'static str },
    /// fio output without any JSON object in it.
    #[error("no JSON object found in fio output (was fio run with --output-format=json?)")]
    NoFioJson,
    /// A field the format requires is absent or of the wrong type.
    #[error("{at}: missing or not {expected}")]
    MissingField {
        at: Location,
        expected: &'static str,
    },
    /// A value that must be a number is not one.
    #[error("{at}: `{value}` is not a number")]
    NotANumber { at: Location, value: String },
    /// A NaN or infinite value: never a metric.
    #[error("{at}: non-finite value `{value}`")]
    NonFinite { at: Location, value: String },
    /// A `/usr/bin/time -v` wall-clock time not of the form `h:mm:ss` or `m:ss.ss`.
    #[error("{at}: elapsed time `{value}` is not h:mm:ss or m:ss.ss")]
    BadElapsedTime { at: Location, value: String },
    /// fio reported an error for one of its jobs: the run did not complete.
    #[error("{at}: fio job `{job}` failed with error {code}")]
    FioJobFailed {
        at: Location,
        job: String,
        code: i64,
    },
}

/// Parses one run's output in `format` into metrics.
///
/// `program` prefixes the names of `Json` and `KeyValue` input (see the crate docs); the
/// other formats ignore it. With [`Format::Auto`] the format is chosen by [`detect`] and
/// the chosen parser's error, if any, is returned as is.
///
/// ```
/// use perfbisect_metrics::{parse, Format};
/// let m = parse(Format::KeyValue, "aim7", "jobs-per-min: 539418\nsome log line\n").unwrap();
/// assert_eq!(m["aim7.jobs-per-min"], 539418.0);
/// ```
pub fn parse(format: Format, program: &str, text: &str) -> Result<Metrics, ParseError> {
    let format = match format {
        Format::Auto => detect(text),
        f => f,
    };
    if text.trim().is_empty() {
        return Err(ParseError::NoMetrics { format });
    }
    let metrics = match format {
        Format::Auto => unreachable!("detect never returns Auto"),
        Format::Json => json::parse(text, Some(program))?,
        Format::LkpStats => json::parse(text, None)?,
        Format::KeyValue => keyvalue::parse(text, program)?,
        Format::Fio => fio::parse(text)?,
        Format::TimeV => timev::parse(text)?,
        Format::PerfStat => perfstat::parse(text)?,
        Format::Callgrind => callgrind::parse(text)?,
    };
    if metrics.is_empty() {
        return Err(ParseError::NoMetrics { format });
    }
    Ok(metrics)
}

/// Guesses the format of `text`; never returns [`Format::Auto`].
///
/// In order: fio JSON (a `"fio version"` field), other JSON (text starting with `{`: LKP
/// stats when every top-level key contains a `.` and every value is a number or an array
/// of numbers, plain JSON otherwise), `/usr/bin/time -v` (an `Elapsed (wall clock) time`
/// line), `valgrind` callgrind/cachegrind summaries (its `==PID==` banner or summary),
/// `perf stat` (its `Performance counter stats for` header, its `-I` column header,
/// or a `-x,` CSV counter line), and `key: value` lines for everything else.
/// One input is one format: a stdout that mixes several (say `time -v` wrapped around a
/// program printing `key: value`) should be split by the caller and parsed per part.
pub fn detect(text: &str) -> Format {
    let trimmed = text.trim_start();
    if text.contains("\"fio version\"") {
        return Format::Fio;
    }
    if trimmed.starts_with('{') {
        return if json::looks_like_lkp_stats(trimmed) {
            Format::LkpStats
        } else {
            Format::Json
        };
    }
    if callgrind::looks_like_callgrind(text) {
        return Format::Callgrind;
    }
    if text.lines().any(timev::is_elapsed_line) {
        return Format::TimeV;
    }
    if perfstat::looks_like_perf_stat(text) {
        return Format::PerfStat;
    }
    Format::KeyValue
}

/// Adds `name` with `<program>.` in front unless it already starts with it (see crate docs),
/// with runs of whitespace replaced by `_`.
pub(crate) fn prefixed_name(program: &str, name: &str) -> String {
    let name = one_word(name);
    if program.is_empty()
        || name
            .strip_prefix(program)
            .is_some_and(|rest| rest.starts_with('.'))
    {
        name
    } else {
        format!("{program}.{name}")
    }
}

/// `name` with every run of whitespace replaced by one `_`.
pub(crate) fn one_word(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join("_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_round_trip_through_from_str_and_serde() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.as_str()));
            assert_eq!(serde_json::from_str::<Format>(&json).unwrap(), f);
        }
        let err = "yaml".parse::<Format>().unwrap_err();
        assert!(err.to_string().contains("`yaml`"), "{err}");
    }

    #[test]
    fn prefix_is_added_once() {
        assert_eq!(prefixed_name("aim7", "jobs-per-min"), "aim7.jobs-per-min");
        assert_eq!(
            prefixed_name("aim7", "aim7.jobs-per-min"),
            "aim7.jobs-per-min"
        );
        assert_eq!(prefixed_name("aim7", "aim7x.jobs"), "aim7.aim7x.jobs");
        assert_eq!(
            prefixed_name("aim7", "time.elapsed_time"),
            "aim7.time.elapsed_time"
        );
        assert_eq!(prefixed_name("", "jobs"), "jobs");
        assert_eq!(prefixed_name("x", "fio  version"), "x.fio_version");
    }

    #[test]
    fn empty_input_is_no_metrics_for_every_format() {
        for f in Format::ALL {
            for text in ["", "  \n\t\n"] {
                let err = parse(f, "p", text).unwrap_err();
                assert!(matches!(err, ParseError::NoMetrics { .. }), "{f}: {err}");
                assert!(err.to_string().starts_with("no metrics found"), "{err}");
            }
        }
    }

    #[test]
    fn errors_name_their_location() {
        let e = ParseError::NonFinite {
            at: Location::Line(3),
            value: "nan".into(),
        };
        assert_eq!(e.to_string(), "line 3: non-finite value `nan`");
        let e = ParseError::MissingField {
            at: Location::Field("jobs".into()),
            expected: "an array",
        };
        assert_eq!(e.to_string(), "field `jobs`: missing or not an array");
    }
}
