//! The time-series picture of a watch: every measured commit of one (branch, metric) series
//! in order, its runs as dots, the means joined by a line, and each change point as a
//! vertical mark between the last commit before and the first after, linked to its bisect.
//! Drawn as SVG on the server, sized by `viewBox`, like the bisect page's samples plot.

use super::axis::{self, Frame, YAxis, value_range};
use super::format::{number, short_sha};
use perfbisect_report::html::escape;
use perfbisect_wire::watch::{ChangePoint, SeriesPoint};
use std::fmt::Write;

const FRAME: Frame = Frame {
    w: 900.0,
    h: 340.0,
    left: 72.0,
    right: 16.0,
    top: 30.0,
    bottom: 70.0,
};

/// The series between `points` (already cut to the zoomed window) with the `changes` whose
/// marks fall inside it. `None` when no run is stored yet.
pub fn series_svg(
    id: &str,
    metric: &str,
    points: &[SeriesPoint],
    changes: &[ChangePoint],
) -> Option<String> {
    let (lo, hi) = value_range(points.iter().flat_map(|p| p.runs.iter().copied()))?;
    let axis = YAxis::new(&FRAME, lo, hi);
    let y = |v: f64| axis.y(v);
    let (plot_w, plot_h, left, top) = (FRAME.plot_w(), FRAME.plot_h(), FRAME.left, FRAME.top);
    let (w, h) = (FRAME.w, FRAME.h);
    let slot = plot_w / points.len().max(1) as f64;
    let x = |i: usize| left + slot * (i as f64 + 0.5);
    let metric = escape(metric);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"plot series\" id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" \
         role=\"img\" aria-labelledby=\"{id}-title\"><title id=\"{id}-title\">{metric}: {} measured commits, \
         {} change points</title>",
        points.len(),
        changes.len()
    );
    axis.grid(&mut s, &FRAME);
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
             <line x1=\"{cx:.1}\" y1=\"{top}\" x2=\"{cx:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text></g>",
            escape(&c.action),
            escape(&title),
            top + plot_h,
            top - 10.0
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
            axis::x_label(&mut s, &FRAME, x(i), &p.sha);
        }
    }
    axis::axes(&mut s, &FRAME);
    axis::y_label(&mut s, &FRAME, &metric);
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
