//! The dashboard in a real browser: headless Chromium, driven through chromedriver
//! (WebDriver, with fantoccini), against the end-to-end lab — a real `perfbisect server`,
//! real workers, the generated example repository with its planted change, and a watched
//! repository pushed to over time.
//!
//! Each test writes screenshots of the pages it visits to `target/screenshots/` at the
//! workspace root, at a laptop's and a phone's window size.
//!
//! Needs the Debian packages `chromium` and `chromium-driver` (scripts/test.sh installs them
//! from scripts/test-packages).

mod common;

use common::{API_TOKEN, Lab};
use fantoccini::{Client, ClientBuilder, Locator};
use perfbisect_cli::example::{self, JOB_YAML};
use perfbisect_cli::processes::free_port;
use perfbisect_cli::watch_example::{self, WatchHistoryOptions};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_dashboards_demo_example_is_the_demo_job() {
    // The submit form's "demo" example must stay the job the example repository needs.
    assert_eq!(include_str!("../../web/examples/demo.yaml"), JOB_YAML);
}

#[tokio::test]
async fn a_bisect_submitted_through_the_form_ends_with_the_planted_culprit() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let ex = lab.example(31);
    register(&lab, &ex).await;
    let browser = Browser::start(&lab).await;
    let c = &browser.client;

    // Submit through the form, with the token saved in the browser and the demo example.
    c.goto(&lab.url("/submit")).await.unwrap();
    save_token(c).await;
    fill(c, "#repository", "example").await;
    fill(c, "#good", "good").await;
    fill(c, "#bad", "bad").await;
    click(c, "button.example[data-example=demo]").await;
    assert_eq!(value_of(c, "#job").await, JOB_YAML);
    assert_eq!(
        value_of(c, "#metric").await,
        example::METRIC,
        "the example suggests its metric"
    );
    // Slower runs, so that the hosts and queue pages catch the workers at work.
    c.execute(
        "const job = document.getElementById('job');
         job.value = job.value.replace('command: ./bench', 'command: sleep 0.5 && ./bench');",
        vec![],
    )
    .await
    .unwrap();
    browser.screenshots("submit").await;
    click(c, "#submit-button").await;
    let id: i64 = wait_js(
        c,
        "const m = location.pathname.match(/^\\/bisects\\/(\\d+)$/); return m && Number(m[1]);",
        Duration::from_secs(60),
        "the form to lead to the new bisect's page",
    )
    .await
    .as_i64()
    .unwrap();
    let detail_tab = c.window().await.unwrap();

    // The page follows the bisect without reloading: a marker set now must survive, and the
    // run count must change on the page while it stays.
    c.execute("window.notReloaded = true;", vec![])
        .await
        .unwrap();
    let first_runs = runs_on_page(c).await;

    // Progress moves while the bisect runs, not only at its end: the uncertainty left (bits)
    // falls and the top candidate's probability rises on the same, never reloaded, page.
    let first = wait_js(
        c,
        "const p = document.getElementById('progress');
         return p && [Number(p.dataset.entropy), Number(p.dataset.top)];",
        Duration::from_secs(300),
        "the progress measures",
    )
    .await;
    let (bits0, top0) = (first[0].as_f64().unwrap(), first[1].as_f64().unwrap());

    // Meanwhile, in another tab, while the bisect has work to do: the hosts page lists both
    // workers, one of them busy with this bisect, and the queue shows its tasks.
    let tab = c.new_window(true).await.unwrap();
    c.switch_to_window(tab.handle).await.unwrap();
    c.goto(&lab.url("/hosts")).await.unwrap();
    for name in ["w1", "w2"] {
        let row = text_of(c, &format!("tr[data-host={name}]")).await;
        assert!(row.contains("local"), "{name} in group local: {row}");
        assert!(!row.contains("stale"), "{name} is alive: {row}");
    }
    reload_until(
        c,
        &format!(
            "return document.querySelector('tr.host-busy a[href=\"/bisects/{id}\"]') && true;"
        ),
        "a host busy with the bisect",
    )
    .await;
    browser.screenshots("hosts").await;
    c.goto(&lab.url("/queue")).await.unwrap();
    reload_until(
        c,
        &format!(
            "return document.querySelector('tr.task-running a[href=\"/bisects/{id}\"]') && true;"
        ),
        "a running task of the bisect in the queue",
    )
    .await;
    browser.screenshots("queue").await;
    c.close_window().await.unwrap();
    c.switch_to_window(detail_tab).await.unwrap();

    wait_js(
        c,
        &format!(
            "return window.notReloaded && Number(document.getElementById('runs').dataset.runs) >= {} && true;",
            first_runs + 10
        ),
        Duration::from_secs(300),
        "the run count on the page to grow",
    )
    .await;
    browser.screenshots("bisect-running").await;

    let moved = wait_js(
        c,
        &format!(
            "const s = document.getElementById('status').dataset.status;
             const p = document.getElementById('progress');
             if (['found', 'not_reproduced', 'inconclusive', 'failed', 'cancelled'].includes(s)) {{
               return 'ended';
             }}
             return p && Number(p.dataset.entropy) < {bits0} - 0.5
                      && Number(p.dataset.top) > {top0} && 'moved';"
        ),
        Duration::from_secs(600),
        "the progress measures to move",
    )
    .await;
    assert_eq!(
        moved, "moved",
        "the bisect ended before its progress moved from {bits0} bits, top {top0}"
    );
    browser.screenshots("bisect-progress").await;

    // The same page, never reloaded, ends with the planted culprit.
    let status = wait_js(
        c,
        "const s = document.getElementById('status').dataset.status;
         return ['found', 'not_reproduced', 'inconclusive', 'failed', 'cancelled'].includes(s) && s;",
        Duration::from_secs(600),
        "the bisect to end",
    )
    .await;
    assert_eq!(status, "found", "page: {}", text_of(c, "#live").await);
    assert_eq!(
        c.execute("return window.notReloaded === true;", vec![])
            .await
            .unwrap(),
        json!(true),
        "the page was reloaded"
    );
    assert_eq!(text_of(c, "#culprit-sha").await, ex.planted);
    let api = lab.api.bisect(id).await.unwrap();
    common::assert_found(&api, &ex, &lab);
    let culprit = text_of(c, "#culprit").await;
    assert!(
        culprit.contains(&api.culprit.as_ref().unwrap().commit.subject)
            && culprit.contains("Example Developer"),
        "culprit panel: {culprit}"
    );
    // The plot marks the culprit; the table has its row, marked too, with its numbers.
    c.find(Locator::Css("svg.plot line.culprit")).await.unwrap();
    let row = text_of(c, &format!("tr.is-culprit[id=commit-{}]", ex.planted)).await;
    assert!(row.contains("bad"), "culprit row: {row}");
    let plotted = c
        .execute(
            "return document.querySelectorAll('svg.plot g.commit circle').length;",
            vec![],
        )
        .await
        .unwrap();
    let samples: usize = api.commits.iter().map(|c| c.n).sum();
    assert_eq!(plotted, json!(samples), "every sample is plotted");
    assert!(
        !is_displayed(c, "#cancel").await,
        "no cancel button on an ended bisect"
    );
    // The change heads the page: the planted +6% of a higher-is-better score.
    assert_eq!(
        attr_of(c, "#change", "data-kind").await.as_deref(),
        Some("improvement")
    );
    let up_colour = colour_of(c, "#change .change-pct").await;
    assert!(
        text_of(c, "#change").await.contains('+'),
        "{}",
        text_of(c, "#change").await
    );
    browser.screenshots("bisect").await;

    // On a phone the whole plot fits: the culprit line and every sample are on screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    let fit = c
        .execute(
            "const wrap = document.querySelector('.plot-wrap').getBoundingClientRect();
             const line = document.querySelector('svg.plot line.culprit').getBoundingClientRect();
             const dots = Array.from(document.querySelectorAll('svg.plot g.commit circle'))
               .map(e => e.getBoundingClientRect());
             const right = Math.max(...dots.map(r => r.right));
             const left = Math.min(...dots.map(r => r.left));
             return { inner: window.innerWidth, wrapLeft: wrap.left, wrapRight: wrap.right,
                      lineLeft: line.left, lineRight: line.right, dotsLeft: left, dotsRight: right };",
            vec![],
        )
        .await
        .unwrap();
    let n = |k: &str| fit[k].as_f64().unwrap();
    assert!(
        n("lineLeft") >= n("wrapLeft")
            && n("lineRight") <= n("wrapRight")
            && n("lineRight") <= n("inner"),
        "the culprit line is outside the plot on a phone: {fit}"
    );
    assert!(
        n("dotsLeft") >= 0.0 && n("dotsRight") <= n("inner"),
        "samples fall off a phone's screen: {fit}"
    );
    browser.screenshots("bisect-plot").await;

    // A regression reads differently from an improvement: a planted −8% of the same score.
    let down = example::generate(
        &lab.path().join("example-down.git"),
        &example::ExampleOptions {
            commits: 60,
            seed: 34,
            change: -0.08,
            broken_commits: 0,
            ..Default::default()
        },
    )
    .unwrap();
    lab.api
        .add_repository("example-down", &down.path.display().to_string())
        .await
        .unwrap();
    let regression = lab
        .api
        .submit(&perfbisect_wire::api::SubmitBisect {
            repository: "example-down".into(),
            good: "good".into(),
            bad: "bad".into(),
            job: JOB_YAML.into(),
            metric: example::METRIC.into(),
            direction: None,
            magnitude_pct: None,
            confidence: None,
            max_runs: None,
            notify: vec![],
            use_merge_base: false,
            first_parent: false,
        })
        .await
        .unwrap();
    // Once the engine has judged the endpoints, not at their first three runs each: the
    // example's runs are noisy with rare 15%-slow ones, and three runs a side once read this
    // −8% step as +2.4% (a slow run among the good endpoint's three).
    let measured = lab
        .until(regression.id, Duration::from_secs(300), |b| {
            b.measured_change.is_some() && b.status != "reproducing"
        })
        .await;
    assert_eq!(
        measured.measured_change.as_ref().map(|m| m.kind.as_str()),
        Some("regression"),
        "{measured:?}"
    );
    c.goto(&lab.url(&format!("/bisects/{}", regression.id)))
        .await
        .unwrap();
    assert_eq!(
        attr_of(c, "#change", "data-kind").await.as_deref(),
        Some("regression")
    );
    let down_colour = colour_of(c, "#change .change-pct").await;
    assert_ne!(
        up_colour, down_colour,
        "a regression and an improvement look alike"
    );
    assert!(text_of(c, "#change").await.contains('\u{2212}'));
    browser.screenshots("bisect-regression").await;
    lab.api.cancel(regression.id).await.unwrap();

    // The list shows it with its culprit.
    c.goto(&lab.url("/bisects")).await.unwrap();
    let listed = text_of(c, &format!("tr[data-bisect=\"{id}\"]")).await;
    assert!(
        listed.contains("found")
            && listed.contains(&ex.planted[..12])
            && listed.contains("example")
            && listed.contains('+'),
        "list row (with its change): {listed}"
    );
    browser.screenshots("bisects").await;
    browser.stop().await;
}

#[tokio::test]
async fn a_bad_revision_is_refused_next_to_its_field() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let ex = lab.example(32);
    register(&lab, &ex).await;
    let browser = Browser::start(&lab).await;
    let c = &browser.client;
    c.goto(&lab.url("/submit")).await.unwrap();
    save_token(c).await;
    fill(c, "#repository", "example").await;
    fill(c, "#good", "no-such-revision").await;
    fill(c, "#bad", "bad").await;
    click(c, "button.example[data-example=demo]").await;
    click(c, "#submit-button").await;
    let message = wait_text(c, "#good-error").await;
    assert!(message.contains("no-such-revision"), "{message}");
    assert_eq!(
        c.find(Locator::Css("#good"))
            .await
            .unwrap()
            .attr("aria-invalid")
            .await
            .unwrap()
            .as_deref(),
        Some("true")
    );
    assert_eq!(
        text_of(c, "#bad-error").await,
        "",
        "only the bad field is marked"
    );
    assert_eq!(c.current_url().await.unwrap().path(), "/submit");
    browser.screenshots("submit-error").await;

    // A job spec the API refuses: the message lands in the job box, naming the key.
    fill(c, "#good", "good").await;
    c.execute(
        "const job = document.getElementById('job');
         job.value = job.value.replace('runs_per_task: 5', 'runs_per_task: 0');",
        vec![],
    )
    .await
    .unwrap();
    click(c, "#submit-button").await;
    let message = wait_text(c, "#job-error").await;
    assert!(message.starts_with("job.runs_per_task"), "{message}");
    assert_eq!(text_of(c, "#good-error").await, "", "the old error is gone");

    // Nothing was stored by the refused submissions.
    assert_eq!(lab.api.list(None).await.unwrap().total, 0);
    browser.stop().await;
}

#[tokio::test]
async fn cancel_and_rerun_from_the_bisect_page() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    // No worker: the bisect waits for one, so it is still running when cancelled.
    let ex = lab.example(33);
    let submitted = lab.submit(&ex, "").await;
    let browser = Browser::start(&lab).await;
    let c = &browser.client;
    let page = lab.url(&format!("/bisects/{}", submitted.id));

    // Without a token there is no cancel button, only the hint.
    c.goto(&page).await.unwrap();
    assert!(!is_displayed(c, "#cancel").await);
    assert!(is_displayed(c, "#cancel-hint").await);

    c.goto(&lab.url("/submit")).await.unwrap();
    save_token(c).await;
    c.goto(&page).await.unwrap();
    assert!(is_displayed(c, "#cancel").await);
    click(c, "#cancel").await;
    c.accept_alert().await.unwrap();
    let status = wait_js(
        c,
        "const s = document.getElementById('status').dataset.status; return s === 'cancelled' && s;",
        Duration::from_secs(60),
        "the page to show the bisect cancelled",
    )
    .await;
    assert_eq!(status, "cancelled");
    assert_eq!(
        lab.api.bisect(submitted.id).await.unwrap().status,
        "cancelled"
    );
    assert!(
        !is_displayed(c, "#cancel").await,
        "an ended bisect cannot be cancelled"
    );

    // Re-run opens the form filled with the same range, job and metric.
    click(c, "#rerun").await;
    wait_js(
        c,
        "return location.pathname === '/submit' && document.getElementById('job').value.length > 0;",
        Duration::from_secs(30),
        "the re-run form",
    )
    .await;
    assert_eq!(value_of(c, "#repository").await, "example");
    assert_eq!(value_of(c, "#good").await, "good");
    assert_eq!(value_of(c, "#bad").await, "bad");
    assert_eq!(value_of(c, "#metric").await, example::METRIC);
    assert_eq!(value_of(c, "#job").await, JOB_YAML);
    browser.stop().await;
}

#[tokio::test]
async fn a_watch_made_and_changed_through_its_form_charts_its_change_points() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    // A short history: the first planted change comes with push 2 and is confirmed by push 3.
    let opts = WatchHistoryOptions {
        pushes: 4,
        first_change_push: 2,
        second_change_push: 4,
        ..Default::default()
    };
    let history = watch_example::generate(&lab.path().join("watched.git"), &opts).unwrap();
    lab.api
        .add_repository("watched", &history.path.display().to_string())
        .await
        .unwrap();
    let browser = Browser::start(&lab).await;
    let c = &browser.client;

    // Create through the form on the watches page, with the token saved in the browser.
    c.goto(&lab.url("/submit")).await.unwrap();
    save_token(c).await;
    c.goto(&lab.url("/watches")).await.unwrap();
    fill(c, "#w-name", "nightly").await;
    fill(c, "#w-repository", "watched").await;
    fill(c, "#w-branch", "main").await;
    c.execute(
        "document.getElementById('w-job').value = arguments[0];",
        vec![json!(JOB_YAML)],
    )
    .await
    .unwrap();
    fill(c, "#w-metrics", &format!("{} either 3", example::METRIC)).await;
    fill(c, "#w-runs", "3").await;
    fill(c, "#w-cadence", "3600").await;
    fill(c, "#w-sample", "1").await;
    fill(c, "#w-backfill", "5").await;
    fill(c, "#w-recipients", "team@example.org, lead@example.org").await;
    // A refused value first: the API's message lands next to its field, which is marked
    // invalid, and nothing is stored.
    fill(c, "#w-runs", "0").await;
    click(c, "#watch-form button[type=submit]").await;
    let message = wait_text(c, "#w-runs-error").await;
    assert!(message.contains("between 1 and 100"), "{message}");
    assert_eq!(
        attr_of(c, "#w-runs", "aria-invalid").await.as_deref(),
        Some("true")
    );
    assert_eq!(text_of(c, "#w-name-error").await, "", "only the bad field");
    assert_eq!(text_of(c, "#form-error").await, "");
    assert_eq!(c.current_url().await.unwrap().path(), "/watches");
    assert!(lab.api.watches().await.unwrap().is_empty());
    browser.screenshots("watch-new-error").await;
    fill(c, "#w-runs", "3").await;
    browser.screenshots("watch-new").await;
    click(c, "#watch-form button[type=submit]").await;
    let id = wait_js(
        c,
        "const m = location.pathname.match(/^\\/watches\\/(\\d+)$/); return m && Number(m[1]);",
        Duration::from_secs(30),
        "the form to lead to the new watch's page",
    )
    .await
    .as_i64()
    .unwrap();
    let w = lab.api.watch(id).await.unwrap();
    assert_eq!(w.name, "nightly");
    assert_eq!(w.repository, "watched");
    assert_eq!(w.branch, "main");
    assert_eq!(w.metrics.len(), 1);
    assert_eq!(w.metrics[0].name, example::METRIC);
    assert_eq!(w.metrics[0].direction, "either");
    assert_eq!(w.metrics[0].threshold_pct, 3.0);
    assert_eq!(
        (
            w.runs_per_head,
            w.cadence_secs,
            w.sample_commits,
            w.backfill
        ),
        (3, 3600, 1, 5)
    );
    assert_eq!(w.recipients, vec!["team@example.org", "lead@example.org"]);
    // And the watches page lists it, linked to its page.
    c.goto(&lab.url("/watches")).await.unwrap();
    let row = text_of(c, &format!("tr[data-watch=\"{id}\"]")).await;
    assert!(
        row.contains("nightly") && row.contains("watched") && row.contains("main"),
        "{row}"
    );
    assert_eq!(
        attr_of(c, &format!("tr[data-watch=\"{id}\"] a"), "href")
            .await
            .as_deref(),
        Some(format!("/watches/{id}").as_str())
    );

    // The server's first poll finds the head and 5 ancestors; the pushes come by webhook.
    let start = Instant::now();
    while lab.api.watch(id).await.unwrap().heads < 6 {
        assert!(start.elapsed() < Duration::from_secs(30), "no first poll");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for k in 1..history.pushes.len() {
        history.push(k).unwrap();
        lab.api.push_watch(id).await.unwrap();
    }
    let start = Instant::now();
    let change = loop {
        let changes = lab.api.changes(Some(id), false).await.unwrap();
        if let Some(ch) = changes.into_iter().find(|ch| ch.bisect_id.is_some()) {
            break ch;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no change opened a bisect:\n{}",
            lab.log("server")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let bisect = change.bisect_id.unwrap();

    // The chart: every run a dot, and the change point marked between its two commits,
    // linked to its bisect.
    c.goto(&lab.url(&format!("/watches/{id}"))).await.unwrap();
    let dots = c
        .execute(
            "return document.querySelectorAll('svg.series circle.run').length;",
            vec![],
        )
        .await
        .unwrap()
        .as_u64()
        .unwrap();
    assert!(dots >= 3 * 6, "{dots} runs drawn");
    // A title is not rendered text: read it from the document.
    let mark = wait_js(
        c,
        &format!(
            "const t = document.querySelector('svg.series a[href=\"/bisects/{bisect}\"] g.change title');
             return t && t.textContent;"
        ),
        Duration::from_secs(5),
        "the change point's mark linked to its bisect",
    )
    .await
    .as_str()
    .unwrap()
    .to_string();
    assert!(
        mark.contains(&change.before_sha[..8]) && mark.contains(&change.after_sha[..8]),
        "{mark} for {change:?}"
    );
    assert!(mark.contains(&format!("bisect #{bisect}")), "{mark}");
    browser.screenshots("watch-chart").await;
    // The mark leads to the bisect's page.
    c.execute(
        &format!(
            "document.querySelector('svg.series a[href=\"/bisects/{bisect}\"]')
               .dispatchEvent(new MouseEvent('click', {{bubbles: true}}));"
        ),
        vec![],
    )
    .await
    .unwrap();
    wait_js(
        c,
        &format!("return location.pathname === '/bisects/{bisect}';"),
        Duration::from_secs(30),
        "the change point's link to its bisect",
    )
    .await;

    // Change it through the form on its page: a refused value is shown and stores nothing,
    // then an edit sticks.
    c.goto(&lab.url(&format!("/watches/{id}"))).await.unwrap();
    fill(c, "#w-runs", "0").await;
    click(c, "#watch-form button[type=submit]").await;
    let message = wait_text(c, "#w-runs-error").await;
    assert!(message.contains("between 1 and 100"), "{message}");
    assert_eq!(lab.api.watch(id).await.unwrap().runs_per_head, 3);
    // A refusal inside a list names the entry, next to the whole list's field.
    fill(c, "#w-runs", "3").await;
    fill(c, "#w-metrics", &format!("{} sideways 3", example::METRIC)).await;
    click(c, "#watch-form button[type=submit]").await;
    let message = wait_text(c, "#w-metrics-error").await;
    assert!(message.starts_with("metrics[0].direction: "), "{message}");
    assert_eq!(
        text_of(c, "#w-runs-error").await,
        "",
        "the old error is gone"
    );
    assert_eq!(
        lab.api.watch(id).await.unwrap().metrics[0].direction,
        "either"
    );
    c.execute("window.notReloaded = true;", vec![])
        .await
        .unwrap();
    fill(c, "#w-runs", "4").await;
    fill(
        c,
        "#w-metrics",
        &format!("{} decrease 4.5", example::METRIC),
    )
    .await;
    fill(c, "#w-recipients", "lead@example.org").await;
    click(c, "#watch-form input[name=enabled]").await;
    click(c, "#watch-form button[type=submit]").await;
    wait_js(
        c,
        "return !window.notReloaded && document.readyState === 'complete';",
        Duration::from_secs(30),
        "the watch page to reload after the change",
    )
    .await;
    let w = lab.api.watch(id).await.unwrap();
    assert_eq!(w.runs_per_head, 4);
    assert_eq!(w.metrics[0].direction, "decrease");
    assert_eq!(w.metrics[0].threshold_pct, 4.5);
    assert_eq!(w.recipients, vec!["lead@example.org"]);
    assert!(!w.enabled, "unticked: paused");
    assert_eq!(
        value_of(c, "#w-runs").await,
        "4",
        "the page shows the change"
    );
    assert!(text_of(c, "h1").await.contains("paused"));
    browser.stop().await;
}

// ---- helpers: the lab's side ----

async fn register(lab: &Lab, ex: &example::ExampleRepo) {
    lab.api
        .add_repository("example", &ex.path.display().to_string())
        .await
        .unwrap();
}

trait LabUrl {
    fn url(&self, path: &str) -> String;
}

impl LabUrl for Lab {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api.base())
    }
}

// ---- helpers: the page's side ----

async fn save_token(c: &Client) {
    fill(c, "#token-input", API_TOKEN).await;
    click(c, "#token-form button[type=submit]").await;
    let state = text_of(c, "#token-state").await;
    assert!(state.contains("saved"), "{state}");
}

async fn fill(c: &Client, css: &str, text: &str) {
    let e = c.find(Locator::Css(css)).await.unwrap();
    e.clear().await.unwrap();
    e.send_keys(text).await.unwrap();
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

async fn value_of(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default()
}

async fn text_of(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .text()
        .await
        .unwrap()
}

async fn attr_of(c: &Client, css: &str, name: &str) -> Option<String> {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .attr(name)
        .await
        .unwrap()
}

/// The computed text colour of an element, as the browser paints it.
async fn colour_of(c: &Client, css: &str) -> String {
    c.execute(
        &format!("return getComputedStyle(document.querySelector('{css}')).color;"),
        vec![],
    )
    .await
    .unwrap()
    .as_str()
    .unwrap()
    .to_string()
}

async fn is_displayed(c: &Client, css: &str) -> bool {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .is_displayed()
        .await
        .unwrap()
}

async fn runs_on_page(c: &Client) -> u64 {
    c.execute(
        "return Number(document.getElementById('runs').dataset.runs);",
        vec![],
    )
    .await
    .unwrap()
    .as_u64()
    .unwrap()
}

/// Runs `script` (a function body) until it returns something other than null, false or
/// undefined, and returns that; fails after `limit`.
async fn wait_js(c: &Client, script: &str, limit: Duration, what: &str) -> Value {
    let start = Instant::now();
    loop {
        let v = c.execute(script, vec![]).await.unwrap();
        if !matches!(v, Value::Null | Value::Bool(false)) {
            return v;
        }
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the element has text, and returns it.
async fn wait_text(c: &Client, css: &str) -> String {
    let script =
        format!("const e = document.querySelector('{css}'); return (e && e.textContent) || null;");
    let v = wait_js(c, &script, Duration::from_secs(60), css).await;
    v.as_str().unwrap().to_string()
}

/// Reloads a page that does not update itself until `script` holds (a minute at most).
async fn reload_until(c: &Client, script: &str, what: &str) {
    let start = Instant::now();
    loop {
        if !matches!(
            c.execute(script, vec![]).await.unwrap(),
            Value::Null | Value::Bool(false)
        ) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never saw {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        c.refresh().await.unwrap();
    }
}

// ---- the browser ----

/// Window sizes the screenshots are taken at.
const SIZES: &[(&str, u32, u32)] = &[("laptop", 1366, 860), ("phone", 390, 844)];

/// Headless Chromium as root, with what keeps it off the network and out of the sandbox
/// it cannot have as root (see the ecosystem notes).
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

struct Browser {
    client: Client,
    driver: Driver,
    _profile: tempfile::TempDir,
}

/// chromedriver in a process group of its own, so that the Chromium it starts goes with it
/// even when a test fails before closing the session.
struct Driver {
    child: Child,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots")
}

impl Browser {
    async fn start(lab: &Lab) -> Browser {
        let (Some(chromium), Some(chromedriver)) = (on_path("chromium"), on_path("chromedriver"))
        else {
            panic!(
                "the browser tests need Chromium and chromedriver: install the Debian packages \
                 `chromium` and `chromium-driver` (apt-get install chromium chromium-driver); \
                 scripts/test.sh installs them from scripts/test-packages"
            );
        };
        let port = free_port().unwrap();
        let log = std::fs::File::create(lab.path().join("chromedriver.log")).unwrap();
        let child = {
            use std::os::unix::process::CommandExt;
            Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()))
        };
        let driver = Driver { child };
        let url = format!("http://127.0.0.1:{port}");
        wait_ready(&url).await;

        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push(format!("--window-size={},{}", SIZES[0].1, SIZES[0].2));
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": chromium, "args": args }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "no WebDriver session: {e}\nchromedriver log:\n{}",
                    lab.log("chromedriver")
                )
            });
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Screenshots of the whole current page at every size, as `<name>-<size>.png`.
    async fn screenshots(&self, name: &str) {
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (size, w, h) in SIZES {
            self.client.set_window_size(*w, *h).await.unwrap();
            // The window's height is the page's plus whatever the browser keeps for itself.
            let full = self
                .client
                .execute(
                    "window.scrollTo(0, 0);
                     return Math.ceil(document.documentElement.scrollHeight
                                      + window.outerHeight - window.innerHeight);",
                    vec![],
                )
                .await
                .unwrap()
                .as_u64()
                .unwrap_or(*h as u64) as u32;
            self.client
                .set_window_size(*w, full.clamp(*h, 8000))
                .await
                .unwrap();
            let png = self.client.screenshot().await.unwrap();
            std::fs::write(dir.join(format!("{name}-{size}.png")), png).unwrap();
        }
        let (_, w, h) = SIZES[0];
        self.client.set_window_size(w, h).await.unwrap();
    }

    async fn stop(self) {
        self.client.close().await.unwrap();
        drop(self.driver);
    }
}

/// Waits until chromedriver answers that it is ready.
async fn wait_ready(url: &str) {
    let start = Instant::now();
    loop {
        if let Ok(r) = reqwest::get(format!("{url}/status")).await
            && let Ok(v) = r.json::<Value>().await
            && v["value"]["ready"] == json!(true)
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "chromedriver did not become ready at {url}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
