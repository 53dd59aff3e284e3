//! Plain JSON objects of metrics and LKP's `stats.json`.

use serde_json::Value;

use crate::number::{self, Number};
use crate::{Location, Metrics, ParseError, one_word, prefixed_name};

/// Parses a JSON object of name → number. With `program`, names get the `<program>.`
/// prefix (plain JSON); without, they are kept as they are (LKP `stats.json`).
pub(crate) fn parse(text: &str, program: Option<&str>) -> Result<Metrics, ParseError> {
    let value: Value = serde_json::from_str(text)?;
    let Value::Object(map) = value else {
        return Err(ParseError::NotAnObject {
            found: kind(&value),
        });
    };
    let mut metrics = Metrics::new();
    flatten(&map, "", program, &mut metrics)?;
    Ok(metrics)
}

/// Whether `text` is a non-empty flat JSON object whose keys all contain a `.` and whose
/// values are all numbers or arrays of numbers — the shape of LKP's `stats.json`.
pub(crate) fn looks_like_lkp_stats(text: &str) -> bool {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    !map.is_empty()
        && map.iter().all(|(k, v)| {
            k.contains('.')
                && match v {
                    Value::Number(_) => true,
                    Value::Array(items) => items.iter().all(Value::is_number),
                    _ => false,
                }
        })
}

fn flatten(
    map: &serde_json::Map<String, Value>,
    prefix: &str,
    program: Option<&str>,
    out: &mut Metrics,
) -> Result<(), ParseError> {
    for (key, value) in map {
        if key.trim().is_empty() {
            continue;
        }
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let found = match value {
            Value::Object(inner) => {
                flatten(inner, &path, program, out)?;
                None
            }
            Value::Array(items) => mean(items, &path)?,
            scalar => scalar_value(scalar, &path)?,
        };
        if let Some(v) = found {
            let name = match program {
                Some(program) => prefixed_name(program, &path),
                None => one_word(&path),
            };
            out.insert(name, v);
        }
    }
    Ok(())
}

/// A number, or a string holding one; `None` for anything else.
fn scalar_value(value: &Value, path: &str) -> Result<Option<f64>, ParseError> {
    let (parsed, text) = match value {
        Value::Number(n) => match n.as_f64() {
            Some(v) if v.is_finite() => (Number::Finite(v), None),
            _ => (Number::NonFinite, Some(n.to_string())),
        },
        Value::String(s) => (number::plain(s), Some(s.clone())),
        _ => (Number::Not, None),
    };
    match parsed {
        Number::Finite(v) => Ok(Some(v)),
        Number::NonFinite => Err(ParseError::NonFinite {
            at: Location::Field(path.to_owned()),
            value: text.unwrap_or_default(),
        }),
        Number::Not => Ok(None),
    }
}

/// The mean of the numeric elements of an array (LKP's per-iteration values); `None` when
/// it has none.
fn mean(items: &[Value], path: &str) -> Result<Option<f64>, ParseError> {
    let mut sum = 0.0;
    let mut n = 0usize;
    for (i, item) in items.iter().enumerate() {
        if let Some(v) = scalar_value(item, &format!("{path}[{i}]"))? {
            sum += v;
            n += 1;
        }
    }
    Ok((n > 0).then(|| sum / n as f64))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_objects_are_flattened_and_prefixed() {
        let text = r#"{"throughput": 12.5, "latency": {"p50": 1, "p99": "2.5"},
                       "name": "run 1", "ok": true, "none": null, "hello world": 3}"#;
        let m = parse(text, Some("bench")).unwrap();
        let expected: Metrics = [
            ("bench.throughput", 12.5),
            ("bench.latency.p50", 1.0),
            ("bench.latency.p99", 2.5),
            ("bench.hello_world", 3.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(m, expected);
    }

    #[test]
    fn names_already_under_the_program_are_not_prefixed_twice() {
        let m = parse(
            r#"{"bench": {"ops": 1}, "bench.x": 2, "other.y": 3}"#,
            Some("bench"),
        )
        .unwrap();
        let names: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(names, ["bench.ops", "bench.other.y", "bench.x"]);
    }

    #[test]
    fn arrays_become_their_mean() {
        let m = parse(r#"{"a.b": [1, 2, "3", "x", null, 6]}"#, None).unwrap();
        assert_eq!(m["a.b"], 3.0);
        let m = parse(r#"{"a.b": ["x"], "a.c": [], "a.d": 1}"#, None).unwrap();
        assert_eq!(m.len(), 1, "{m:?}");
    }

    #[test]
    fn non_finite_strings_are_errors_naming_the_field() {
        let err = parse(r#"{"a": {"b": "NaN"}}"#, Some("p")).unwrap_err();
        assert_eq!(err.to_string(), "field `a.b`: non-finite value `NaN`");
        let err = parse(r#"{"a.b": [1, "inf"]}"#, None).unwrap_err();
        assert_eq!(err.to_string(), "field `a.b[1]`: non-finite value `inf`");
    }

    #[test]
    fn json_errors_and_non_objects() {
        assert!(matches!(
            parse("{\"a\": ", None),
            Err(ParseError::Json { .. })
        ));
        assert!(matches!(parse("NaN", None), Err(ParseError::Json { .. })));
        assert!(matches!(
            parse("{\"a\": 1e999}", None),
            Err(ParseError::Json { .. })
        ));
        let err = parse("[1, 2]", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "expected a JSON object of metrics, found an array"
        );
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let m = parse(r#"{"a": 1, "a": 2}"#, Some("p")).unwrap();
        assert_eq!(m["p.a"], 2.0);
    }

    #[test]
    fn lkp_stats_shape() {
        assert!(looks_like_lkp_stats(
            r#"{"aim7.jobs-per-min": 1, "time.x": [1, 2]}"#
        ));
        assert!(!looks_like_lkp_stats(r#"{"jobs": 1}"#));
        assert!(!looks_like_lkp_stats(r#"{"a.b": {"c": 1}}"#));
        assert!(!looks_like_lkp_stats(r#"{"a.b": "1"}"#));
        assert!(!looks_like_lkp_stats("{}"));
        assert!(!looks_like_lkp_stats("{"));
    }
}
