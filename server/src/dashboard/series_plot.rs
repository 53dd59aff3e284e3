//! The time-series picture of a watch: every measured commit of one (branch, metric) series
//! in order, its runs as dots, the means joined by a line, and each change point as a
//! vertical mark between the last commit before and the first after, linked to its bisect.
//! Drawn as SVG on the server, sized by `viewBox`, like the bisect page's samples plot.

use super::format::{number, short_sha};
use perfbisect_report::html::escape;
use perfbisect_wire::watch::{ChangePoint, SeriesPoint};
use std::fmt::Write;

const W: f64 = 900.0;
const H: f64 = 340.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 70.0;

/// Ticks at 1, 2, 2.5 or 5 × 10^k covering `[lo, hi]`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
        (lo - pad, hi + pad)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((lo / step).floor() as i64..=(hi / step).ceil() as i64)
        .map(|i| i as f64 * step)
        .collect()
}

/// The series between `points` (already cut to the zoomed window) with the `changes` whose
/// marks fall inside it. `None` when no run is stored yet.
pub fn series_svg(
    id: &str,
    metric: &str,
    points: &[SeriesPoint],
    changes: &[ChangePoint],
) -> Option<String> {
    let (lo, hi) = points
        .iter()
        .flat_map(|p| p.runs.iter().copied())
        .filter(|v| v.is_finite())
        .fold(None, |acc: Option<(f64, f64)>, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })?;
    let ticks = ticks(lo, hi);
    let (axis_lo, axis_hi) = (ticks[0], ticks[ticks.len() - 1]);
    let (plot_w, plot_h) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let y = |v: f64| TOP + (axis_hi - v) / (axis_hi - axis_lo) * plot_h;
    let slot = plot_w / points.len().max(1) as f64;
    let x = |i: usize| LEFT + slot * (i as f64 + 0.5);
    let metric = escape(metric);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"plot series\" id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" \
         role=\"img\" aria-labelledby=\"{id}-title\"><title id=\"{id}-title\">{metric}: {} measured commits, \
         {} change points</title>",
        points.len(),
        changes.len()
    );
    for t in &ticks {
        let ty = y(*t);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{ty:.1}\" x2=\"{:.1}\" y2=\"{ty:.1}\" class=\"grid\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
            LEFT + plot_w,
            LEFT - 6.0,
            ty + 4.0,
            number(*t)
        );
    }
    // Change points first, so the dots stay on top.
    for c in changes {
        let Some(after) = points.iter().position(|p| p.seq == c.after_seq) else {
            continue;
        };
        let cx = x(after) - slot / 2.0;
        let label = format!("{:+.1}%", c.change_pct);
        let title = format!(
            "change of {label} between {} and {} (confidence {:.4}){}",
            short_sha(&c.before_sha),
            short_sha(&c.after_sha),
            c.confidence,
            match c.bisect_id {
                Some(b) => format!(": bisect #{b}"),
                None => String::new(),
            }
        );
        let mark = format!(
            "<g class=\"change change-{}\"><title>{}</title>\
             <line x1=\"{cx:.1}\" y1=\"{TOP}\" x2=\"{cx:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text></g>",
            escape(&c.action),
            escape(&title),
            TOP + plot_h,
            TOP - 10.0
        );
        match c.bisect_id {
            Some(b) => {
                let _ = writeln!(s, "<a href=\"/bisects/{b}\">{mark}</a>");
            }
            None => {
                let _ = writeln!(s, "{mark}");
            }
        }
    }
    // Means joined by a line.
    let means: Vec<String> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.mean.map(|m| format!("{:.1},{:.1}", x(i), y(m))))
        .collect();
    if means.len() > 1 {
        let _ = writeln!(
            s,
            "<polyline class=\"means\" points=\"{}\"/>",
            means.join(" ")
        );
    }
    let label_every = points.len().div_ceil(30).max(1);
    for (i, p) in points.iter().enumerate() {
        let _ = write!(
            s,
            "<g class=\"point {}\"><title>#{} {} {} ({}): {} runs, mean {}</title>",
            escape(&p.kind),
            p.seq,
            short_sha(&p.sha),
            escape(&p.subject),
            escape(&p.kind),
            p.runs.len(),
            p.mean.map(number).unwrap_or_else(|| "-".into())
        );
        for v in p.runs.iter().filter(|v| v.is_finite()) {
            let _ = write!(
                s,
                "<circle class=\"run\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.4\"/>",
                x(i),
                y(*v)
            );
        }
        if let Some(m) = p.mean {
            let half = (slot * 0.4).min(7.0);
            let _ = write!(
                s,
                "<rect class=\"mean\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"2\"/>",
                x(i) - half,
                y(m) - 1.0,
                2.0 * half
            );
        }
        s += "</g>\n";
        if i % label_every == 0 {
            let (lx, ly) = (x(i), TOP + plot_h + 10.0);
            let _ = writeln!(
                s,
                "<text class=\"xtick\" x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
                 transform=\"rotate(-60 {lx:.1} {ly:.1})\">{}</text>",
                &p.sha[..p.sha.len().min(7)]
            );
        }
    }
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{b:.1}\" class=\"axis\"/>\
         <line x1=\"{LEFT}\" y1=\"{b:.1}\" x2=\"{:.1}\" y2=\"{b:.1}\" class=\"axis\"/>\
         <text x=\"14\" y=\"{m:.1}\" transform=\"rotate(-90 14 {m:.1})\" text-anchor=\"middle\" \
         class=\"axis-label\">{metric}</text>",
        LEFT + plot_w,
        b = TOP + plot_h,
        m = TOP + plot_h / 2.0
    );
    s += "</svg>\n";
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn point(seq: i32, runs: &[f64]) -> SeriesPoint {
        SeriesPoint {
            seq,
            sha: format!("{seq:040}"),
            subject: format!("c<{seq}>"),
            kind: "head".into(),
            seen_at: Utc::now(),
            runs: runs.to_vec(),
            mean: perfbisect_changepoint::head_value(runs),
            state: "done".into(),
        }
    }

    #[test]
    fn draws_runs_means_and_linked_change_points() {
        let points: Vec<SeriesPoint> = (0..6)
            .map(|i| point(i, &[100.0 + i as f64, 101.0 + i as f64]))
            .collect();
        let change = ChangePoint {
            id: 1,
            watch_id: 1,
            watch: "w".into(),
            branch: "main".into(),
            metric: "m".into(),
            before_sha: points[2].sha.clone(),
            before_seq: 2,
            after_sha: points[3].sha.clone(),
            after_seq: 3,
            detected_seq: 5,
            before: 101.0,
            after: 104.0,
            change_pct: 3.0,
            confidence: 0.999,
            action: "bisecting".into(),
            bisect_id: Some(7),
            bisect_status: None,
            culprit_sha: None,
            message: None,
            created_at: Utc::now(),
        };
        let svg = series_svg("s1", "m", &points, &[change]).unwrap();
        assert_eq!(svg.matches("<circle class=\"run\"").count(), 12);
        assert_eq!(svg.matches("<rect class=\"mean\"").count(), 6);
        assert!(svg.contains("<a href=\"/bisects/7\">"));
        assert!(svg.contains("+3.0%"));
        assert!(svg.contains("c&lt;3&gt;"), "subjects are escaped");
        assert!(series_svg("s2", "m", &[point(0, &[])], &[]).is_none());
    }
}
