//! The whole report: subject, text body, HTML body, plots and the structured data,
//! for every outcome of a bisect.

use serde::{Deserialize, Serialize};

use crate::html::{escape, link};
use crate::input::{Addition, Candidate, Commit, CommitSamples, Judgement, ReportInput, Run, Runs};
use crate::kpi::{Direction, KpiTable, Verdict};
use crate::plot::{TextPlot, svg_plot, text_plot};
use crate::stats::{RowPolicy, Summary, relative_change};
use crate::table::ComparisonTable;

/// How the report is computed; deserializable from the server's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReportConfig {
    /// Directions checked before the built-in ones.
    pub kpi: KpiTable,
    /// Whether to fall back to [`KpiTable::builtin`].
    pub builtin_kpis: bool,
    pub rows: RowPolicy,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            kpi: KpiTable::default(),
            builtin_kpis: true,
            rows: RowPolicy::default(),
        }
    }
}

impl ReportConfig {
    /// The KPI table in effect.
    pub fn kpi_table(&self) -> KpiTable {
        if self.builtin_kpis {
            self.kpi.clone().then(KpiTable::builtin())
        } else {
            self.kpi.clone()
        }
    }
}

/// Why a report cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("no complete run of {commit} has the metric {metric}")]
    MetricMissing { metric: String, commit: String },
    #[error("{sha:?} is not a commit id (hex digits)")]
    BadCommitId { sha: String },
}

/// The outcome, without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Found,
    NotReproduced,
    Inconclusive,
    Failed,
}

/// The change of one metric between two commits, as a headline states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub metric: String,
    pub base_mean: f64,
    pub new_mean: f64,
    /// `100·(new−base)/|base|`; `None` when the base mean is zero.
    pub change_percent: Option<f64>,
    pub direction: Option<Direction>,
    pub verdict: Verdict,
}

impl Headline {
    fn new(metric: &str, base: &Summary, new: &Summary, direction: Option<Direction>) -> Self {
        let change_percent = relative_change(base.mean, new.mean);
        let verdict = Verdict::of(direction, new.mean - base.mean);
        Headline {
            metric: metric.to_owned(),
            base_mean: base.mean,
            new_mean: new.mean,
            change_percent,
            direction,
            verdict,
        }
    }

    /// `54.8%` (magnitude; the word carries the direction), `+3.1%` when the direction is
    /// unknown, `None` when the base is zero.
    fn amount(&self) -> Option<String> {
        let p = self.change_percent?;
        Some(match self.verdict {
            Verdict::Change => format!("{p:+.1}%"),
            _ => format!("{:.1}%", p.abs()),
        })
    }

    /// `a 54.8% improvement of fio.write_iops`
    pub fn phrase(&self) -> String {
        match self.amount() {
            Some(a) => format!(
                "{} {a} {} of {}",
                article(&a),
                self.verdict.word(),
                self.metric
            ),
            None => format!(
                "{} {} of {} (from {} to {})",
                article(self.verdict.word()),
                self.verdict.word(),
                self.metric,
                number(self.base_mean),
                number(self.new_mean)
            ),
        }
    }

    /// `fio.write_iops 54.8% improvement`
    pub fn tail(&self) -> String {
        match self.amount() {
            Some(a) => format!("{} {a} {}", self.metric, self.verdict.word()),
            None => format!("{} {}", self.metric, self.verdict.word()),
        }
    }
}

/// "a" or "an" before a word or number ("an 8.1%", "an 11.0%", "an improvement").
fn article(next: &str) -> &'static str {
    let int: String = next.chars().take_while(char::is_ascii_digit).collect();
    let vowel_number = int.starts_with('8') || int == "11" || int == "18";
    let vowel_word = next.starts_with(['a', 'e', 'i', 'o', 'u']);
    if vowel_number || vowel_word {
        "an"
    } else {
        "a"
    }
}

/// A number as a person reads it: integers plainly, others with up to 4 significant
/// decimals.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        crate::format::format_g(v, 6)
    }
}

/// Another testcase the culprit changed, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdditionReport {
    pub testcase: String,
    pub machine: String,
    pub headline: Headline,
    pub table: ComparisonTable,
}

/// The numbers of one endpoint of a range that did not reproduce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointNumbers {
    pub sha: String,
    /// Complete runs with the metric.
    pub n: usize,
    pub incomplete: usize,
    pub mean: f64,
    pub pct_stddev: Option<f64>,
}

/// A rendered report: everything the mailer, the dashboard and the API need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub kind: OutcomeKind,
    pub subject: String,
    /// The bisected metric's change between parent and culprit (found), or between the
    /// endpoints (not reproduced).
    pub headline: Option<Headline>,
    pub table: Option<ComparisonTable>,
    #[serde(default)]
    pub also: Vec<AdditionReport>,
    /// Good and bad endpoint numbers of a range that did not reproduce.
    #[serde(default)]
    pub endpoints: Option<[EndpointNumbers; 2]>,
    pub text_plot: Option<TextPlot>,
    pub svg_plot: Option<String>,
    /// The `text/plain` body.
    pub text: String,
    /// The `text/html` body.
    pub html: String,
}

fn check_sha(c: &Commit) -> Result<(), ReportError> {
    if c.sha.is_empty() || !c.sha.chars().all(|ch| ch.is_ascii_hexdigit()) {
        return Err(ReportError::BadCommitId { sha: c.sha.clone() });
    }
    Ok(())
}

fn samples_of(metric: &str, runs: &[Run]) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.completed)
        .filter_map(|r| r.metrics.get(metric).copied())
        .collect()
}

fn summary_of(metric: &str, runs: &[Run], commit: &Commit) -> Result<Summary, ReportError> {
    Summary::of(&samples_of(metric, runs)).ok_or_else(|| ReportError::MetricMissing {
        metric: metric.to_owned(),
        commit: commit.short(10).to_owned(),
    })
}

/// `[linus:master]` or `[linux]`.
fn repo_tag(input: &ReportInput) -> String {
    let name = input.repository.short_name();
    match input.repository.branch.as_deref().filter(|b| !b.is_empty()) {
        Some(b) => format!("[{name}:{b}]"),
        None => format!("[{name}]"),
    }
}

/// The subject's second tag: the caller's, else the culprit subject before its first `:`.
fn subject_prefix(input: &ReportInput, culprit: &Commit) -> Option<String> {
    if let Some(p) = &input.subject_prefix {
        return Some(p.clone()).filter(|p| !p.is_empty());
    }
    let (prefix, _) = culprit.subject.split_once(':')?;
    let prefix = prefix.trim();
    // `mm/vmscan: …` → `mm/vmscan`; a sentence with a colon in it is no prefix.
    (!prefix.is_empty() && prefix.len() <= 40 && !prefix.contains(char::is_whitespace))
        .then(|| prefix.to_owned())
}

/// The direction of `metric`: the input's override, else the KPI table's.
fn direction_of(metric: &str, given: Option<Direction>, kpi: &KpiTable) -> Option<Direction> {
    given.or_else(|| kpi.direction(metric))
}

/// The plot samples: the bisect's, or the two sides' runs when the caller gave none.
fn plot_samples(
    input: &ReportInput,
    old: (&Commit, &[Run]),
    new: (&Commit, &[Run]),
) -> Vec<CommitSamples> {
    if !input.samples.is_empty() {
        return input.samples.clone();
    }
    vec![
        CommitSamples {
            sha: old.0.sha.clone(),
            judged: Judgement::Good,
            values: samples_of(&input.metric, old.1),
        },
        CommitSamples {
            sha: new.0.sha.clone(),
            judged: Judgement::Bad,
            values: samples_of(&input.metric, new.1),
        },
    ]
}

/// The subject line alone.
pub fn subject(input: &ReportInput, config: &ReportConfig) -> Result<String, ReportError> {
    render(input, config).map(|r| r.subject)
}

/// Render the report of a bisect.
pub fn render(input: &ReportInput, config: &ReportConfig) -> Result<Report, ReportError> {
    // A bisect that failed before its range was resolved (its repository's fetch failed, a
    // revision did not exist) has endpoints without ids: their subjects name the revisions.
    let unresolved_allowed = matches!(input.outcome, crate::input::Outcome::Failed { .. });
    for c in [&input.good, &input.bad] {
        if !(unresolved_allowed && c.sha.is_empty()) {
            check_sha(c)?;
        }
    }
    let kpi = config.kpi_table();
    match &input.outcome {
        crate::input::Outcome::Found {
            culprit,
            parent,
            runs,
            confidence,
            also,
        } => {
            check_sha(culprit)?;
            check_sha(parent)?;
            render_found(
                input,
                config,
                &kpi,
                culprit,
                parent,
                runs,
                *confidence,
                also,
            )
        }
        crate::input::Outcome::NotReproduced {
            good_runs,
            bad_runs,
        } => render_not_reproduced(input, &kpi, good_runs, bad_runs),
        crate::input::Outcome::Inconclusive { candidates, target } => {
            Ok(render_inconclusive(input, candidates, *target))
        }
        crate::input::Outcome::Failed { reason } => Ok(render_failed(input, reason)),
    }
}

/// The lines shared by every outcome: testcase, config, compiler, machine, parameters.
fn job_lines(input: &ReportInput) -> Vec<String> {
    let job = &input.job;
    let mut v = vec![format!("testcase: {}", job.testcase)];
    if let Some(k) = &job.kconfig {
        v.push(format!("config: {k}"));
    }
    if let Some(c) = &job.compiler {
        v.push(format!("compiler: {c}"));
    }
    v.push(format!("test machine: {}", input.machine.describe()));
    let params: Vec<_> = job.printed_parameters().collect();
    if !params.is_empty() {
        v.push("parameters:".to_owned());
        v.push(String::new());
        v.extend(params.iter().map(|(k, val)| format!("\t{k}: {val}")));
    }
    v
}

fn job_html(input: &ReportInput) -> String {
    let job = &input.job;
    let mut s = String::from("<table class=\"job\">\n");
    let mut row = |k: &str, v: &str| {
        s += &format!(
            "<tr><th align=\"left\">{}</th><td>{}</td></tr>\n",
            escape(k),
            escape(v)
        );
    };
    row("testcase", &job.testcase);
    if let Some(k) = &job.kconfig {
        row("config", k);
    }
    if let Some(c) = &job.compiler {
        row("compiler", c);
    }
    row("test machine", &input.machine.describe());
    for (k, v) in job.printed_parameters() {
        row(k, v);
    }
    s += "</table>\n";
    s
}

/// "perfbisect noticed a 54.8% improvement of …" for a submitted bisect; "FYI, we noticed …"
/// when a watch found the change, as the robot's reports of branches it tests on its own do.
fn noticed(input: &ReportInput, phrase: &str) -> String {
    match &input.found_by {
        Some(_) => format!("FYI, we noticed {phrase} on"),
        None => format!("{} noticed {phrase} on", input.robot.name),
    }
}

fn found_by_line(f: &crate::input::FoundBy) -> String {
    format!(
        "found by watching {} (watch {}): the change showed between heads {} and {}",
        f.branch,
        f.watch,
        &f.before[..f.before.len().min(12)],
        &f.after[..f.after.len().min(12)]
    )
}

fn repo_line(input: &ReportInput) -> String {
    match input.repository.branch.as_deref().filter(|b| !b.is_empty()) {
        Some(b) => format!("{} {b}", input.repository.url),
        None => input.repository.url.clone(),
    }
}

fn repo_html(input: &ReportInput) -> String {
    let mut s = link(&input.repository.url, &input.repository.url);
    if let Some(b) = input.repository.branch.as_deref().filter(|b| !b.is_empty()) {
        s += " ";
        s += &escape(b);
    }
    s
}

fn signature(input: &ReportInput) -> String {
    let mut s = format!("\n-- \n{}\n", input.robot.name);
    if let Some(u) = &input.dashboard_url {
        s += u;
        s += "\n";
    }
    s
}

fn html_page(subject: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(subject)
    )
}

fn html_footer(input: &ReportInput) -> String {
    let mut s = format!("<p>-- <br>\n{}", escape(&input.robot.name));
    if let Some(u) = &input.dashboard_url {
        s += "<br>\n";
        s += &link(u, u);
    }
    s += "</p>\n";
    s
}

/// The "In addition to that" box: one framed row per testcase.
fn addition_box(also: &[AdditionReport], additions: &[Addition]) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    for (a, input) in also.iter().zip(additions) {
        if !rows.is_empty() {
            rows.push(("-".into(), "-".into()));
        }
        rows.push((
            "testcase: change".into(),
            format!("{}: {}", a.testcase, a.headline.tail()),
        ));
        rows.push(("test machine".into(), a.machine.clone()));
        let params: Vec<_> = input.job.printed_parameters().collect();
        for (i, (k, v)) in params.iter().enumerate() {
            let label = if i == 0 { "test parameters" } else { "" };
            rows.push((label.into(), format!("{k}={v}")));
        }
    }
    let w0 = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let frame = format!("+{}+{}+\n", "-".repeat(w0 + 2), "-".repeat(w1 + 2));
    let mut s = frame.clone();
    for (k, v) in rows {
        if k == "-" {
            s += &frame;
        } else {
            s += &format!("| {k:<w0$} | {v:<w1$} |\n");
        }
    }
    s += &frame;
    s
}

/// The culprit's probability (never rounded up to 100%) and what its comparison with its
/// parent showed: how many runs on each side and Welch's t-test on them.
fn verdict_sentence(
    short: &str,
    confidence: f64,
    metric: &str,
    parent: &[f64],
    culprit: &[f64],
) -> String {
    let mut s = format!(
        "The bisect gives {short} a {} probability of being the first commit that changed \
         {metric}. Compared with its parent: {} + {} runs",
        crate::format::probability(confidence),
        culprit.len(),
        parent.len()
    );
    match perfbisect_engine::welch_t_test(culprit, parent) {
        Some(t) if t.p_value < 0.01 => {
            s += &format!(
                ", Welch's t-test p = {}.",
                crate::format::p_value(t.p_value)
            )
        }
        Some(t) => {
            s += &format!(
                ", Welch's t-test p = {}: not significant on these runs alone.",
                crate::format::p_value(t.p_value)
            )
        }
        None => s += ", too few for a test.",
    }
    s
}

#[expect(
    clippy::too_many_arguments,
    reason = "the fields of Outcome::Found, unpacked once"
)]
fn render_found(
    input: &ReportInput,
    config: &ReportConfig,
    kpi: &KpiTable,
    culprit: &Commit,
    parent: &Commit,
    runs: &Runs,
    confidence: Option<f64>,
    additions: &[Addition],
) -> Result<Report, ReportError> {
    let metric = &input.metric;
    let base = summary_of(metric, &runs.parent, parent)?;
    let new = summary_of(metric, &runs.culprit, culprit)?;
    let headline = Headline::new(
        metric,
        &base,
        &new,
        direction_of(metric, input.direction, kpi),
    );
    let table =
        ComparisonTable::compare(&input.job, metric, parent, culprit, runs, kpi, &config.rows);

    let mut also = Vec::new();
    for a in additions {
        let b = summary_of(&a.metric, &a.runs.parent, parent)?;
        let n = summary_of(&a.metric, &a.runs.culprit, culprit)?;
        also.push(AdditionReport {
            testcase: a.job.testcase.clone(),
            machine: a.machine.describe(),
            headline: Headline::new(&a.metric, &b, &n, direction_of(&a.metric, a.direction, kpi)),
            table: ComparisonTable::compare(
                &a.job,
                &a.metric,
                parent,
                culprit,
                &a.runs,
                kpi,
                &config.rows,
            ),
        });
    }

    let samples = plot_samples(input, (parent, &runs.parent), (culprit, &runs.culprit));
    let tplot = text_plot(metric, &samples);
    let svg = svg_plot(metric, &samples, Some(&culprit.sha));

    let mut subject = repo_tag(input);
    if let Some(p) = subject_prefix(input, culprit) {
        subject += &format!(" [{p}]");
    }
    subject += &format!("  {}:  {}", culprit.short(10), headline.tail());

    let regression = headline.verdict == Verdict::Regression;
    let tags = regression.then(|| {
        let mut t = format!("| Reported-by: {}\n", input.robot.address());
        if let Some(u) = &input.dashboard_url {
            t += &format!("| Closes: {u}\n");
        }
        t
    });

    // Text body.
    let mut t = String::new();
    t += "Hello,\n\n";
    t += &noticed(input, &headline.phrase());
    t += ":\n\n\n";
    t += &format!("commit: {} (\"{}\")\n", culprit.sha, culprit.subject);
    t += &repo_line(input);
    t += "\n";
    if let Some(f) = &input.found_by {
        t += &found_by_line(f);
        t += "\n";
    }
    t += "\n";
    for l in job_lines(input) {
        t += &l;
        t += "\n";
    }
    t += "\n\n";
    let range_notes = input
        .findings
        .as_ref()
        .and_then(|f| crate::findings::found_text(metric, f));
    if let Some(n) = &range_notes {
        t += n;
        t += "\n\n";
    }
    if !also.is_empty() {
        t += "In addition to that, the commit also has significant impact on the following tests:\n\n";
        t += &addition_box(&also, additions);
        t += "\n\n";
    }
    if let Some(tags) = &tags {
        t += "If you fix the issue in a separate patch/commit (i.e. not just a new version of\n";
        t += "the same patch/commit), kindly add following tags\n";
        t += tags;
        t += "\n\n";
    }
    t += "Details are as below:\n";
    t += &format!("{}>\n\n\n", "-".repeat(98));
    if let Some(u) = &input.dashboard_url {
        t += "The job, every run and the bisect log are available at:\n";
        t += u;
        t += "\n\n";
    }
    t += &table.render();
    for a in &also {
        t += "\n";
        t += &"*".repeat(99);
        t += "\n";
        let host = a
            .table
            .axes
            .iter()
            .find(|(k, _)| k == "tbox_group")
            .map(|(_, v)| v.as_str());
        match host {
            Some(h) => t += &format!("{h}: {}\n", a.machine),
            None => t += &format!("{}\n", a.machine),
        }
        t += &a.table.render();
    }
    t += "\n\n";
    let parent_samples = samples_of(metric, &runs.parent);
    let culprit_samples = samples_of(metric, &runs.culprit);
    let verdict = confidence.map(|c| {
        verdict_sentence(
            culprit.short(10),
            c,
            metric,
            &parent_samples,
            &culprit_samples,
        )
    });
    if let Some(v) = &verdict {
        t += &crate::format::wrap(v, 80);
        t += "\n\n\n";
    }
    if let Some(p) = &tplot {
        t += &p.render();
        t += "\n\n";
    }
    t += &signature(input);

    // HTML body.
    let mut h = String::new();
    h += "<p>Hello,</p>\n";
    h += &format!("<p>{}:</p>\n", escape(&noticed(input, &headline.phrase())));
    h += &format!(
        "<p>commit: <code>{}</code> (&quot;{}&quot;)<br>\n{}{}</p>\n",
        escape(&culprit.sha),
        escape(&culprit.subject),
        repo_html(input),
        input
            .found_by
            .as_ref()
            .map(|f| format!("<br>\n{}", escape(&found_by_line(f))))
            .unwrap_or_default()
    );
    h += &job_html(input);
    if let Some(n) = &range_notes {
        h += &crate::findings::html(n);
    }
    if !also.is_empty() {
        h += "<p>In addition to that, the commit also has significant impact on the following tests:</p>\n";
        h += &format!("<pre>{}</pre>\n", escape(&addition_box(&also, additions)));
    }
    if let Some(tags) = &tags {
        h += "<p>If you fix the issue in a separate patch/commit (i.e. not just a new version of \
              the same patch/commit), kindly add following tags</p>\n";
        h += &format!("<pre>{}</pre>\n", escape(tags));
    }
    h += "<h3>Details</h3>\n";
    if let Some(u) = &input.dashboard_url {
        h += &format!(
            "<p>The job, every run and the bisect log are available at {}.</p>\n",
            link(u, u)
        );
    }
    h += &format!("<pre>{}</pre>\n", escape(&table.render()));
    for a in &also {
        h += &format!(
            "<p>{}: {}</p>\n<pre>{}</pre>\n",
            escape(&a.testcase),
            escape(&a.machine),
            escape(&a.table.render())
        );
    }
    if let Some(v) = &verdict {
        h += &format!("<p>{}</p>\n", escape(v));
    }
    if let Some(svg) = &svg {
        h += &format!("<div class=\"plot\">\n{svg}</div>\n");
    }
    h += &html_footer(input);
    let html = html_page(&subject, &h);

    Ok(Report {
        kind: OutcomeKind::Found,
        subject,
        headline: Some(headline),
        table: Some(table),
        also,
        endpoints: None,
        text_plot: tplot,
        svg_plot: svg,
        text: t,
        html,
    })
}

fn range(input: &ReportInput) -> String {
    // An unresolved endpoint (a failed bisect's) is named by its revision, in `subject`.
    let name = |c: &Commit| {
        if c.sha.is_empty() {
            c.subject.clone()
        } else {
            c.short(10).to_string()
        }
    };
    format!("{}..{}", name(&input.good), name(&input.bad))
}

fn endpoint(metric: &str, c: &Commit, runs: &[Run]) -> EndpointNumbers {
    let s = Summary::of(&samples_of(metric, runs));
    EndpointNumbers {
        sha: c.sha.clone(),
        n: s.as_ref().map_or(0, |s| s.n),
        incomplete: runs.iter().filter(|r| !r.completed).count(),
        mean: s.as_ref().map_or(f64::NAN, |s| s.mean),
        pct_stddev: s.and_then(|s| s.pct_stddev()),
    }
}

fn endpoint_table(e: &[EndpointNumbers; 2]) -> String {
    let mut s = format!(
        "{:<4}  {:<10}  {:>3}  {:>10}  {:>7}\n",
        "", "commit", "n", "mean", "%stddev"
    );
    for (label, x) in ["good", "bad"].iter().zip(e) {
        let mean = if x.n == 0 {
            format!("{:>10}", "-")
        } else {
            crate::format::format_avg(x.mean)
        };
        let sd = x
            .pct_stddev
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.1}%"));
        let short: String = x.sha.chars().take(10).collect();
        s += &format!("{label:<4}  {short:<10}  {:>3}  {mean}  {sd:>7}", x.n);
        if x.incomplete > 0 {
            s += &format!("  ({} incomplete run(s) left out)", x.incomplete);
        }
        s += "\n";
    }
    s
}

fn range_lines(input: &ReportInput) -> String {
    format!(
        "good: {} (\"{}\")\nbad:  {} (\"{}\")\n{}\n",
        input.good.sha,
        input.good.subject,
        input.bad.sha,
        input.bad.subject,
        repo_line(input)
    )
}

fn range_html(input: &ReportInput) -> String {
    format!(
        "<p>good: <code>{}</code> (&quot;{}&quot;)<br>\nbad: <code>{}</code> (&quot;{}&quot;)<br>\n{}</p>\n",
        escape(&input.good.sha),
        escape(&input.good.subject),
        escape(&input.bad.sha),
        escape(&input.bad.subject),
        repo_html(input)
    )
}

fn render_not_reproduced(
    input: &ReportInput,
    kpi: &KpiTable,
    good_runs: &[Run],
    bad_runs: &[Run],
) -> Result<Report, ReportError> {
    let metric = &input.metric;
    let endpoints = [
        endpoint(metric, &input.good, good_runs),
        endpoint(metric, &input.bad, bad_runs),
    ];
    let headline = match (
        Summary::of(&samples_of(metric, good_runs)),
        Summary::of(&samples_of(metric, bad_runs)),
    ) {
        (Some(g), Some(b)) => Some(Headline::new(
            metric,
            &g,
            &b,
            direction_of(metric, input.direction, kpi),
        )),
        _ => None,
    };
    let samples = plot_samples(input, (&input.good, good_runs), (&input.bad, bad_runs));
    let tplot = text_plot(metric, &samples);
    let svg = svg_plot(metric, &samples, None);
    let subject = format!(
        "{} {}: not reproduced in {}",
        repo_tag(input),
        metric,
        range(input)
    );

    let intro = crate::format::wrap(
        &format!(
            "{} could not reproduce a change of {} between the ends of the range, so it did not \
             bisect it.",
            input.robot.name, metric
        ),
        80,
    );
    let change_line = headline.as_ref().and_then(|h| h.change_percent).map(|p| {
        crate::format::wrap(
            &format!(
                "The means differ by {p:+.1}%, which the measurements do not tell apart from \
                 noise."
            ),
            80,
        )
    });

    let mut t = String::from("Hello,\n\n");
    t += &intro;
    t += "\n\n";
    t += &range_lines(input);
    t += "\n";
    for l in job_lines(input) {
        t += &l;
        t += "\n";
    }
    t += "\n\nMeasurements at the ends of the range (complete runs only):\n\n";
    t += &endpoint_table(&endpoints);
    if let Some(c) = &change_line {
        t += "\n";
        t += c;
        t += "\n";
    }
    t += "\n\n";
    if let Some(p) = &tplot {
        t += &p.render();
        t += "\n\n";
    }
    t += &signature(input);

    let mut h = String::from("<p>Hello,</p>\n");
    h += &format!("<p>{}</p>\n", escape(&intro));
    h += &range_html(input);
    h += &job_html(input);
    h += "<p>Measurements at the ends of the range (complete runs only):</p>\n";
    h += &format!("<pre>{}</pre>\n", escape(&endpoint_table(&endpoints)));
    if let Some(c) = &change_line {
        h += &format!("<p>{}</p>\n", escape(c));
    }
    if let Some(svg) = &svg {
        h += &format!("<div class=\"plot\">\n{svg}</div>\n");
    }
    h += &html_footer(input);
    let html = html_page(&subject, &h);

    Ok(Report {
        kind: OutcomeKind::NotReproduced,
        subject,
        headline,
        table: None,
        also: Vec::new(),
        endpoints: Some(endpoints),
        text_plot: tplot,
        svg_plot: svg,
        text: t,
        html,
    })
}

fn candidate_lines(candidates: &[Candidate]) -> String {
    let mut s = String::new();
    for c in candidates {
        s += &format!(
            "  {:>5.1}%  {} (\"{}\")\n",
            100.0 * c.probability,
            c.commit.short(10),
            c.commit.subject
        );
    }
    s
}

fn render_inconclusive(input: &ReportInput, candidates: &[Candidate], target: f64) -> Report {
    let metric = &input.metric;
    let subject = format!(
        "{} {}: inconclusive bisect of {}",
        repo_tag(input),
        metric,
        range(input)
    );
    let tplot = text_plot(metric, &input.samples);
    let svg = svg_plot(metric, &input.samples, None);
    let intro = crate::format::wrap(
        &format!(
            "{} could not pin the change of {} to one commit with the {:.1}% confidence asked for.",
            input.robot.name,
            metric,
            100.0 * target
        ),
        80,
    );
    let listed = if candidates.is_empty() {
        "No commit stands out.\n".to_owned()
    } else {
        format!(
            "The most likely first commits to change it are:\n\n{}",
            candidate_lines(candidates)
        )
    };

    let mut t = String::from("Hello,\n\n");
    t += &intro;
    t += "\n\n";
    t += &range_lines(input);
    t += "\n";
    for l in job_lines(input) {
        t += &l;
        t += "\n";
    }
    t += "\n\n";
    t += &listed;
    t += "\nMore runs of these commits, or a quieter host, would decide between them.\n\n\n";
    let range_notes = input
        .findings
        .as_ref()
        .map(|f| crate::findings::inconclusive_text(metric, f, candidates, target))
        .filter(|n| !n.is_empty());
    if let Some(n) = &range_notes {
        t += n;
        t += "\n\n";
    }
    if let Some(p) = &tplot {
        t += &p.render();
        t += "\n\n";
    }
    t += &signature(input);

    let mut h = String::from("<p>Hello,</p>\n");
    h += &format!("<p>{}</p>\n", escape(&intro));
    h += &range_html(input);
    h += &job_html(input);
    if candidates.is_empty() {
        h += "<p>No commit stands out.</p>\n";
    } else {
        h += "<p>The most likely first commits to change it are:</p>\n<table class=\"candidates\">\n";
        for c in candidates {
            h += &format!(
                "<tr><td align=\"right\">{:.1}%</td><td><code>{}</code></td><td>{}</td></tr>\n",
                100.0 * c.probability,
                escape(c.commit.short(10)),
                escape(&c.commit.subject)
            );
        }
        h += "</table>\n";
    }
    h += "<p>More runs of these commits, or a quieter host, would decide between them.</p>\n";
    if let Some(n) = &range_notes {
        h += &crate::findings::html(n);
    }
    if let Some(svg) = &svg {
        h += &format!("<div class=\"plot\">\n{svg}</div>\n");
    }
    h += &html_footer(input);
    let html = html_page(&subject, &h);

    Report {
        kind: OutcomeKind::Inconclusive,
        subject,
        headline: None,
        table: None,
        also: Vec::new(),
        endpoints: None,
        text_plot: tplot,
        svg_plot: svg,
        text: t,
        html,
    }
}

fn render_failed(input: &ReportInput, reason: &str) -> Report {
    let metric = &input.metric;
    let subject = format!(
        "{} {}: bisect of {} failed",
        repo_tag(input),
        metric,
        range(input)
    );
    let intro = format!(
        "{} could not finish bisecting {}. It stopped because:",
        input.robot.name, metric
    );
    let mut t = String::from("Hello,\n\n");
    t += &intro;
    t += "\n\n";
    for l in reason.lines() {
        t += "    ";
        t += l;
        t += "\n";
    }
    t += "\n";
    t += &range_lines(input);
    t += "\n";
    for l in job_lines(input) {
        t += &l;
        t += "\n";
    }
    t += "\n";
    t += &signature(input);

    let mut h = String::from("<p>Hello,</p>\n");
    h += &format!("<p>{}</p>\n<pre>{}</pre>\n", escape(&intro), escape(reason));
    h += &range_html(input);
    h += &job_html(input);
    h += &html_footer(input);
    let html = html_page(&subject, &h);

    Report {
        kind: OutcomeKind::Failed,
        subject,
        headline: None,
        table: None,
        also: Vec::new(),
        endpoints: None,
        text_plot: None,
        svg_plot: None,
        text: t,
        html,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn articles() {
        assert_eq!(article("54.8%"), "a");
        assert_eq!(article("8.1%"), "an");
        assert_eq!(article("11.0%"), "an");
        assert_eq!(article("18.2%"), "an");
        assert_eq!(article("110.0%"), "a");
        assert_eq!(article("+3.1%"), "a");
        assert_eq!(article("improvement"), "an");
        assert_eq!(article("regression"), "a");
    }
}
