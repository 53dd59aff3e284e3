//! The job spec: what to build, what to run, where, and how to read the result.
//!
//! Written in YAML close to LKP's `job.yaml`. Its canonical form (sorted-key JSON of the
//! parsed spec) and that form's SHA-256 identify "the same measurement" across bisects: two
//! specs that differ only in key order or YAML style hash the same.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// A parsed, validated job spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The benchmark program (`fio-basic`, `aim7`, ...); also the default metric prefix.
    pub testcase: String,
    /// The host group whose workers may run this job.
    pub tbox_group: String,
    /// Benchmark parameters, passed to the run command as `PERFBISECT_PARAM_<KEY>`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kconfig: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    pub build: BuildRecipe,
    pub run: RunRecipe,
    /// Benchmark runs per task (one task = one commit on one host).
    #[serde(default = "default_runs_per_task")]
    pub runs_per_task: u32,
    #[serde(default)]
    pub timeouts: Timeouts,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildRecipe {
    /// Shell command run in the checked-out tree; a non-zero exit makes the commit untestable.
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRecipe {
    /// Shell command run in the built tree once per run; its standard output holds the metrics.
    pub command: String,
    /// How to read the output: `auto`, `json`, `key_value`, `lkp_stats`, `fio`, `time_v`, `perf_stat`.
    #[serde(default = "default_format")]
    pub format: String,
    /// Read the metrics from this file (relative to the tree) instead of standard output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_file: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    #[serde(default = "default_build_secs")]
    pub build_secs: u64,
    #[serde(default = "default_run_secs")]
    pub run_secs: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            build_secs: default_build_secs(),
            run_secs: default_run_secs(),
        }
    }
}

fn default_runs_per_task() -> u32 {
    5
}
fn default_format() -> String {
    "auto".into()
}
fn default_build_secs() -> u64 {
    3600
}
fn default_run_secs() -> u64 {
    3600
}

pub const FORMATS: &[&str] = &[
    "auto",
    "json",
    "key_value",
    "lkp_stats",
    "fio",
    "time_v",
    "perf_stat",
];

/// Why a job spec was refused. `key` names the offending key in dotted form.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobSpecError {
    #[error("job spec is not valid YAML for a job: {0}")]
    Syntax(String),
    #[error("job spec key `{key}`: {problem}")]
    Invalid { key: String, problem: String },
}

impl JobSpecError {
    /// The dotted key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            JobSpecError::Syntax(_) => None,
            JobSpecError::Invalid { key, .. } => Some(key),
        }
    }
}

fn invalid(key: &str, problem: impl Into<String>) -> JobSpecError {
    JobSpecError::Invalid {
        key: key.to_string(),
        problem: problem.into(),
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
}

impl JobSpec {
    /// Parses and validates YAML. Errors name the key and the problem.
    pub fn from_yaml(text: &str) -> Result<Self, JobSpecError> {
        let spec: JobSpec =
            yaml_serde::from_str(text).map_err(|e| JobSpecError::Syntax(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn validate(&self) -> Result<(), JobSpecError> {
        if !is_name(&self.testcase) {
            return Err(invalid(
                "testcase",
                "must be 1-128 characters of letters, digits, '-', '_', '.', '+'",
            ));
        }
        if !is_name(&self.tbox_group) {
            return Err(invalid(
                "tbox_group",
                "must be 1-128 characters of letters, digits, '-', '_', '.', '+'",
            ));
        }
        for key in self.params.keys() {
            if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || key.is_empty() {
                return Err(invalid(
                    &format!("params.{key}"),
                    "parameter names are letters, digits and '_'",
                ));
            }
        }
        if self.build.command.trim().is_empty() {
            return Err(invalid("build.command", "must not be empty"));
        }
        if self.run.command.trim().is_empty() {
            return Err(invalid("run.command", "must not be empty"));
        }
        if !FORMATS.contains(&self.run.format.as_str()) {
            return Err(invalid(
                "run.format",
                format!("`{}` is not one of {}", self.run.format, FORMATS.join(", ")),
            ));
        }
        if !(1..=100).contains(&self.runs_per_task) {
            return Err(invalid("runs_per_task", "must be between 1 and 100"));
        }
        if self.timeouts.build_secs == 0 {
            return Err(invalid("timeouts.build_secs", "must be positive"));
        }
        if self.timeouts.run_secs == 0 {
            return Err(invalid("timeouts.run_secs", "must be positive"));
        }
        Ok(())
    }

    /// Sorted-key JSON of the spec: the form that is hashed and stored.
    pub fn canonical_json(&self) -> String {
        // serde_json's Map is a BTreeMap (no `preserve_order`), so keys come out sorted.
        let value = serde_json::to_value(self).expect("a job spec always serializes");
        serde_json::to_string(&value).expect("a JSON value always serializes")
    }

    /// SHA-256 of the canonical form, hex.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.canonical_json().as_bytes()))
    }

    /// Hash of what decides the build artifact: build command, kconfig, compiler.
    pub fn build_hash(&self) -> String {
        let key = serde_json::json!({
            "build": self.build, "kconfig": self.kconfig, "compiler": self.compiler,
        });
        hex::encode(Sha256::digest(key.to_string().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "testcase: demo\ntbox_group: local\nparams:\n  size: 10\n  mode: fast\nbuild:\n  command: make\nrun:\n  command: ./bench\n";

    #[test]
    fn parses_with_defaults() {
        let spec = JobSpec::from_yaml(SPEC).unwrap();
        assert_eq!(spec.runs_per_task, 5);
        assert_eq!(spec.run.format, "auto");
        assert_eq!(spec.params["size"], serde_json::json!(10));
    }

    #[test]
    fn hash_ignores_key_order_and_style() {
        let a = JobSpec::from_yaml(SPEC).unwrap();
        let b = JobSpec::from_yaml(
            "run: {command: ./bench}\nbuild: {command: make}\nparams: {mode: fast, size: 10}\ntbox_group: local\ntestcase: demo\n",
        )
        .unwrap();
        assert_eq!(a.hash(), b.hash());
        let c = JobSpec::from_yaml(&SPEC.replace("size: 10", "size: 11")).unwrap();
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = JobSpec::from_yaml(&format!("{SPEC}bogus: 1\n")).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn missing_key_is_named() {
        let err = JobSpec::from_yaml("testcase: demo\ntbox_group: local\nbuild: {command: make}\n")
            .unwrap_err();
        assert!(err.to_string().contains("run"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = JobSpec::from_yaml(&format!("{SPEC}runs_per_task: 0\n")).unwrap_err();
        assert_eq!(err.key(), Some("runs_per_task"));
        let err =
            JobSpec::from_yaml(&SPEC.replace("testcase: demo", "testcase: 'a b'")).unwrap_err();
        assert_eq!(err.key(), Some("testcase"));
        let err =
            JobSpec::from_yaml(&SPEC.replace("./bench", "./bench\n  format: xml")).unwrap_err();
        assert_eq!(err.key(), Some("run.format"));
    }
}
