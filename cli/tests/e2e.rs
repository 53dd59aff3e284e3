//! End to end with real processes: `perfbisect server` and `perfbisect worker` children,
//! the suite's own PostgreSQL, a generated git repository with a planted change, and the
//! REST API as a user would drive it. Also the faults: a worker killed mid-task and a
//! server killed mid-bisect.

mod common;

use common::{Lab, assert_found};
use perfbisect_cli::demo::watch;
use std::time::{Duration, Instant};

#[tokio::test]
async fn bisect_finds_the_planted_commit_end_to_end() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let ex = lab.example(21);
    let submitted = lab.submit(&ex, "").await;
    assert_eq!(submitted.candidates_total, ex.commits);
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    // Both workers took part, with their machine description.
    let hosts = lab.api.hosts().await.unwrap();
    let names: Vec<&str> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w1", "w2"]);
    assert!(hosts[0]["machine"]["threads"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn a_worker_killed_mid_task_is_replaced_after_its_lease() {
    let lab = Lab::new().await;
    let _server = lab.server(3).await;
    let mut doomed = lab.worker("doomed");
    let ex = lab.example(22);
    // Slow runs, so the kill lands in the middle of a task.
    let submitted = lab.submit(&ex, "sleep 0.3 && ").await;
    let start = Instant::now();
    let task_of_doomed = loop {
        let hosts = lab.api.hosts().await.unwrap();
        if let Some(t) = hosts[0]["current_task"].as_i64() {
            break t;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the worker never took a task"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    doomed.kill_hard();
    let _rescuer = lab.worker("rescuer");
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    // The killed worker's task went back to the queue and was run by the other host.
    let events: serde_json::Value = reqwest::get(format!(
        "{}/api/v1/bisects/{}/events",
        lab.api.base(),
        done.id
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let expired = events.as_array().unwrap().iter().any(|e| {
        e["kind"] == "lease_expired"
            && e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("task {task_of_doomed} "))
    });
    assert!(
        expired,
        "no lease expiry recorded for task {task_of_doomed}: {events:#}"
    );
}

#[tokio::test]
async fn a_server_killed_mid_bisect_resumes_from_postgres() {
    let lab = Lab::new().await;
    let mut server = lab.server(10).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let ex = lab.example(23);
    let submitted = lab.submit(&ex, "sleep 0.1 && ").await;
    let mid = lab
        .until(submitted.id, Duration::from_secs(300), |b| {
            b.runs_done >= 12
        })
        .await;
    assert!(
        !perfbisect_wire::api::status_is_final(&mid.status),
        "ended before the crash: {mid:?}"
    );
    server.kill_hard();
    let runs_before = mid.runs_done;
    let _server2 = lab.server(10).await;
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    assert!(
        done.runs_done > runs_before,
        "no work happened after the restart"
    );
}

/// A stopping server answers the long polls under way at once (no task): its stop does not
/// wait out every worker's poll (up to a minute), and the workers look elsewhere sooner.
#[tokio::test]
async fn a_stopping_server_answers_its_long_polls_at_once() {
    let lab = Lab::new().await;
    let mut server = lab.server(30).await;
    let base = lab.api.base().to_string();
    let client = reqwest::Client::new();
    let reg: serde_json::Value = client
        .post(format!("{base}/api/v1/worker/register"))
        .bearer_auth(common::ENROLL_TOKEN)
        .json(&serde_json::json!({"name": "poller", "host_group": "g"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = reg["token"].as_str().unwrap().to_string();
    let poll = tokio::spawn({
        let (client, url) = (client.clone(), format!("{base}/api/v1/worker/claim"));
        async move {
            let r = client
                .post(url)
                .bearer_auth(token)
                .json(&serde_json::json!({"wait_secs": 60}))
                .send()
                .await?;
            Ok::<_, reqwest::Error>(r.status().as_u16())
        }
    });
    // The poll waits once its first look is counted (the queue is empty).
    loop {
        let text = reqwest::get(format!("{base}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let looks = text
            .lines()
            .find_map(|l| l.strip_prefix("perfbisect_claim_seconds_count "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if looks >= 1.0 || poll.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!poll.is_finished(), "the poll ended before the stop");
    let stopped = tokio::task::spawn_blocking(move || server.stop(Duration::from_secs(20)))
        .await
        .unwrap();
    assert!(
        stopped.is_some_and(|s| s.success()),
        "the server did not stop by itself while a poll waited: {stopped:?}"
    );
    assert_eq!(poll.await.unwrap().unwrap(), 204, "the poll's answer");
}
