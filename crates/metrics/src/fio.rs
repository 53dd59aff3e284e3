//! `fio --output-format=json` output.
//!
//! Names follow lkp-tests' `programs/fio/parse`, which is what 0-day reports print
//! (`fio.write_iops`, `fio.write_clat_90%_ns`): for each direction `d` in `read`, `write`,
//! `trim` that did any I/O,
//!
//! | name | meaning |
//! | --- | --- |
//! | `fio.d_iops` | I/O operations per second, summed over jobs |
//! | `fio.d_bw_MBps` | bandwidth, fio's KiB/s / 1024, summed over jobs |
//! | `fio.d_clat_mean_ns` | mean completion latency, ns |
//! | `fio.d_clat_stddev` | its standard deviation, ns |
//! | `fio.d_clat_90%_ns`, `_95%_ns`, `_99%_ns` | completion-latency percentiles, ns |
//! | `fio.d_lat_mean_ns` | mean total (submission + completion) latency, ns |
//! | `fio.d_slat_mean_ns` | mean submission latency, ns (only when fio measured it) |
//!
//! plus `fio.workload` (read + write I/Os, as LKP counts it) and the latency histogram
//! buckets `fio.latency_<N>us%` / `fio.latency_<N>ms%` (percent of I/Os).
//!
//! Latencies are in ns whatever the fio version: fio 3+ reports `clat_ns`, older fio
//! `clat` in µs, which is converted. (LKP names these `_ns` since fio 3; older 0-day
//! reports said `_us`.)
//!
//! Several jobs (no `group_reporting`) are aggregated as running side by side: iops and
//! bandwidth are summed; means, percentiles and histogram buckets are averaged weighted by
//! each job's I/O count, and the stddev is the pooled one. A percentile averaged over jobs is
//! an approximation of the percentile of all I/Os. A job with a non-zero `error` fails the
//! whole parse: that run did not complete.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{Location, Metrics, ParseError};

const DIRECTIONS: [&str; 3] = ["read", "write", "trim"];
const PERCENTILES: [(f64, &str); 3] = [(90.0, "90%"), (95.0, "95%"), (99.0, "99%")];
const BUCKETS: [(&str, &str); 2] = [("latency_us", "us"), ("latency_ms", "ms")];

/// A running weighted mean.
#[derive(Debug, Default, Clone, Copy)]
struct Mean {
    sum: f64,
    weight: f64,
}

impl Mean {
    fn add(&mut self, value: f64, weight: f64) {
        self.sum += value * weight;
        self.weight += weight;
    }

    fn get(self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.sum / self.weight)
    }
}

/// One direction (read, write or trim) over all jobs.
#[derive(Debug, Default)]
struct Direction {
    ios: f64,
    iops: f64,
    bw_kib: f64,
    clat_mean: Mean,
    /// Weighted mean of stddev² + mean², for the pooled stddev.
    clat_second_moment: Mean,
    clat_percentiles: [Mean; PERCENTILES.len()],
    lat_mean: Mean,
    slat_mean: Mean,
}

pub(crate) fn parse(text: &str) -> Result<Metrics, ParseError> {
    let start = text.find('{').ok_or(ParseError::NoFioJson)?;
    let root = serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()
        .ok_or(ParseError::NoFioJson)??;
    let jobs =
        root.get("jobs")
            .and_then(Value::as_array)
            .ok_or_else(|| ParseError::MissingField {
                at: Location::Field("jobs".into()),
                expected: "an array",
            })?;

    let mut directions: [Direction; 3] = Default::default();
    let mut buckets: BTreeMap<String, Mean> = BTreeMap::new();
    for (j, job) in jobs.iter().enumerate() {
        let path = format!("jobs[{j}]");
        check_error(job, &path)?;
        let mut job_ios = 0.0;
        for (dir, agg) in DIRECTIONS.iter().zip(&mut directions) {
            if let Some(stats) = job.get(*dir) {
                job_ios += add_direction(agg, stats, &format!("{path}.{dir}"))?;
            }
        }
        for (field, unit) in BUCKETS {
            let Some(histogram) = job.get(field).and_then(Value::as_object) else {
                continue;
            };
            for (bound, pct) in histogram {
                let at = format!("{path}.{field}.{bound}");
                let pct = number(pct, &at)?;
                buckets
                    .entry(format!("fio.latency_{bound}{unit}%"))
                    .or_default()
                    .add(pct, job_ios);
            }
        }
    }

    let mut metrics = Metrics::new();
    for (dir, agg) in DIRECTIONS.iter().zip(&directions) {
        if agg.ios == 0.0 && agg.iops == 0.0 {
            continue;
        }
        metrics.insert(format!("fio.{dir}_iops"), agg.iops);
        metrics.insert(format!("fio.{dir}_bw_MBps"), agg.bw_kib / 1024.0);
        if let Some(mean) = agg.clat_mean.get() {
            metrics.insert(format!("fio.{dir}_clat_mean_ns"), mean);
            if let Some(second) = agg.clat_second_moment.get() {
                let stddev = (second - mean * mean).max(0.0).sqrt();
                metrics.insert(format!("fio.{dir}_clat_stddev"), stddev);
            }
        }
        for ((_, label), mean) in PERCENTILES.iter().zip(agg.clat_percentiles) {
            if let Some(v) = mean.get() {
                metrics.insert(format!("fio.{dir}_clat_{label}_ns"), v);
            }
        }
        if let Some(v) = agg.lat_mean.get() {
            metrics.insert(format!("fio.{dir}_lat_mean_ns"), v);
        }
        if let Some(v) = agg.slat_mean.get() {
            metrics.insert(format!("fio.{dir}_slat_mean_ns"), v);
        }
    }
    if metrics.is_empty() {
        return Ok(metrics);
    }
    let workload = directions[0].ios + directions[1].ios;
    metrics.insert("fio.workload".into(), workload);
    for (name, mean) in buckets {
        if let Some(v) = mean.get() {
            metrics.insert(name, v);
        }
    }
    Ok(metrics)
}

fn check_error(job: &Value, path: &str) -> Result<(), ParseError> {
    match job.get("error").and_then(Value::as_i64) {
        Some(code) if code != 0 => Err(ParseError::FioJobFailed {
            at: Location::Field(format!("{path}.error")),
            job: job
                .get("jobname")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned(),
            code,
        }),
        _ => Ok(()),
    }
}

/// Folds one job's direction into `agg`; returns the job's I/O count in that direction.
fn add_direction(agg: &mut Direction, stats: &Value, path: &str) -> Result<f64, ParseError> {
    let iops = required(stats, "iops", path)?;
    let bw_kib = required(stats, "bw", path)?;
    let ios = optional(stats, "total_ios", path)?.unwrap_or(iops);
    if ios == 0.0 && iops == 0.0 {
        return Ok(0.0);
    }
    agg.ios += ios;
    agg.iops += iops;
    agg.bw_kib += bw_kib;
    // Weight latencies by I/O count; fall back to iops when fio gave no count.
    let weight = if ios > 0.0 { ios } else { iops };

    if let Some((clat, scale, clat_path)) = latency(stats, "clat", path) {
        let mean = required(clat, "mean", &clat_path)? * scale;
        let stddev = required(clat, "stddev", &clat_path)? * scale;
        agg.clat_mean.add(mean, weight);
        agg.clat_second_moment
            .add(stddev * stddev + mean * mean, weight);
        if let Some(percentiles) = clat.get("percentile").and_then(Value::as_object) {
            for (key, value) in percentiles {
                let Ok(p) = key.parse::<f64>() else { continue };
                let Some(slot) = PERCENTILES.iter().position(|(q, _)| (q - p).abs() < 1e-9) else {
                    continue;
                };
                let v = number(value, &format!("{clat_path}.percentile.{key}"))?;
                agg.clat_percentiles[slot].add(v * scale, weight);
            }
        }
    }
    if let Some((lat, scale, lat_path)) = latency(stats, "lat", path) {
        agg.lat_mean
            .add(required(lat, "mean", &lat_path)? * scale, weight);
    }
    if let Some((slat, scale, slat_path)) = latency(stats, "slat", path) {
        // fio reports N = 0 and zeros when it did not measure submission latency.
        if optional(slat, "N", &slat_path)?.is_none_or(|n| n > 0.0) {
            agg.slat_mean
                .add(required(slat, "mean", &slat_path)? * scale, weight);
        }
    }
    Ok(ios)
}

/// fio 3+'s `<kind>_ns` (scale 1), or older fio's `<kind>` in µs (scale 1000).
fn latency<'a>(stats: &'a Value, kind: &str, path: &str) -> Option<(&'a Value, f64, String)> {
    let ns = format!("{kind}_ns");
    if let Some(v) = stats.get(&ns) {
        return Some((v, 1.0, format!("{path}.{ns}")));
    }
    stats
        .get(kind)
        .map(|v| (v, 1000.0, format!("{path}.{kind}")))
}

fn required(obj: &Value, key: &str, path: &str) -> Result<f64, ParseError> {
    optional(obj, key, path)?.ok_or_else(|| ParseError::MissingField {
        at: Location::Field(format!("{path}.{key}")),
        expected: "a number",
    })
}

fn optional(obj: &Value, key: &str, path: &str) -> Result<Option<f64>, ParseError> {
    obj.get(key)
        .map(|v| number(v, &format!("{path}.{key}")))
        .transpose()
}

fn number(value: &Value, path: &str) -> Result<f64, ParseError> {
    match value.as_f64() {
        Some(v) if v.is_finite() => Ok(v),
        Some(v) => Err(ParseError::NonFinite {
            at: Location::Field(path.to_owned()),
            value: v.to_string(),
        }),
        None => Err(ParseError::NotANumber {
            at: Location::Field(path.to_owned()),
            value: value.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, iops: f64, ios: f64, clat_mean: f64, p99: f64) -> String {
        format!(
            r#"{{"jobname": "{name}", "error": 0,
                "write": {{"iops": {iops}, "bw": {bw}, "total_ios": {ios},
                  "clat_ns": {{"mean": {clat_mean}, "stddev": 0,
                    "percentile": {{"90.000000": {p99}, "99.000000": {p99}}}}},
                  "lat_ns": {{"mean": {clat_mean}, "stddev": 0}},
                  "slat_ns": {{"mean": 0, "stddev": 0, "N": 0}}}},
                "latency_us": {{"2": 50.0, "4": 50.0}}}}"#,
            bw = iops * 4.0
        )
    }

    #[test]
    fn jobs_are_summed_and_latencies_weighted_by_ios() {
        let text = format!(
            r#"{{"fio version": "fio-3.33", "jobs": [{}, {}]}}"#,
            job("a", 100.0, 300.0, 1000.0, 2000.0),
            job("b", 300.0, 100.0, 2000.0, 4000.0)
        );
        let m = parse(&text).unwrap();
        assert_eq!(m["fio.write_iops"], 400.0);
        assert_eq!(m["fio.write_bw_MBps"], 1600.0 / 1024.0);
        assert_eq!(m["fio.write_clat_mean_ns"], 1250.0);
        assert_eq!(m["fio.write_clat_99%_ns"], 2500.0);
        assert_eq!(m["fio.write_lat_mean_ns"], 1250.0);
        // Pooled: two point masses at 1000 (weight 3) and 2000 (weight 1).
        assert!(
            (m["fio.write_clat_stddev"] - 433.0127).abs() < 1e-3,
            "{m:?}"
        );
        assert_eq!(m["fio.workload"], 400.0);
        assert_eq!(m["fio.latency_2us%"], 50.0);
        assert!(
            !m.contains_key("fio.write_slat_mean_ns"),
            "slat N = 0 is not measured"
        );
        assert!(!m.contains_key("fio.write_clat_95%_ns"));
        assert!(!m.keys().any(|k| k.starts_with("fio.read_")), "{m:?}");
    }

    #[test]
    fn old_fio_microseconds_are_converted() {
        let text = r#"{"jobs": [{"jobname": "x", "error": 0,
            "read": {"iops": 10, "bw": 40, "clat": {"mean": 1.5, "stddev": 0.5,
                      "percentile": {"90.00": 2}}}}]}"#;
        let m = parse(text).unwrap();
        assert_eq!(m["fio.read_clat_mean_ns"], 1500.0);
        assert_eq!(m["fio.read_clat_stddev"], 500.0);
        assert_eq!(m["fio.read_clat_90%_ns"], 2000.0);
        assert_eq!(
            m["fio.workload"], 10.0,
            "iops stands in for the missing total_ios"
        );
    }

    #[test]
    fn failed_job_is_an_error() {
        let text = r#"{"jobs": [{"jobname": "w", "error": 5, "write": {"iops": 1, "bw": 1}}]}"#;
        let err = parse(text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `jobs[0].error`: fio job `w` failed with error 5"
        );
    }

    #[test]
    fn structural_errors_name_the_field() {
        let err = parse(r#"{"fio version": "x"}"#).unwrap_err();
        assert_eq!(err.to_string(), "field `jobs`: missing or not an array");
        let err = parse(r#"{"jobs": [{"write": {"iops": 1}}]}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `jobs[0].write.bw`: missing or not a number"
        );
        let err = parse(r#"{"jobs": [{"write": {"iops": "many", "bw": 1}}]}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `jobs[0].write.iops`: `\"many\"` is not a number"
        );
        assert!(matches!(parse("fio: no jobs"), Err(ParseError::NoFioJson)));
        assert!(matches!(
            parse("{\"jobs\": ["),
            Err(ParseError::Json { .. })
        ));
    }

    #[test]
    fn idle_jobs_give_no_metrics() {
        let text = r#"{"jobs": [{"write": {"iops": 0, "bw": 0, "total_ios": 0}}]}"#;
        assert!(parse(text).unwrap().is_empty());
        assert!(parse(r#"{"jobs": []}"#).unwrap().is_empty());
    }
}
