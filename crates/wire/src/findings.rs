//! The engine's findings about a bisect's range, as the API shows them (commits by sha).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the engine measured about the range, beside its decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EngineFindings {
    /// (bad − good) / good, from the endpoints' runs.
    pub change: Option<f64>,
    /// Noise of one run relative to the good level.
    pub noise: Option<f64>,
    /// The stated direction and the measured change disagree.
    #[serde(default)]
    pub direction_contradicted: bool,
    /// Runs, builds and machine time still expected for the target confidence.
    pub prediction: Option<BudgetPrediction>,
    /// Every change point the engine sees, in history order.
    #[serde(default)]
    pub changes: Vec<ChangePointView>,
    /// More than one change: a single step does not fit the measured commits.
    #[serde(default)]
    pub more_than_one_change: bool,
    /// Anytime-valid error bound of the verification against the parent.
    pub verification_alpha: f64,
    /// The verification's e-value so far (passes at 1 / verification_alpha).
    pub verification_evalue: Option<f64>,
    /// Measured machine time of a build and of a run, in seconds.
    pub costs: Option<MeasuredCosts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BudgetPrediction {
    pub runs: u32,
    pub builds: u32,
    pub machine_secs: Option<f64>,
    /// |step| / noise of one run the prediction was made from.
    #[serde(default)]
    pub step_in_noise: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ChangePointView {
    /// The culprit's sha, when one commit holds the target probability.
    pub culprit: Option<String>,
    /// Probability of the culprit, or of the candidate set when there is none.
    pub probability: f64,
    /// The most probable commits for this step.
    pub candidates: Vec<CandidateProbability>,
    /// (level after − level before) / good level.
    pub change: f64,
    /// Not named: its commit's own step is surely below the size of change the bisect
    /// looks for; `candidates` says where it is.
    #[serde(default)]
    pub below_interest: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CandidateProbability {
    pub sha: String,
    pub probability: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MeasuredCosts {
    pub build_secs: f64,
    pub run_secs: f64,
    /// What a boot adds to the run after it, where the runner says which runs followed a
    /// boot (`runs_since_deploy`) and some did not.
    #[serde(default)]
    pub boot_secs: Option<f64>,
}
