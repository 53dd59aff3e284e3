//! Helpers shared by the integration tests: reading the seed reports (copied verbatim
//! into `tests/fixtures/`) and building runs whose statistics print as a seed row does.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of these helpers"
)]

use std::collections::BTreeMap;

use perfbisect_report::format::{format_avg, format_change};
use perfbisect_report::stats::{change, is_absolute_change};
use perfbisect_report::{Commit, Job, Run, Runs};

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One row of a seed table, as printed.
#[derive(Debug, Clone)]
pub struct SeedRow {
    pub base_avg: String,
    /// The printed `± N%`, if any.
    pub base_std: Option<u32>,
    pub change: String,
    pub new_avg: String,
    pub new_std: Option<u32>,
    pub stat: String,
}

/// Parse `avg [± N%] change avg [± N%] stat` from whitespace-separated tokens (the ±
/// sign may be glued to the number, as in `±134%`). Returns the row and the tokens used.
pub fn parse_row_tokens(tokens: &[&str]) -> Option<(SeedRow, usize)> {
    let mut i = 0;
    let take_std = |i: &mut usize| -> Option<u32> {
        let t = *tokens.get(*i)?;
        let rest = t.strip_prefix('±')?;
        let num = if rest.is_empty() {
            *i += 1;
            tokens.get(*i)?.strip_suffix('%')?
        } else {
            rest.strip_suffix('%')?
        };
        *i += 1;
        num.parse().ok()
    };
    let base_avg = (*tokens.get(i)?).to_owned();
    i += 1;
    let base_std = take_std(&mut i);
    let change = (*tokens.get(i)?).to_owned();
    i += 1;
    let new_avg = (*tokens.get(i)?).to_owned();
    i += 1;
    let new_std = take_std(&mut i);
    let stat = (*tokens.get(i)?).to_owned();
    i += 1;
    Some((
        SeedRow {
            base_avg,
            base_std,
            change,
            new_avg,
            new_std,
            stat,
        },
        i,
    ))
}

pub fn parse_row(line: &str) -> SeedRow {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let (row, used) = parse_row_tokens(&tokens).unwrap_or_else(|| panic!("not a row: {line:?}"));
    assert_eq!(used, tokens.len(), "trailing tokens in {line:?}");
    row
}

/// The interval of true values that print as `token` (AVG format): its centre and
/// half-width.
fn interval(token: &str) -> (f64, f64) {
    let v: f64 = token.parse().unwrap_or_else(|_| panic!("number {token:?}"));
    if let Some((_, exp)) = token.split_once('e') {
        let exp: i32 = exp.parse().unwrap();
        (v, 0.5 * 10f64.powi(exp - 3))
    } else if token.contains('.') {
        (v, 0.005)
    } else {
        (v + 0.5, 0.5)
    }
}

/// Means inside the rounding intervals of both printed averages whose change prints as
/// the seed's; the ones nearest the centres first.
pub fn means_for(row: &SeedRow) -> (f64, f64) {
    let (bc, bh) = interval(&row.base_avg);
    let (nc, nh) = interval(&row.new_avg);
    let mut offsets: Vec<f64> = (0..=40).map(|i| (i as f64 / 40.0 - 0.5) * 1.8).collect();
    offsets.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    for ob in &offsets {
        for on in &offsets {
            let (b, n) = (bc + ob * bh, nc + on * nh);
            let ch = format_change(change(&row.stat, b, n), is_absolute_change(&row.stat));
            if format_avg(b).trim() == row.base_avg
                && format_avg(n).trim() == row.new_avg
                && ch.trim() == row.change
            {
                return (b, n);
            }
        }
    }
    panic!("no means print as {row:?}");
}

/// How a sample set reaches its spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Half the samples at mean − s, half at mean + s (n even).
    Symmetric,
    /// n−1 equal samples and one outlier above them.
    OutlierHigh,
    /// n−1 equal samples and one outlier below them.
    OutlierLow,
}

/// `n` samples with the given mean and sample stddev (n − 1) `pct`% of the mean.
pub fn samples(mean: f64, pct: f64, n: usize, shape: Shape) -> Vec<f64> {
    // The shapes below have population stddev `s`; the sample stddev is √(n/(n−1))·s.
    let s = mean.abs() * pct / 100.0 * ((n as f64 - 1.0) / n as f64).sqrt();
    match shape {
        Shape::Symmetric => {
            assert!(n.is_multiple_of(2));
            (0..n)
                .map(|i| if i % 2 == 0 { mean - s } else { mean + s })
                .collect()
        }
        Shape::OutlierHigh | Shape::OutlierLow => {
            let d = s * n as f64 / ((n - 1) as f64).sqrt();
            let sign = if shape == Shape::OutlierHigh {
                1.0
            } else {
                -1.0
            };
            let bulk = mean - sign * d / n as f64;
            let mut v = vec![bulk; n - 1];
            v.push(bulk + sign * d);
            v
        }
    }
}

/// The relative stddev to generate for a printed `± N%` (printed only above 2%);
/// blank: 1%.
pub fn pct_for(printed: Option<u32>) -> f64 {
    match printed {
        Some(n) => n as f64 + 0.5,
        None => 1.0,
    }
}

/// Sample sets (parent, culprit) that print as `row`: the parent symmetric, the culprit
/// symmetric when tight, else with its outlier away from the parent so that LKP's
/// separation rule still holds.
pub fn sample_sets(row: &SeedRow, n: usize) -> (Vec<f64>, Vec<f64>) {
    let (b, m) = means_for(row);
    let new_pct = pct_for(row.new_std);
    let shape = if new_pct <= 2.0 {
        Shape::Symmetric
    } else if m > b {
        Shape::OutlierHigh
    } else {
        Shape::OutlierLow
    };
    (
        samples(b, pct_for(row.base_std), n, Shape::Symmetric),
        samples(m, new_pct, n, shape),
    )
}

/// Runs (parent, culprit) carrying every row's samples, plus `extra` stats given as
/// (name, parent samples, culprit samples).
pub fn runs_for(rows: &[SeedRow], n: usize, extra: &[(&str, Vec<f64>, Vec<f64>)]) -> Runs {
    let mut parent = vec![BTreeMap::new(); n];
    let mut culprit = vec![BTreeMap::new(); n];
    let mut put = |stat: &str, b: &[f64], c: &[f64]| {
        for i in 0..n {
            parent[i].insert(stat.to_owned(), b[i]);
            culprit[i].insert(stat.to_owned(), c[i]);
        }
    };
    for r in rows {
        let (b, c) = sample_sets(r, n);
        put(&r.stat, &b, &c);
    }
    for (stat, b, c) in extra {
        put(stat, b, c);
    }
    let to_runs = |v: Vec<BTreeMap<String, f64>>| {
        v.into_iter()
            .map(|metrics| Run {
                completed: true,
                metrics,
            })
            .collect()
    };
    Runs {
        parent: to_runs(parent),
        culprit: to_runs(culprit),
        failures: Vec::new(),
    }
}

/// The table block of a seed report: from the `=` rule to the last row.
pub fn table_block(report: &str) -> Vec<&str> {
    let lines: Vec<&str> = report.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("=========="))
        .expect("a table rule");
    let header_end = lines[start..]
        .iter()
        .position(|l| l.trim() == "\\          |                \\")
        .expect("the \\ | \\ line")
        + start;
    let end = lines[header_end + 1..]
        .iter()
        .position(|l| l.is_empty())
        .map_or(lines.len(), |p| p + header_end + 1);
    lines[start..end].to_vec()
}

/// The rows of a table block (after the `\ | \` line).
pub fn block_rows(block: &[&str]) -> Vec<SeedRow> {
    let at = block
        .iter()
        .position(|l| l.trim() == "\\          |                \\")
        .unwrap();
    block[at + 1..].iter().map(|l| parse_row(l)).collect()
}

pub fn commit(sha: &str, subject: &str) -> Commit {
    Commit {
        sha: sha.to_owned(),
        subject: subject.to_owned(),
        author: None,
    }
}

/// A 40-digit id from the digits a seed shows, padded with zeros.
pub fn sha40(known: &str) -> String {
    format!("{known:0<40}")
}

pub fn params(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub fn fio_job() -> Job {
    Job {
        testcase: "fio-basic".into(),
        kconfig: Some("x86_64-rhel-9.4".into()),
        compiler: Some("gcc-14".into()),
        rootfs: Some("debian-13-x86_64-20250902.cgz".into()),
        tbox_group: Some("lkp-icl-2sp9".into()),
        parameters: params(&[
            ("runtime", "300s"),
            ("disk", "1HDD"),
            ("fs", "ext4"),
            ("nr_task", "1"),
            ("test_size", "128G"),
            ("rw", "write"),
            ("bs", "4k"),
            ("ioengine", "falloc"),
            ("cpufreq_governor", "performance"),
        ]),
    }
}

pub fn fxmark_job() -> Job {
    Job {
        testcase: "fxmark".into(),
        kconfig: Some("x86_64-rhel-9.4".into()),
        compiler: Some("gcc-14".into()),
        rootfs: Some("debian-13-x86_64-20250902.cgz".into()),
        tbox_group: Some("lkp-icl-2sp8".into()),
        parameters: params(&[
            ("nr_threads", "2c"),
            ("disk", "1SSD"),
            ("media", "ssd"),
            ("test", "dbench_client"),
            ("fstype", "ext4"),
            ("directio", "directio"),
            ("cpufreq_governor", "performance"),
        ]),
    }
}

pub const FIO_PARENT: &str = "6585cea3cf58b8e8";
pub const FIO_PARENT_SUBJECT: &str =
    "ext4: allow ext4_map_blocks() to start its own transaction handle";
pub const FIO_CULPRIT: &str = "7f373083b45757b19f36a939f255239d40ccfb24";
pub const FIO_CULPRIT_SUBJECT: &str =
    "ext4: avoid unnecessary transaction in ext4_map_blocks() for unwritten extents";
pub const FXMARK_PARENT: &str = "4a87cfb9b45ae07c";
pub const FXMARK_PARENT_SUBJECT: &str =
    "ext4: convert group-count barrier protocol to acquire/release";
pub const FXMARK_CULPRIT: &str = "b5501f970dbc039df1f7c720b7a481b62de125cd";
pub const FXMARK_CULPRIT_SUBJECT: &str = "jbd2: avoid false sharing with j_state_lock";
