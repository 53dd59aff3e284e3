//! The two SVG pictures of the bisect page: every sample per measured commit, and the
//! candidate range as the engine narrows it.
//!
//! `perfbisect_report::svg_plot` draws the report's plot, but it knows only commits judged
//! good or bad; while a bisect runs, most measured commits are still undecided, and the
//! dashboard must show their samples too. So the dashboard draws its own, with the report's
//! colours, and sized by `viewBox` so that it fits a phone as well as a laptop.

use super::axis::{self, Frame, YAxis, value_range};
use super::format::{number, short_sha};
use perfbisect_report::html::escape;
use perfbisect_report::plot::{BAD_COLOUR, GOOD_COLOUR};
use std::fmt::Write;

const UNDECIDED_COLOUR: &str = "#c27c00";
const SKIPPED_COLOUR: &str = "#9a9a9a";

/// The engine's verdict on a commit, as the API spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Good,
    Bad,
    Undecided,
    Skipped,
}

impl Verdict {
    pub fn parse(s: &str) -> Verdict {
        match s {
            "good" => Verdict::Good,
            "bad" => Verdict::Bad,
            "skipped" => Verdict::Skipped,
            _ => Verdict::Undecided,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
            Verdict::Undecided => "undecided",
            Verdict::Skipped => "skipped",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Verdict::Good => GOOD_COLOUR,
            Verdict::Bad => BAD_COLOUR,
            Verdict::Undecided => UNDECIDED_COLOUR,
            Verdict::Skipped => SKIPPED_COLOUR,
        }
    }
}

/// One measured commit of the samples plot.
pub struct Column<'a> {
    pub sha: &'a str,
    pub subject: &'a str,
    pub verdict: Verdict,
    pub values: &'a [f64],
    /// Place in the range's history: the good endpoint -1, candidates 0.. (parents first).
    /// The x axis spaces commits by it, so distance on the plot is distance in history.
    pub pos: i64,
}

/// The unit of a metric, where its name tells it (`fio.write_iops` → `IO/s`); shown on the
/// y axis. Unknown names get none rather than a guess.
pub fn unit_of(metric: &str) -> Option<&'static str> {
    let key = metric
        .rsplit('.')
        .next()
        .unwrap_or(metric)
        .to_ascii_lowercase();
    let m = metric.to_ascii_lowercase();
    let unit = if key.ends_with("iops") {
        "IO/s"
    } else if key.ends_with("_bps") || key.ends_with("bw") || key.contains("bytes_per_sec") {
        "bytes/s"
    } else if key.contains("per-min") || key.contains("per_min") {
        "jobs/min"
    } else if key.contains("/sec") || key.ends_with("_per_sec") || key.ends_with("ops_per_s") {
        "per second"
    } else if key.ends_with("_ns") || key.contains("latency_ns") {
        "ns"
    } else if key.ends_with("_us") {
        "µs"
    } else if key.ends_with("_ms") {
        "ms"
    } else if key.ends_with("_secs")
        || key.ends_with("_seconds")
        || key.ends_with("elapsed_time")
        || key.ends_with("_time")
    {
        "s"
    } else if key.contains("instructions") || key == "ir" || m.starts_with("callgrind.") {
        "instructions"
    } else if key.contains("cycles") {
        "cycles"
    } else if key.ends_with("_kb") || key.contains("maximum_resident_set_size") {
        "KiB"
    } else {
        return None;
    };
    Some(unit)
}

const W: f64 = 800.0;
const H: f64 = 360.0;
const FRAME: Frame = Frame {
    w: W,
    h: H,
    left: 72.0,
    right: 16.0,
    top: 28.0,
    bottom: 84.0,
};

/// Every sample of every measured commit (x = commit in candidate order, y = the metric),
/// coloured by verdict, each commit's mean as a bar, the culprit marked. `None` when
/// nothing has been measured yet.
pub fn samples_svg(metric: &str, columns: &[Column], culprit: Option<&str>) -> Option<String> {
    let (lo, hi) = value_range(columns.iter().flat_map(|c| c.values.iter().copied()))?;
    let axis = YAxis::new(&FRAME, lo, hi);
    let (plot_w, plot_h, left, top) = (FRAME.plot_w(), FRAME.plot_h(), FRAME.left, FRAME.top);
    let y = |v: f64| axis.y(v);
    // x by place in history: half a step of padding at both ends.
    let first = columns.iter().map(|c| c.pos).min().unwrap_or(0);
    let last = columns.iter().map(|c| c.pos).max().unwrap_or(0);
    let span = (last - first + 1).max(1) as f64;
    let slot = plot_w / span;
    let x = |i: usize| left + slot * ((columns[i].pos - first) as f64 + 0.5);
    // The narrowest gap between neighbours decides how wide a column's samples may spread.
    let mut gaps: Vec<i64> = columns
        .windows(2)
        .map(|w| (w[1].pos - w[0].pos).abs())
        .collect();
    gaps.retain(|g| *g > 0);
    let min_gap = gaps.into_iter().min().unwrap_or(span as i64).max(1) as f64;
    let unit = unit_of(metric);
    let y_label = match unit {
        Some(u) => format!("{} ({u})", escape(metric)),
        None => escape(metric),
    };
    let metric = escape(metric);

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" \
         role=\"img\" aria-labelledby=\"plot-title\"><title id=\"plot-title\">{metric}: \
         every sample of the {} measured commits</title>",
        columns.len()
    );
    axis.grid(&mut s, &FRAME);
    axis::y_label(&mut s, &FRAME, &y_label);
    let is_culprit = |sha: &str| culprit == Some(sha);
    if let Some(i) = columns.iter().position(|c| is_culprit(c.sha)) {
        let _ = writeln!(
            s,
            "<line class=\"culprit\" x1=\"{cx:.1}\" y1=\"{top}\" x2=\"{cx:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"culprit-label\">culprit</text>",
            top + plot_h,
            top - 8.0,
            cx = x(i)
        );
    }
    // Labels only where they do not overlap the previous one (the culprit's always).
    let mut last_label = f64::NEG_INFINITY;
    for (i, c) in columns.iter().enumerate() {
        let vals: Vec<f64> = c.values.iter().copied().filter(|v| v.is_finite()).collect();
        let mean = (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64);
        let _ = write!(
            s,
            "<g class=\"commit {}\" fill=\"{}\"><title>{} {}: {} ({} samples, mean {})</title>",
            c.verdict.label(),
            c.verdict.colour(),
            short_sha(c.sha),
            escape(c.subject),
            c.verdict.label(),
            vals.len(),
            mean.map(number).unwrap_or_else(|| "-".into())
        );
        let spread = (slot * min_gap * 0.6).min(3.0 * vals.len() as f64);
        for (j, v) in vals.iter().enumerate() {
            let dx = if vals.len() > 1 {
                (j as f64 / (vals.len() - 1) as f64 - 0.5) * spread
            } else {
                0.0
            };
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.6\"/>",
                x(i) + dx,
                y(*v)
            );
        }
        if let Some(m) = mean {
            let half = (slot * min_gap * 0.4).min(9.0);
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"2\"/>",
                x(i) - half,
                y(m) - 1.0,
                2.0 * half
            );
        }
        s += "</g>\n";
        if x(i) - last_label >= 14.0 || is_culprit(c.sha) {
            last_label = x(i);
            axis::x_label(&mut s, &FRAME, x(i), c.sha);
        }
    }
    axis::axes(&mut s, &FRAME);
    let mut lx = left;
    for v in [Verdict::Good, Verdict::Bad, Verdict::Undecided] {
        if columns
            .iter()
            .any(|c| c.verdict == v && !c.values.is_empty())
        {
            let _ = writeln!(
                s,
                "<circle cx=\"{lx:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" class=\"legend\">{} commit</text>",
                H - 10.0,
                v.colour(),
                lx + 9.0,
                H - 6.0,
                v.label()
            );
            // Room for the label at the larger text a phone gets (style.css).
            lx += 190.0;
        }
    }
    s += "</svg>\n";
    Some(s)
}

/// One candidate (or a bucket of neighbouring candidates) of the range picture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub verdict: Verdict,
    /// The engine's probability that the culprit is here, where it gives one.
    pub p: Option<f64>,
    pub measured: bool,
    pub culprit: bool,
}

/// Most cells drawn; longer ranges (a Linux merge window) are shown in buckets.
const MAX_CELLS: usize = 400;

/// Merges neighbouring candidates into at most `MAX_CELLS` buckets: a bucket is undecided
/// if any candidate in it is, or if it holds both good and bad ones (the change is inside).
fn bucket(cells: &[Cell]) -> Vec<Cell> {
    if cells.len() <= MAX_CELLS {
        return cells.to_vec();
    }
    let size = cells.len().div_ceil(MAX_CELLS);
    cells
        .chunks(size)
        .map(|chunk| {
            let has = |v| chunk.iter().any(|c| c.verdict == v);
            let verdict = if has(Verdict::Undecided) || (has(Verdict::Good) && has(Verdict::Bad)) {
                Verdict::Undecided
            } else if has(Verdict::Bad) {
                Verdict::Bad
            } else if has(Verdict::Good) {
                Verdict::Good
            } else {
                Verdict::Skipped
            };
            let ps: Vec<f64> = chunk.iter().filter_map(|c| c.p).collect();
            Cell {
                verdict,
                p: (!ps.is_empty()).then(|| ps.iter().sum()),
                measured: chunk.iter().any(|c| c.measured),
                culprit: chunk.iter().any(|c| c.culprit),
            }
        })
        .collect()
}

/// The candidate range, oldest to newest: a strip coloured by verdict (the undecided part is
/// the range still being searched), above it the culprit probability of each candidate,
/// below it a tick under every measured commit.
pub fn range_svg(cells: &[Cell], summary: &str) -> String {
    let cells = bucket(cells);
    let (w, h) = (W, 86.0);
    let (band_top, band_h, bars_h) = (50.0, 14.0, 44.0);
    let cw = w / cells.len().max(1) as f64;
    let max_p = cells
        .iter()
        .filter_map(|c| c.p)
        .fold(0.0f64, f64::max)
        .max(1e-12);
    let mut s = format!(
        "<svg class=\"range\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" \
         preserveAspectRatio=\"none\" role=\"img\" aria-label=\"{}\">\n",
        escape(summary)
    );
    for (i, c) in cells.iter().enumerate() {
        let cx = i as f64 * cw;
        if let Some(p) = c.p.filter(|p| *p > 0.0) {
            let bh = (p / max_p * bars_h).max(0.5);
            let _ = write!(
                s,
                "<rect class=\"p\" x=\"{cx:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{bh:.2}\"/>",
                band_top - 2.0 - bh,
                cw.max(0.5)
            );
        }
        let _ = write!(
            s,
            "<rect class=\"v-{}\" x=\"{cx:.2}\" y=\"{band_top}\" width=\"{:.2}\" height=\"{band_h}\" fill=\"{}\"/>",
            c.verdict.label(),
            cw + 0.05,
            c.verdict.colour()
        );
        if c.measured {
            let _ = write!(
                s,
                "<rect class=\"measured\" x=\"{:.2}\" y=\"{:.2}\" width=\"1.5\" height=\"6\"/>",
                cx + cw / 2.0 - 0.75,
                band_top + band_h + 2.0
            );
        }
        if c.culprit {
            let _ = write!(
                s,
                "<rect class=\"culprit-cell\" x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\"/>",
                cx - 1.0,
                band_top - 3.0,
                cw + 2.0,
                band_h + 6.0
            );
        }
        s.push('\n');
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_plot_colours_by_verdict_and_marks_the_culprit() {
        let cols = [
            Column {
                sha: "aaaaaaaaaaaa1",
                subject: "old <one>",
                verdict: Verdict::Good,
                values: &[100.0, 101.0],
                pos: -1,
            },
            Column {
                sha: "bbbbbbbbbbbb2",
                subject: "middle",
                verdict: Verdict::Undecided,
                values: &[103.0],
                pos: 3,
            },
            Column {
                sha: "cccccccccccc3",
                subject: "change",
                verdict: Verdict::Bad,
                values: &[106.0, 107.0, 105.0],
                pos: 40,
            },
        ];
        let svg = samples_svg("demo.score", &cols, Some("cccccccccccc3")).unwrap();
        assert_eq!(
            svg.matches("<circle cx=").count() - 3,
            6,
            "six samples, three legend dots"
        );
        assert!(svg.contains("class=\"commit undecided\""));
        assert!(svg.contains("class=\"culprit\""));
        assert!(svg.contains("old &lt;one&gt;"), "subjects are escaped");
        assert!(samples_svg("m", &[], None).is_none());
        assert!(
            svg.contains(">demo.score</text>"),
            "no unit where none is known"
        );
        // Spaced by history: the gap from -1 to 3 is a tenth of the gap from 3 to 40.
        let xs: Vec<f64> = svg
            .match_indices("class=\"xtick\" x=\"")
            .map(|(i, m)| {
                let rest = &svg[i + m.len()..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(xs.len(), 3, "{svg}");
        let ratio = (xs[1] - xs[0]) / (xs[2] - xs[1]);
        assert!((ratio - 4.0 / 37.0).abs() < 1e-3, "{xs:?}");
    }

    #[test]
    fn units_come_from_known_names_only() {
        assert_eq!(unit_of("fio.write_iops"), Some("IO/s"));
        assert_eq!(unit_of("aim7.jobs-per-min"), Some("jobs/min"));
        assert_eq!(unit_of("time.elapsed_time"), Some("s"));
        assert_eq!(unit_of("callgrind.Ir"), Some("instructions"));
        assert_eq!(unit_of("myapp.frobs"), None);
    }

    #[test]
    fn long_ranges_are_bucketed_and_keep_the_undecided_part() {
        let mut cells = vec![
            Cell {
                verdict: Verdict::Good,
                p: Some(0.0),
                measured: false,
                culprit: false,
            };
            1000
        ];
        cells[500].verdict = Verdict::Undecided;
        cells[500].p = Some(0.7);
        for c in &mut cells[501..] {
            c.verdict = Verdict::Bad;
        }
        let b = bucket(&cells);
        assert!(b.len() <= MAX_CELLS);
        let undecided: Vec<usize> = (0..b.len())
            .filter(|i| b[*i].verdict == Verdict::Undecided)
            .collect();
        assert_eq!(undecided.len(), 1, "{b:?}");
        assert!((b[undecided[0]].p.unwrap() - 0.7).abs() < 1e-9);
        let svg = range_svg(&cells, "1 of 1000 left");
        assert!(svg.contains("aria-label=\"1 of 1000 left\""));
    }
}
