//! `key: value` and `key=value` lines.

use crate::number::{self, Number};
use crate::{Location, Metrics, ParseError, prefixed_name};

/// Reads every `key: number` / `key=number` line (see the crate docs for the exact rule);
/// other lines are ignored. The last value of a key wins.
pub(crate) fn parse(text: &str, program: &str) -> Result<Metrics, ParseError> {
    let mut metrics = Metrics::new();
    for (i, line) in text.lines().enumerate() {
        let Some((key, value)) = split(line) else {
            continue;
        };
        let value = value.strip_suffix('%').unwrap_or(value);
        match number::plain(value) {
            Number::Finite(v) => {
                metrics.insert(prefixed_name(program, key), v);
            }
            Number::NonFinite => {
                return Err(ParseError::NonFinite {
                    at: Location::Line(i + 1),
                    value: value.trim().to_owned(),
                });
            }
            Number::Not => {}
        }
    }
    Ok(metrics)
}

/// Splits `key: value` or `key=value` at the first `:` or `=`, if the key is a metric key.
fn split(line: &str) -> Option<(&str, &str)> {
    let line = line.trim();
    let at = line.find([':', '='])?;
    let key = line[..at].trim_end();
    let value = line[at + 1..].trim();
    is_key(key).then_some((key, value))
}

/// One word of letters, digits and `_ . % / + -`, starting with a letter or `_`.
fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.%/+-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(pairs: &[(&str, f64)]) -> Metrics {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn reads_both_separators_and_ignores_the_rest() {
        let text = "\
starting benchmark at 12:30:01
jobs-per-min: 539418
  elapsed = 33.57
throughput:12
cpu.idle%: 24.75%
Requests per second: 1234
latency: 12 ms
count: 1,234
status: ok
: 5
9lives: 9
a=1 b=2
";
        let m = parse(text, "aim7").unwrap();
        assert_eq!(
            m,
            metrics(&[
                ("aim7.jobs-per-min", 539418.0),
                ("aim7.elapsed", 33.57),
                ("aim7.throughput", 12.0),
                ("aim7.cpu.idle%", 24.75),
            ])
        );
    }

    #[test]
    fn last_value_wins() {
        let m = parse("ops: 1\nops: 2\nops=3\n", "p").unwrap();
        assert_eq!(m, metrics(&[("p.ops", 3.0)]));
    }

    #[test]
    fn program_prefix_is_not_doubled() {
        let m = parse("p.ops: 1\nq.ops: 2\n", "p").unwrap();
        assert_eq!(m, metrics(&[("p.ops", 1.0), ("p.q.ops", 2.0)]));
    }

    #[test]
    fn non_finite_value_names_the_line() {
        let err = parse("ops: 1\nratio: NaN\n", "p").unwrap_err();
        assert_eq!(err.to_string(), "line 2: non-finite value `NaN`");
        let err = parse("big = 1e999", "p").unwrap_err();
        assert_eq!(err.to_string(), "line 1: non-finite value `1e999`");
    }

    #[test]
    fn garbage_yields_nothing() {
        let m = parse("\u{0}\u{1}binary\n{{{\n=== ===\n", "p").unwrap();
        assert!(m.is_empty());
    }
}
