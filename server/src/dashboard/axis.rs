//! The frame the dashboard's SVG plots share: the plot area inside its margins, a y axis of
//! round ticks over the values with its grid and label, the two axis lines, and the slanted
//! short shas under the x axis. The bisect page's samples plot (`plot.rs`) and a watch's
//! series (`series_plot.rs`) differ in what they draw inside, not in this.

use super::format::number;
use std::fmt::Write;

/// The picture's size (`viewBox`) and the margins around the plot area.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub w: f64,
    pub h: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    pub fn plot_w(&self) -> f64 {
        self.w - self.left - self.right
    }

    pub fn plot_h(&self) -> f64 {
        self.h - self.top - self.bottom
    }

    /// The y of the x axis.
    pub fn baseline(&self) -> f64 {
        self.top + self.plot_h()
    }
}

/// The smallest and largest finite value; None when there is none.
pub fn value_range(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
        })
}

/// Tick positions at steps of 1, 2, 2.5 or 5 × 10^k, about `target` of them, covering
/// `[lo, hi]`.
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
        (lo - pad, hi + pad)
    };
    let raw = (hi - lo) / target as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A y axis over `[lo, hi]`: about five round ticks, and the map from a value to its y.
#[derive(Debug, Clone)]
pub struct YAxis {
    pub ticks: Vec<f64>,
    top: f64,
    plot_h: f64,
}

impl YAxis {
    pub fn new(frame: &Frame, lo: f64, hi: f64) -> YAxis {
        YAxis {
            ticks: ticks(lo, hi, 5),
            top: frame.top,
            plot_h: frame.plot_h(),
        }
    }

    /// The y of value `v`: the first tick at the bottom, the last at the top.
    pub fn y(&self, v: f64) -> f64 {
        let (lo, hi) = (self.ticks[0], self.ticks[self.ticks.len() - 1]);
        self.top + (hi - v) / (hi - lo) * self.plot_h
    }

    /// A grid line across the plot and a label left of it, per tick.
    pub fn grid(&self, s: &mut String, frame: &Frame) {
        for t in &self.ticks {
            let ty = self.y(*t);
            let _ = writeln!(
                s,
                "<line x1=\"{}\" y1=\"{ty:.1}\" x2=\"{:.1}\" y2=\"{ty:.1}\" class=\"grid\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
                frame.left,
                frame.left + frame.plot_w(),
                frame.left - 6.0,
                ty + 4.0,
                number(*t)
            );
        }
    }
}

/// The axis name, written upwards along the left edge (`label` already escaped).
pub fn y_label(s: &mut String, frame: &Frame, label: &str) {
    let m = frame.top + frame.plot_h() / 2.0;
    let _ = writeln!(
        s,
        "<text x=\"14\" y=\"{m:.1}\" transform=\"rotate(-90 14 {m:.1})\" text-anchor=\"middle\" \
         class=\"axis-label\">{label}</text>"
    );
}

/// The y axis and the x axis lines.
pub fn axes(s: &mut String, frame: &Frame) {
    let _ = writeln!(
        s,
        "<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{b:.1}\" class=\"axis\"/>\
         <line x1=\"{l}\" y1=\"{b:.1}\" x2=\"{:.1}\" y2=\"{b:.1}\" class=\"axis\"/>",
        frame.left + frame.plot_w(),
        l = frame.left,
        t = frame.top,
        b = frame.baseline()
    );
}

/// A commit's short sha under the x axis at `x`, slanted so neighbours do not collide.
pub fn x_label(s: &mut String, frame: &Frame, x: f64, sha: &str) {
    let ly = frame.baseline() + 10.0;
    let _ = writeln!(
        s,
        "<text class=\"xtick\" x=\"{x:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
         transform=\"rotate(-60 {x:.1} {ly:.1})\">{}</text>",
        &sha[..sha.len().min(7)]
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_values_with_round_steps() {
        assert_eq!(ticks(0.0, 9.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(997.0, 1063.0, 5);
        assert!(t[0] <= 997.0 && *t.last().unwrap() >= 1063.0, "{t:?}");
        let one = ticks(5.0, 5.0, 5);
        assert!(one[0] < 5.0 && *one.last().unwrap() > 5.0, "{one:?}");
    }

    #[test]
    fn value_range_skips_what_is_not_finite() {
        assert_eq!(
            value_range([3.0, f64::NAN, -1.0, f64::INFINITY]),
            Some((-1.0, 3.0))
        );
        assert_eq!(value_range([f64::NAN]), None);
    }

    #[test]
    fn the_axis_maps_the_ticks_to_the_plot_area() {
        let f = Frame {
            w: 100.0,
            h: 100.0,
            left: 10.0,
            right: 10.0,
            top: 10.0,
            bottom: 30.0,
        };
        let a = YAxis::new(&f, 0.0, 9.0);
        assert_eq!(a.y(10.0), 10.0);
        assert_eq!(a.y(0.0), 70.0);
        let mut s = String::new();
        a.grid(&mut s, &f);
        assert_eq!(s.matches("class=\"grid\"").count(), a.ticks.len());
    }
}
