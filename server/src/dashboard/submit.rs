//! The submit page: a form over `POST /api/v1/bisects`. The page's script sends it with the
//! API token kept in the browser and shows the API's own refusals next to their fields, so
//! the form checks exactly what the API checks. `?from=<id>` fills it with an earlier
//! bisect, for a re-run (the same range, or a narrower one typed over it).

use super::error::PageError;
use crate::state::AppState;
use askama::Template;
use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;

/// A job spec one click away on the form.
pub struct Example {
    pub id: &'static str,
    pub title: &'static str,
    /// The metric to suggest with it.
    pub metric: &'static str,
    pub yaml: &'static str,
}

/// The examples, in the order the form offers them: the demo's, userspace ones, then the
/// kernel jobs of `jobs/` (a qemu boot and the three seed reports' bare-metal jobs).
pub const EXAMPLES: &[Example] = &[
    Example {
        id: "demo",
        title: "Example repository (perfbisect demo)",
        metric: "demo.score",
        yaml: include_str!("../../../web/examples/demo.yaml"),
    },
    Example {
        id: "userspace",
        title: "Userspace project built with make, timed with time -v",
        metric: "time.elapsed_time",
        yaml: include_str!("../../../web/examples/userspace.yaml"),
    },
    Example {
        id: "zstd-perf-stat",
        title: "zstd, counted with perf stat (instructions)",
        metric: "perf-stat.instructions:u",
        yaml: include_str!("../../../jobs/zstd-compress-perf-stat.yaml"),
    },
    Example {
        id: "kernel-qemu",
        title: "Kernel booted under qemu (hackbench)",
        metric: "hackbench.time",
        yaml: include_str!("../../../jobs/boot-smoke-qemu.yaml"),
    },
    Example {
        id: "kernel-fio",
        title: "Kernel: fio 4k write on ext4 (bare metal, seed report)",
        metric: "fio.write_iops",
        yaml: include_str!("../../../jobs/fio-basic-4k-write-falloc.yaml"),
    },
    Example {
        id: "kernel-aim7",
        title: "Kernel: aim7 disk_wrt on ext4 (bare metal, seed report)",
        metric: "aim7.jobs-per-min",
        yaml: include_str!("../../../jobs/aim7-disk_wrt-ext4.yaml"),
    },
    Example {
        id: "kernel-fxmark",
        title: "Kernel: fxmark dbench_client (bare metal, seed report)",
        metric: "fxmark.ssd_ext4_dbench_client_32_directio.works/sec",
        yaml: include_str!("../../../jobs/fxmark-dbench_client-directio.yaml"),
    },
];

/// What the form starts with.
#[derive(Default)]
pub struct Prefill {
    pub repository: String,
    pub good: String,
    pub bad: String,
    pub job: String,
    pub metric: String,
    pub direction: String,
    pub magnitude_pct: String,
    pub confidence: String,
    pub max_runs: String,
    pub notify: String,
}

#[derive(Deserialize)]
pub struct SubmitQuery {
    /// Re-run: start from this bisect's range, job and metric.
    from: Option<i64>,
}

#[derive(Template)]
#[template(path = "submit.html")]
struct SubmitPage {
    nav: &'static str,
    repositories: Vec<String>,
    /// Repositories not ready to bisect, with their state and last fetch error.
    not_ready: Vec<(String, String, Option<String>)>,
    examples: &'static [Example],
    from: Option<i64>,
    form: Prefill,
}

async fn earlier(state: &AppState, id: i64) -> Result<Prefill, PageError> {
    let e = crate::store::bisects::submitted(&state.db, id)
        .await?
        .ok_or_else(|| PageError::NotFound(format!("no bisect with id {id} to re-run")))?;
    let notify: Vec<String> = serde_json::from_value(e.notify).unwrap_or_default();
    Ok(Prefill {
        repository: e.repository,
        good: e.good_rev,
        bad: e.bad_rev,
        job: e.yaml,
        metric: e.metric,
        direction: e.direction.unwrap_or_default(),
        magnitude_pct: e.magnitude_pct.map(|m| m.to_string()).unwrap_or_default(),
        confidence: e.confidence.to_string(),
        max_runs: e.max_runs.to_string(),
        notify: notify.join(", "),
    })
}

pub async fn page(
    State(state): State<AppState>,
    Query(q): Query<SubmitQuery>,
) -> Result<Html<String>, PageError> {
    let form = match q.from {
        Some(id) => earlier(&state, id).await?,
        None => Prefill::default(),
    };
    let repositories = crate::store::repositories::names(&state.db).await?;
    let not_ready: Vec<(String, String, Option<String>)> =
        crate::store::repositories::not_ready(&state.db)
            .await?
            .into_iter()
            .map(|(name, st, err)| (name, st.as_str().to_string(), err))
            .collect();
    let html = SubmitPage {
        nav: "submit",
        repositories,
        not_ready,
        examples: EXAMPLES,
        from: q.from,
        form,
    }
    .render()?;
    Ok(Html(html))
}

#[cfg(test)]
mod tests {
    use super::EXAMPLES;

    #[test]
    fn every_example_is_a_valid_job_spec() {
        for e in EXAMPLES {
            let spec = perfbisect_wire::JobSpec::from_yaml(e.yaml)
                .unwrap_or_else(|err| panic!("example {}: {err}", e.id));
            assert!(!spec.testcase.is_empty(), "{}", e.id);
        }
    }
}
