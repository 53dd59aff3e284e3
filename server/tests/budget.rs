//! An honest budget (issue 9, Deliver 6): after the endpoints the engine's prediction is in
//! the API and on the page, the default budget follows from it under the operator's
//! ceiling and the submitter's number, and a bisect that runs out says which commits hold
//! how much of the probability and what more would cost — in its reason, its report and
//! on its page. The test plays a worker over the real protocol against the real router,
//! scheduler and PostgreSQL, with measurements chosen per commit.

mod common;

use axum::http::StatusCode;
use common::{Fixture, JOB, TOKEN, call, request, with_repo};
use perfbisect_server::scheduler;
use serde_json::{Value, json};
use std::collections::HashMap;

async fn register(f: &Fixture) -> String {
    common::register_worker(f, "h1", "g").await
}

async fn submit(f: &Fixture, max_runs: Option<u32>) -> Value {
    let mut body =
        json!({"repository": "r", "good": "v1", "bad": "v5", "job": JOB, "metric": "t.x"});
    if let Some(m) = max_runs {
        body["max_runs"] = json!(m);
    }
    let (s, b) = call(f, "POST", "/api/v1/bisects", Some(TOKEN), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    b
}

async fn bisect(f: &Fixture, id: i64) -> Value {
    let (s, b) = call(f, "GET", &format!("/api/v1/bisects/{id}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

/// The bisect's dashboard page.
async fn dashboard_page(f: &Fixture, id: i64) -> String {
    let (s, page) = request(&f.state, "GET", &format!("/bisects/{id}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    page
}

/// The commits of the fixture's main branch, oldest first (c1 = v1 … c5 = v5).
fn main_line(f: &Fixture) -> Vec<String> {
    let log = common::git(&f.repo, &["rev-list", "--reverse", "v5"]);
    log.lines().map(str::to_string).collect()
}

/// Plays the worker: claims each queued task, uploads `level(sha)` with a little
/// deterministic noise for every run, completes it, and advances the bisect, until `stop`
/// holds or the bisect ends (or 400 tasks pass, which would be a stall).
async fn drive(
    f: &Fixture,
    token: &str,
    id: i64,
    level: &HashMap<String, f64>,
    stop: impl Fn(&Value) -> bool,
) -> Value {
    drive_with_spread(f, token, id, level, 0.005, stop).await
}

/// [`drive`] with runs up to `spread` (relative) either side of the level.
async fn drive_with_spread(
    f: &Fixture,
    token: &str,
    id: i64,
    level: &HashMap<String, f64>,
    spread: f64,
    stop: impl Fn(&Value) -> bool,
) -> Value {
    let mut k = 0u32;
    for _ in 0..400 {
        scheduler::advance(&f.state, id).await.unwrap();
        let b = bisect(f, id).await;
        if stop(&b) || perfbisect_wire::api::status_is_final(b["status"].as_str().unwrap()) {
            return b;
        }
        let (s, task) = call(
            f,
            "POST",
            "/api/v1/worker/claim",
            Some(token),
            Some(json!({"wait_secs": 0})),
        )
        .await;
        if s == StatusCode::NO_CONTENT {
            continue;
        }
        assert_eq!(s, StatusCode::OK, "{task}");
        let tid = task["task_id"].as_i64().unwrap();
        let sha = task["sha"].as_str().unwrap().to_string();
        let pair = task["pair_sha"].as_str().map(str::to_string);
        let runs = task["runs"].as_u64().unwrap() as u32;
        let iterations = if pair.is_some() { 2 * runs } else { runs };
        for i in 0..iterations {
            let at = match (&pair, i % 2) {
                (Some(p), 1) => p.clone(),
                _ => sha.clone(),
            };
            k += 1;
            // ±spread around the level, never the same value twice in a row.
            let value = level[&at] * (1.0 + spread * (f64::from(k) * 2.399).sin());
            let now = chrono::Utc::now().to_rfc3339();
            let (s, v) = call(
                f,
                "POST",
                &format!("/api/v1/worker/tasks/{tid}/runs"),
                Some(token),
                Some(json!({"iteration": i, "sha": at, "completed": true,
                            "metrics": {"t.x": value}, "started_at": now, "finished_at": now})),
            )
            .await;
            assert_eq!(s, StatusCode::CREATED, "{v}");
        }
        let (s, v) = call(
            f,
            "POST",
            &format!("/api/v1/worker/tasks/{tid}/complete"),
            Some(token),
            Some(json!({"outcome": "done"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    panic!("bisect {id} neither ended nor reached the condition");
}

/// +10% from c4 on (the culprit), against ±0.5% noise.
fn levels(f: &Fixture) -> HashMap<String, f64> {
    main_line(f)
        .into_iter()
        .enumerate()
        .map(|(i, sha)| (sha, if i >= 3 { 110.0 } else { 100.0 }))
        .collect()
}

async fn budget_event(f: &Fixture, id: i64) -> String {
    sqlx::query_scalar("SELECT message FROM bisect_events WHERE bisect_id = $1 AND kind = 'budget' ORDER BY id LIMIT 1")
        .bind(id)
        .fetch_one(&f.state.db)
        .await
        .unwrap()
}

/// The number before `before` in `text`: `about 12 more runs` → 12 for " more runs".
fn number_before(text: &str, before: &str) -> u32 {
    let head = &text[..text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} in {text}"))];
    head.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_default_budget_follows_the_prediction_under_the_ceiling() {
    let mut f = with_repo().await;
    f.state.max_runs_ceiling = 300;
    let token = register(&f).await;
    let level = levels(&f);

    // Before the endpoints are measured the budget is the ceiling; a submitter's larger
    // number does not lift it.
    let b = submit(&f, None).await;
    let id = b["id"].as_i64().unwrap();
    assert_eq!(b["max_runs"], 300, "{b}");
    let above = submit(&f, Some(5000)).await;
    assert_eq!(above["max_runs"], 300, "{above}");

    // After the endpoints: the prediction is in the API, and the budget follows from it.
    let b = drive(&f, &token, id, &level, |b| {
        !b["findings"]["prediction"].is_null()
    })
    .await;
    let predicted = &b["findings"]["prediction"];
    assert!(predicted["runs"].is_u64(), "{b}");
    let event = budget_event(&f, id).await;
    let more = number_before(&event, " more runs");
    let used = number_before(&event, " runs used");
    let max_runs = b["max_runs"].as_u64().unwrap() as u32;
    assert_eq!(max_runs, 300.min(used + (3 * more).max(40)), "{event}");
    assert!(
        max_runs < 300,
        "a clear +10% step needs far less than the ceiling: {event}"
    );
    assert!(
        event.starts_with(&format!(
            "Budget set to {max_runs} runs from the prediction."
        )),
        "{event}"
    );
    // It keeps the step it was set from (in noise standard deviations), which sets it
    // again if later runs show a smaller step.
    let basis: Option<f64> = sqlx::query_scalar("SELECT budget_basis FROM bisects WHERE id = $1")
        .bind(id)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    let step = predicted["step_in_noise"].as_f64().unwrap();
    let basis = basis.expect("the basis is stored with the budget");
    assert!(
        (basis - step).abs() <= 1e-9 * step,
        "{basis} against {step}"
    );
    // The page shows the prediction and the budget.
    let page = dashboard_page(&f, id).await;
    assert!(page.contains("id=\"prediction\">about "), "{page}");
    assert!(page.contains(&format!("{max_runs} runs, ")), "{page}");

    // The budget is fixed once: it found the culprit within it.
    let done = drive(&f, &token, id, &level, |_| false).await;
    assert_eq!(done["status"], "found", "{done}");
    assert_eq!(done["max_runs"].as_u64().unwrap() as u32, max_runs);
    assert!(done["runs_done"].as_u64().unwrap() as u32 <= max_runs);
    assert_eq!(done["culprit"]["commit"]["sha"], main_line(&f)[3]);
}

#[tokio::test]
async fn a_submitters_budget_caps_the_predicted_one() {
    let mut f = with_repo().await;
    f.state.max_runs_ceiling = 300;
    let token = register(&f).await;
    let level = levels(&f);
    let id = submit(&f, Some(25)).await["id"].as_i64().unwrap();
    let b = drive(&f, &token, id, &level, |b| {
        !b["findings"]["prediction"].is_null()
    })
    .await;
    // The floor alone would allow 40 more than were used: the submitter's 25 wins.
    assert_eq!(b["max_runs"], 25, "{b}");
    let event = budget_event(&f, id).await;
    assert!(event.contains("the cap of 25"), "{event}");
}

#[tokio::test]
async fn a_bisect_that_runs_out_gives_its_credible_set_its_mass_and_the_cost_of_more() {
    let f = with_repo().await;
    let token = register(&f).await;
    let level = levels(&f);
    // The endpoints take 10 runs (two tasks of 5); two more cannot settle the search.
    let id = submit(&f, Some(12)).await["id"].as_i64().unwrap();
    let done = drive(&f, &token, id, &level, |_| false).await;
    assert_eq!(done["status"], "inconclusive", "{done}");
    assert_eq!(done["runs_done"], 12, "{done}");
    let reason = done["status_reason"].as_str().unwrap();
    let first = reason.lines().next().unwrap();
    assert!(
        first.starts_with(
            "No commit reached the target confidence within the budget of 12 runs: the "
        ),
        "{reason}"
    );
    assert!(first.contains("most likely commits hold "), "{reason}");
    assert!(first.contains("% of the probability; about "), "{reason}");
    assert!(first.ends_with(" would be needed."), "{reason}");
    // The last prediction stays in the findings: what more would cost.
    let more = done["findings"]["prediction"]["runs"]
        .as_u64()
        .expect("a prediction");
    assert!(
        first.contains(&format!("about {more} more runs")),
        "{reason}"
    );

    let (s, report) = request(
        &f.state,
        "GET",
        &format!("/api/v1/bisects/{id}/report"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{report}");
    // The report's prose is wrapped at 80 columns.
    let report = report.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(report.contains("of the probability together."), "{report}");
    assert!(
        report.contains("The budget of 12 runs ran out after 12 runs."),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "Reaching the 99.0% target would take about {more} more"
        )),
        "{report}"
    );
    let page = dashboard_page(&f, id).await;
    assert!(
        page.contains(&format!("id=\"prediction\">about {more} more runs")),
        "{page}"
    );
    assert!(page.contains("12 runs, 12 used"), "{page}");
}

#[tokio::test]
async fn a_range_too_noisy_for_the_ceiling_ends_early_and_says_why_first() {
    // Runs up to 30% either side of one level everywhere (a standard deviation of about
    // 21%): telling a 1% change from none would take some 3,500 runs, and the ceiling is
    // 300. The bisect ends once its endpoints hold a quarter of their share, and the
    // reason's first line (the one the CLI and the page show) says why it stopped early.
    let mut f = with_repo().await;
    f.state.max_runs_ceiling = 300;
    let token = register(&f).await;
    let level: HashMap<String, f64> = main_line(&f).into_iter().map(|s| (s, 100.0)).collect();
    let id = submit(&f, None).await["id"].as_i64().unwrap();
    let done = drive_with_spread(&f, &token, id, &level, 0.3, |_| false).await;
    assert_eq!(done["status"], "inconclusive", "{done}");
    let runs = done["runs_done"].as_u64().unwrap();
    assert!(runs < 300, "it spent the ceiling: {done}");
    let reason = done["status_reason"].as_str().unwrap();
    let first = reason.lines().next().unwrap();
    assert!(
        first.starts_with("No commit reached the target confidence"),
        "{reason}"
    );
    assert!(
        first.contains(&format!(
            "Ended after {runs} runs: the ceiling of 300 cannot settle this range at the noise of"
        )),
        "{reason}"
    );
    assert!(
        first.contains("ruling out a change of 1.0% takes about"),
        "{reason}"
    );
    // What more would cost stays in the findings.
    assert!(
        done["findings"]["prediction"]["runs"].as_u64().unwrap() > 900,
        "{done}"
    );
}
