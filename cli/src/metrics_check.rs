//! `perfbisect metrics`: which metric names a job's output yields, found before submitting
//! instead of after the first task. It parses a saved run output exactly as the worker does
//! (`perfbisect_metrics::parse` with the job's `run.format` and its testcase as the prefix).

use perfbisect_metrics::{Format, Metrics};
use perfbisect_wire::JobSpec;

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("the job spec is refused: {0}")]
    Job(#[from] perfbisect_wire::JobSpecError),
    #[error(transparent)]
    Format(#[from] perfbisect_metrics::UnknownFormat),
    #[error("the output yields no metric as `{format}`: {source}")]
    Parse {
        format: Format,
        source: perfbisect_metrics::ParseError,
    },
    #[error("`{metric}` is not among the {} metrics this output yields{}", names.len(), nearest(metric, names))]
    Missing { metric: String, names: Vec<String> },
}

/// " (did you mean `x`?)" for the name sharing the longest suffix after the last `.`.
fn nearest(metric: &str, names: &[String]) -> String {
    let key = metric
        .rsplit('.')
        .next()
        .unwrap_or(metric)
        .to_ascii_lowercase();
    names
        .iter()
        .find(|n| {
            let k = n.rsplit('.').next().unwrap_or(n).to_ascii_lowercase();
            k == key || k.contains(&key) || key.contains(&k)
        })
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_else(|| {
            let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
            format!(": {}", shown.join(", "))
        })
}

/// The metrics `output` yields for the job; with `metric`, also that it is among them.
pub fn check(job_yaml: &str, output: &str, metric: Option<&str>) -> Result<Metrics, CheckError> {
    let job = JobSpec::from_yaml(job_yaml)?;
    let format: Format = job.run.format.parse()?;
    let metrics = perfbisect_metrics::parse(format, &job.testcase, output)
        .map_err(|source| CheckError::Parse { format, source })?;
    if let Some(m) = metric
        && !metrics.contains_key(m)
    {
        return Err(CheckError::Missing {
            metric: m.to_string(),
            names: metrics.keys().cloned().collect(),
        });
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = "testcase: demo\ntbox_group: local\nbuild:\n  command: make\nrun:\n  command: ./bench\n  format: key_value\n";

    #[test]
    fn names_are_those_the_worker_would_store() {
        let m = check(JOB, "score: 12.5\nnoise line\n", Some("demo.score")).unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["demo.score"]);
    }

    #[test]
    fn a_wrong_name_is_told_with_the_nearest_right_one() {
        let err = check(JOB, "score: 12.5\n", Some("score")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`score` is not among the 1 metrics this output yields (did you mean `demo.score`?)"
        );
        let err = check(JOB, "nothing here\n", None).unwrap_err();
        assert!(
            err.to_string().contains("no metric as `key_value`"),
            "{err}"
        );
    }

    #[test]
    fn callgrind_output_needs_no_wrapper() {
        let job = JOB.replace("key_value", "callgrind");
        let out =
            "==7== Events    : Ir\n==7== Collected : 582559033\n==7== I   refs:      582,559,033\n";
        let m = check(&job, out, Some("callgrind.Ir")).unwrap();
        assert_eq!(m["callgrind.I_refs"], 582_559_033.0);
    }
}
