//! What the engine found about the whole range, beside the outcome: every change point in
//! history order, the change across the range, a stated direction the data contradict, and
//! what reaching the target would still cost. Printed as plain paragraphs in LKP's style; a
//! report whose range holds one change and agrees with its hint prints none of it.

use serde::{Deserialize, Serialize};

use crate::html::escape;
use crate::input::{Candidate, Commit};

/// The engine's findings about a range, with commits named for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RangeFindings {
    /// (bad − good) / good, from the endpoints' runs.
    #[serde(default)]
    pub change: Option<f64>,
    /// Every change point the engine sees, in history order.
    #[serde(default)]
    pub changes: Vec<ChangeStep>,
    /// A single step does not fit the measured commits.
    #[serde(default)]
    pub more_than_one_change: bool,
    /// The direction the submitter stated, when the measurements contradict it.
    #[serde(default)]
    pub contradicted: Option<StatedDirection>,
    /// What the confidence target would still cost.
    #[serde(default)]
    pub more: Option<Cost>,
    /// The budget in runs, and the runs it took.
    #[serde(default)]
    pub budget: Option<Budget>,
}

/// One step of the metric inside the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeStep {
    /// The culprit, when one commit holds the target probability.
    #[serde(default)]
    pub culprit: Option<Commit>,
    /// Probability of the culprit, or the mass of `candidates` when there is none.
    pub probability: f64,
    /// The most probable commits for this step, most probable first.
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    /// (level after − level before) / good level.
    pub change: f64,
    /// Not named: its commit's own step is surely below the size of change the bisect
    /// looks for.
    #[serde(default)]
    pub below_interest: bool,
}

/// The direction a submitter expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatedDirection {
    Increase,
    Decrease,
}

impl StatedDirection {
    fn word(self) -> &'static str {
        match self {
            StatedDirection::Increase => "increase",
            StatedDirection::Decrease => "decrease",
        }
    }
}

/// Runs, builds and machine time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub runs: u32,
    pub builds: u32,
    #[serde(default)]
    pub machine_secs: Option<f64>,
}

impl Cost {
    /// `about 40 more runs, 3 builds and 5 min 10 s of machine time`
    pub fn phrase(&self) -> String {
        let runs = plural(self.runs, "run", "runs");
        let builds = plural(self.builds, "build", "builds");
        match self.machine_secs {
            Some(s) => format!(
                "about {} more {runs}, {} {builds} and {} of machine time",
                self.runs,
                self.builds,
                duration(s)
            ),
            None => format!(
                "about {} more {runs} and {} {builds}",
                self.runs, self.builds
            ),
        }
    }
}

/// The bisect's budget of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub max_runs: u32,
    pub runs_done: u32,
}

fn plural(n: u32, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// `45 s`, `5 min 10 s`, `2 h 3 min`.
fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// `+10.0%`, `-3.1%`.
pub fn signed_pct(fraction: f64) -> String {
    format!("{:+.1}%", 100.0 * fraction)
}

impl RangeFindings {
    /// Whether the report has a "more than one change" section.
    pub fn several(&self) -> bool {
        self.changes.len() > 1 || self.more_than_one_change
    }

    /// The contrary-direction hint as a sentence.
    fn contrary(&self) -> Option<String> {
        let stated = self.contradicted?;
        let measured = match self.change {
            Some(c) => format!(
                "the measurements show a change of {} ((bad - good) / good)",
                signed_pct(c)
            ),
            None => "the measurements show a change the other way".to_owned(),
        };
        Some(format!(
            "The submitter expected the metric to {}, but {measured}.",
            stated.word()
        ))
    }
}

fn step_lines(metric: &str, f: &RangeFindings) -> String {
    let mut s = String::new();
    let across = f
        .change
        .map(|c| format!(" Across the whole range it changed by {}.", signed_pct(c)))
        .unwrap_or_default();
    s += &crate::format::wrap(
        &format!(
            "The range holds more than one change of {metric}: each step below, in history \
             order, with its size as (level after - level before) / good level.{across}"
        ),
        80,
    );
    s += "\n\n";
    s += &format!("  {:>8}  {:>11}  commit\n", "change", "probability");
    for (i, c) in f.changes.iter().enumerate() {
        let head = format!(
            "  {:>8}  {:>11}  ",
            signed_pct(c.change),
            crate::format::probability(c.probability)
        );
        let Some(k) = &c.culprit else {
            s += &if c.below_interest {
                // Where it is is known; it is not named because its own step is smaller
                // than the change this bisect looks for.
                format!("{head}not named: its own step is below the size this bisect looks for\n")
            } else {
                format!(
                    "{head}one of these {} commits (step {} could not be pinned down):\n",
                    c.candidates.len(),
                    i + 1
                )
            };
            for k in &c.candidates {
                s += &format!(
                    "  {:>8}  {:>11}    {} (\"{}\")\n",
                    "",
                    crate::format::probability(k.probability),
                    k.commit.short(10),
                    k.commit.subject
                );
            }
            continue;
        };
        s += &format!("{head}{} (\"{}\")\n", k.short(10), k.subject);
    }
    if f.changes.is_empty() {
        s += "  (the steps could not be told apart on the runs made)\n";
    }
    s
}

/// The contrary-direction paragraph, after what is already said.
fn push_contrary(s: &mut String, f: &RangeFindings) {
    if let Some(c) = f.contrary() {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&crate::format::wrap(&c, 80));
        s.push('\n');
    }
}

/// The plain-text paragraphs for a found bisect, or `None` when there is nothing beyond the
/// culprit to say (one change, no contrary hint).
pub fn found_text(metric: &str, f: &RangeFindings) -> Option<String> {
    let mut s = String::new();
    if f.several() {
        s += &step_lines(metric, f);
        s += "\n";
        s += &crate::format::wrap(
            "The table below compares the first named culprit with its parent; each of the \
             others is a change of its own.",
            80,
        );
        s += "\n";
    }
    push_contrary(&mut s, f);
    (!s.is_empty()).then_some(s)
}

/// The paragraphs of an inconclusive bisect: the change points (when several), the credible
/// set's probability mass, the budget spent and what more would cost.
pub fn inconclusive_text(
    metric: &str,
    f: &RangeFindings,
    listed: &[Candidate],
    target: f64,
) -> String {
    let mut s = String::new();
    if f.several() {
        s += &step_lines(metric, f);
        s += "\n";
    }
    let mut para = String::new();
    if !listed.is_empty() {
        let mass: f64 = listed.iter().map(|c| c.probability).sum();
        para += &format!(
            "The {} commits listed hold {} of the probability together. ",
            listed.len(),
            crate::format::probability(mass.min(1.0))
        );
    }
    if let Some(b) = f.budget
        && b.runs_done >= b.max_runs
    {
        para += &format!(
            "The budget of {} runs ran out after {} runs. ",
            b.max_runs, b.runs_done
        );
    }
    if let Some(m) = &f.more {
        para += &format!(
            "Reaching the {:.1}% target would take {}.",
            100.0 * target,
            m.phrase()
        );
    }
    let para = para.trim_end();
    if !para.is_empty() {
        s += &crate::format::wrap(para, 80);
        s += "\n";
    }
    push_contrary(&mut s, f);
    s
}

/// Plain text as HTML paragraphs (the step table stays preformatted).
pub fn html(text: &str) -> String {
    let mut h = String::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        if block.lines().any(|l| l.starts_with("  ")) {
            h += &format!("<pre>{}</pre>\n", escape(block.trim_end()));
        } else {
            h += &format!("<p>{}</p>\n", escape(&block.replace('\n', " ")));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(c: char, subject: &str) -> Commit {
        Commit {
            sha: c.to_string().repeat(40),
            subject: subject.into(),
            author: None,
        }
    }

    fn two_steps() -> RangeFindings {
        RangeFindings {
            change: Some(0.21),
            changes: vec![
                ChangeStep {
                    culprit: Some(commit('a', "step 10: level 1100")),
                    probability: 0.996,
                    candidates: vec![],
                    change: 0.1,
                    below_interest: false,
                },
                ChangeStep {
                    culprit: None,
                    probability: 0.93,
                    candidates: vec![
                        Candidate {
                            commit: commit('b', "step 22: level 1210"),
                            probability: 0.6,
                        },
                        Candidate {
                            commit: commit('c', "step 23: level 1210"),
                            probability: 0.33,
                        },
                    ],
                    change: 0.11,
                    below_interest: false,
                },
            ],
            more_than_one_change: true,
            contradicted: None,
            more: None,
            budget: None,
        }
    }

    #[test]
    fn a_step_below_the_size_of_interest_is_listed_where_it_is_but_not_named() {
        let mut f = two_steps();
        f.changes[1] = ChangeStep {
            culprit: None,
            probability: 0.9998,
            candidates: vec![Candidate {
                commit: commit('d', "tweak: inline the hot path"),
                probability: 0.9998,
            }],
            change: 0.004,
            below_interest: true,
        };
        let t = found_text("steps.score", &f).unwrap();
        assert!(
            t.contains("not named: its own step is below the size this bisect looks for"),
            "{t}"
        );
        assert!(
            t.contains("dddddddddd (\"tweak: inline the hot path\")"),
            "{t}"
        );
        assert!(!t.contains("could not be pinned down"), "{t}");
    }

    #[test]
    fn each_step_is_listed_in_history_order_with_its_size() {
        let t = found_text("steps.score", &two_steps()).unwrap();
        assert_eq!(
            t,
            "The range holds more than one change of steps.score: each step below, in history
order, with its size as (level after - level before) / good level. Across the
whole range it changed by +21.0%.

    change  probability  commit
    +10.0%        99.6%  aaaaaaaaaa (\"step 10: level 1100\")
    +11.0%        93.0%  one of these 2 commits (step 2 could not be pinned down):
                  60.0%    bbbbbbbbbb (\"step 22: level 1210\")
                  33.0%    cccccccccc (\"step 23: level 1210\")

The table below compares the first named culprit with its parent; each of the
others is a change of its own.
"
        );
    }

    #[test]
    fn one_change_that_agrees_with_the_hint_says_nothing_more() {
        let one = RangeFindings {
            change: Some(0.1),
            changes: vec![two_steps().changes[0].clone()],
            ..RangeFindings::default()
        };
        assert_eq!(found_text("m", &one), None);
        let contrary = RangeFindings {
            contradicted: Some(StatedDirection::Increase),
            change: Some(-0.031),
            ..one
        };
        assert_eq!(
            found_text("m", &contrary).unwrap(),
            "The submitter expected the metric to increase, but the measurements show a\n\
             change of -3.1% ((bad - good) / good).\n"
        );
    }

    #[test]
    fn an_exhausted_budget_gives_the_mass_and_the_cost_of_more() {
        let f = RangeFindings {
            more: Some(Cost {
                runs: 42,
                builds: 3,
                machine_secs: Some(310.0),
            }),
            budget: Some(Budget {
                max_runs: 120,
                runs_done: 120,
            }),
            ..RangeFindings::default()
        };
        let listed = two_steps().changes[1].candidates.clone();
        let t = inconclusive_text("m", &f, &listed, 0.99);
        assert_eq!(
            t,
            "The 2 commits listed hold 93.0% of the probability together. The budget of 120\n\
             runs ran out after 120 runs. Reaching the 99.0% target would take about 42 more\n\
             runs, 3 builds and 5 min 10 s of machine time.\n"
        );
        let h = html(&t);
        assert!(
            h.starts_with("<p>The 2 commits") && h.contains("5 min 10 s"),
            "{h}"
        );
    }
}
