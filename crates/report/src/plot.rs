//! Plots of the bisected metric's samples: an 80×20 text plot for the mail, and an SVG
//! for the dashboard and the HTML mail.
//!
//! Both take the samples of every commit the bisect judged good or bad, in the order
//! given (x = sample index in the text plot, x = commit in the SVG).

use serde::{Deserialize, Serialize};

use crate::html::escape;
use crate::input::{CommitSamples, Judgement};

/// Text plot width in characters, as LKP's gnuplot `dumb` terminal uses.
pub const TEXT_WIDTH: usize = 80;
/// Text plot height in lines (title, frame and canvas).
pub const TEXT_HEIGHT: usize = 20;
/// Mark of a sample from a commit judged good.
pub const GOOD_MARK: char = '*';
/// Mark of a sample from a commit judged bad.
pub const BAD_MARK: char = 'O';
/// Mark of a cell holding both good and bad samples.
pub const BOTH_MARK: char = '#';

/// Nice tick positions covering `[lo, hi]`: steps of 1, 2, 2.5 or 5 × 10^k, about
/// `target` intervals. Returns (axis_lo, axis_hi, step).
fn nice_axis(lo: f64, hi: f64, target: usize) -> (f64, f64, f64) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        // One value: a small range around it.
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
        (lo - pad, hi + pad)
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * (1.0 - 1e-12))
        .unwrap_or(10.0 * mag);
    let axis_lo = (lo / step).floor() * step;
    let mut axis_hi = (hi / step).ceil() * step;
    if axis_hi <= axis_lo {
        axis_hi = axis_lo + step;
    }
    (axis_lo, axis_hi, step)
}

fn ticks(axis_lo: f64, axis_hi: f64, step: f64) -> Vec<f64> {
    let n = ((axis_hi - axis_lo) / step).round() as usize;
    (0..=n).map(|i| axis_lo + i as f64 * step).collect()
}

/// A tick label with as many decimals as the step needs.
fn tick_label(v: f64, step: f64) -> String {
    if v.abs() >= 1e10 {
        return crate::format::format_g(v, 6);
    }
    let decimals = (0..=8)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0)
        })
        .unwrap_or(8) as usize;
    let s = format!("{v:.decimals$}");
    // Avoid "-0".
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_owned()
    } else {
        s
    }
}

fn finite_values(samples: &[CommitSamples]) -> impl Iterator<Item = (Judgement, f64)> + '_ {
    samples
        .iter()
        .flat_map(|c| c.values.iter().map(move |v| (c.judged, *v)))
        .filter(|(_, v)| v.is_finite())
}

/// An 80×20 text plot and the legend of the marks it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextPlot {
    /// Exactly [`TEXT_HEIGHT`] lines, none wider than [`TEXT_WIDTH`], no trailing spaces.
    pub lines: Vec<String>,
    /// One line per mark that appears in `lines`.
    pub legend: Vec<String>,
}

impl TextPlot {
    /// The plot, an empty line, and the legend.
    pub fn render(&self) -> String {
        let mut s = self.lines.join("\n");
        s += "\n\n";
        for l in &self.legend {
            s += l;
            s += "\n";
        }
        s
    }
}

/// Plot every sample (y = value, x = sample index): good samples as `*`, bad as `O`,
/// a cell with both as `#`. `None` when there is nothing to plot.
pub fn text_plot(metric: &str, samples: &[CommitSamples]) -> Option<TextPlot> {
    let points: Vec<(Judgement, f64)> = finite_values(samples).collect();
    if points.is_empty() {
        return None;
    }
    let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let (axis_lo, axis_hi, step) = nice_axis(lo, hi, 4);
    // Canvas rows between the top and bottom frame lines.
    let rows = TEXT_HEIGHT - 3;
    let row_of = |v: f64| -> usize {
        let f = (axis_hi - v) / (axis_hi - axis_lo) * (rows - 1) as f64;
        (f.round().max(0.0) as usize).min(rows - 1)
    };
    let labels: Vec<(usize, String)> = ticks(axis_lo, axis_hi, step)
        .into_iter()
        .map(|t| (row_of(t), tick_label(t, step)))
        .collect();
    let label_width = labels.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    let cols = TEXT_WIDTH - label_width - 3;

    let mut grid = vec![vec![' '; cols]; rows];
    let n = points.len();
    for (i, (judged, v)) in points.iter().enumerate() {
        let col = if n == 1 {
            cols / 2
        } else {
            ((i as f64) * (cols - 1) as f64 / (n - 1) as f64).round() as usize
        };
        let mark = match judged {
            Judgement::Good => GOOD_MARK,
            Judgement::Bad => BAD_MARK,
        };
        let cell = &mut grid[row_of(*v)][col];
        *cell = match *cell {
            ' ' => mark,
            c if c == mark => mark,
            _ => BOTH_MARK,
        };
    }

    let mut lines = Vec::with_capacity(TEXT_HEIGHT);
    let title: String = metric.chars().take(TEXT_WIDTH).collect();
    let pad = (TEXT_WIDTH - title.chars().count()) / 2;
    lines.push(format!("{}{}", " ".repeat(pad), title));
    let frame = format!("{} +{}+", " ".repeat(label_width), "-".repeat(cols));
    lines.push(frame.clone());
    for (r, row) in grid.iter().enumerate() {
        let label = labels.iter().find(|(lr, _)| *lr == r);
        let (text, edge) = match label {
            Some((_, l)) => (l.as_str(), '+'),
            None => ("", '|'),
        };
        let cells: String = row.iter().collect();
        lines.push(format!("{text:>label_width$} {edge}{cells}{edge}"));
    }
    lines.push(frame);

    let drawn = |m: char| grid.iter().flatten().any(|c| *c == m);
    let indent = " ".repeat(label_width + 2);
    let mut legend = Vec::new();
    if drawn(GOOD_MARK) {
        legend.push(format!("{indent}[{GOOD_MARK}] bisect-good sample"));
    }
    if drawn(BAD_MARK) {
        legend.push(format!("{indent}[{BAD_MARK}] bisect-bad  sample"));
    }
    if drawn(BOTH_MARK) {
        legend.push(format!(
            "{indent}[{BOTH_MARK}] bisect-good and bisect-bad samples"
        ));
    }
    Some(TextPlot { lines, legend })
}

/// SVG colours of good and bad samples.
pub const GOOD_COLOUR: &str = "#2b83ba";
pub const BAD_COLOUR: &str = "#d7191c";

const SVG_W: f64 = 720.0;
const SVG_H: f64 = 400.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 80.0;

/// An SVG of the samples per commit (x = commit in the given order, y = metric), good
/// and bad coloured, each commit's mean as a short bar, the culprit (matched by id
/// prefix) marked with a dashed line, and both axes labelled. `None` when there is
/// nothing to plot.
pub fn svg_plot(metric: &str, samples: &[CommitSamples], culprit: Option<&str>) -> Option<String> {
    let values: Vec<f64> = finite_values(samples).map(|p| p.1).collect();
    if values.is_empty() {
        return None;
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // A little air so that no sample sits on the x axis or the top edge.
    let pad = (hi - lo) * 0.05;
    let (axis_lo, axis_hi, step) = nice_axis(lo - pad, hi + pad, 5);
    let plot_w = SVG_W - LEFT - RIGHT;
    let plot_h = SVG_H - TOP - BOTTOM;
    let y = |v: f64| TOP + (axis_hi - v) / (axis_hi - axis_lo) * plot_h;
    let n = samples.len();
    let slot = plot_w / n as f64;
    let x = |i: usize| LEFT + slot * (i as f64 + 0.5);

    let mut s = String::new();
    s += &format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{SVG_W}\" height=\"{SVG_H}\" \
         viewBox=\"0 0 {SVG_W} {SVG_H}\" font-family=\"sans-serif\" font-size=\"11\" \
         role=\"img\" aria-label=\"{} samples per commit\">\n",
        escape(metric)
    );
    s += &format!("<title>{} samples per commit</title>\n", escape(metric));
    s += &format!("<rect width=\"{SVG_W}\" height=\"{SVG_H}\" fill=\"#ffffff\"/>\n");
    s += &format!(
        "<text x=\"{:.1}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        SVG_W / 2.0,
        escape(metric)
    );
    // Y grid and tick labels.
    for t in ticks(axis_lo, axis_hi, step) {
        let ty = y(t);
        s += &format!(
            "<line x1=\"{LEFT}\" y1=\"{ty:.1}\" x2=\"{:.1}\" y2=\"{ty:.1}\" stroke=\"#e5e5e5\"/>\n",
            LEFT + plot_w
        );
        s += &format!(
            "<text class=\"ytick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT - 6.0,
            ty + 4.0,
            escape(&tick_label(t, step))
        );
    }
    // Axes.
    s += &format!(
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{:.1}\" stroke=\"#333333\"/>\n",
        TOP + plot_h
    );
    s += &format!(
        "<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333333\"/>\n",
        TOP + plot_h,
        LEFT + plot_w,
        TOP + plot_h
    );
    // Culprit.
    let is_culprit = |sha: &str| {
        culprit.is_some_and(|c| !c.is_empty() && (sha.starts_with(c) || c.starts_with(sha)))
    };
    if let Some(i) = samples.iter().position(|c| is_culprit(&c.sha)) {
        let cx = x(i);
        s += &format!(
            "<line class=\"culprit\" x1=\"{cx:.1}\" y1=\"{TOP}\" x2=\"{cx:.1}\" y2=\"{:.1}\" \
             stroke=\"#555555\" stroke-dasharray=\"4 3\"/>\n",
            TOP + plot_h
        );
        s += &format!(
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555555\">culprit</text>\n",
            TOP - 4.0
        );
    }
    // Samples and means.
    let label_every = n.div_ceil(40).max(1);
    for (i, c) in samples.iter().enumerate() {
        let colour = match c.judged {
            Judgement::Good => GOOD_COLOUR,
            Judgement::Bad => BAD_COLOUR,
        };
        let vals: Vec<f64> = c.values.iter().copied().filter(|v| v.is_finite()).collect();
        let k = vals.len();
        let spread = (slot * 0.6).min(4.0 * k as f64);
        for (j, v) in vals.iter().enumerate() {
            let dx = if k > 1 {
                (j as f64 / (k - 1) as f64 - 0.5) * spread
            } else {
                0.0
            };
            s += &format!(
                "<circle class=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\" fill-opacity=\"0.8\"/>\n",
                match c.judged {
                    Judgement::Good => "good",
                    Judgement::Bad => "bad",
                },
                x(i) + dx,
                y(*v)
            );
        }
        if k > 0 {
            let mean = vals.iter().sum::<f64>() / k as f64;
            let half = (slot * 0.4).min(8.0);
            s += &format!(
                "<line x1=\"{:.1}\" y1=\"{my:.1}\" x2=\"{:.1}\" y2=\"{my:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n",
                x(i) - half,
                x(i) + half,
                my = y(mean)
            );
        }
        if i % label_every == 0 || is_culprit(&c.sha) {
            let short: String = c.sha.chars().take(7).collect();
            let (lx, ly) = (x(i), TOP + plot_h + 10.0);
            s += &format!(
                "<text class=\"xtick\" x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
                 font-family=\"monospace\" font-size=\"10\" transform=\"rotate(-60 {lx:.1} {ly:.1})\">{}</text>\n",
                escape(&short)
            );
        }
    }
    // Legend: only what was drawn.
    let mut lx = LEFT + plot_w - 250.0;
    for (judged, colour, label) in [
        (Judgement::Good, GOOD_COLOUR, "bisect-good sample"),
        (Judgement::Bad, BAD_COLOUR, "bisect-bad sample"),
    ] {
        if samples
            .iter()
            .any(|c| c.judged == judged && c.values.iter().any(|v| v.is_finite()))
        {
            s += &format!(
                "<circle cx=\"{lx:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\">{label}</text>\n",
                SVG_H - 12.0,
                lx + 8.0,
                SVG_H - 8.0
            );
            lx += 135.0;
        }
    }
    s += "</svg>\n";
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis_covers_the_data_with_round_steps() {
        let (lo, hi, step) = nice_axis(0.0, 161_969.0, 4);
        assert_eq!((lo, hi, step), (0.0, 200_000.0, 50_000.0));
        let (lo, hi, step) = nice_axis(2.69, 3.07, 4);
        assert!(lo <= 2.69 && hi >= 3.07);
        assert_eq!(step, 0.1);
        let (lo, hi, _) = nice_axis(5.0, 5.0, 4);
        assert!(lo < 5.0 && hi > 5.0);
    }

    #[test]
    fn tick_labels_use_the_decimals_of_the_step() {
        assert_eq!(tick_label(150_000.0, 50_000.0), "150000");
        assert_eq!(tick_label(2.8000000000000003, 0.1), "2.8");
        assert_eq!(tick_label(0.25, 0.25), "0.25");
        assert_eq!(tick_label(-0.0, 1.0), "0");
    }
}
