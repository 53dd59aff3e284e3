//! The API against its own OpenAPI document: schemathesis (PyPI; `scripts/test.sh` installs
//! it into `<target>/schemathesis-venv`) generates requests for every operation of the
//! document a real `perfbisect server` serves, with the submitter token, and checks every
//! answer: no 5xx, only documented status codes and content types, bodies that match their
//! schemas, and bad input refused. Bounded: a few examples per operation, one worker.

mod common;

use common::{API_TOKEN, Lab};
use std::path::PathBuf;
use std::process::Command;

/// The schemathesis executable: `PERFBISECT_SCHEMATHESIS`, else the test script's venv,
/// installed here when missing (pip from PyPI). `None` only without python3.
fn schemathesis() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PERFBISECT_SCHEMATHESIS") {
        return Some(p.into());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let venv = target.join("schemathesis-venv");
    let exe = venv.join("bin/schemathesis");
    if exe.exists() {
        return Some(exe);
    }
    if Command::new("python3").arg("--version").output().is_err() {
        return None;
    }
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(
        status.success(),
        "python3 -m venv {} failed",
        venv.display()
    );
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "-q", concat!("schemathesis==", "4.32.5")])
        .status()
        .expect("pip install schemathesis");
    assert!(status.success(), "pip install schemathesis failed");
    Some(exe)
}

#[tokio::test]
async fn the_api_conforms_to_its_openapi_document() {
    let Some(exe) = schemathesis() else {
        eprintln!("SKIPPED: python3 is not installed, so schemathesis cannot run");
        return;
    };
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    // Something to read: a repository and a queued bisect (no worker runs it).
    let ex = lab.example(3);
    let b = lab.submit(&ex, "").await;
    assert!(b.id > 0);
    let base = lab.api.base().to_string();
    let report = lab.path().join("schemathesis");
    let workdir = lab.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&exe)
            // Its cache (`.schemathesis/`) goes to the lab's directory, not the source tree.
            .current_dir(&workdir)
            .arg("run")
            .arg(format!("{base}/api/openapi.json"))
            .args(["--url", &base])
            .args(["-H", &format!("Authorization: Bearer {API_TOKEN}")])
            .args(["--checks", "all"])
            // Operations that need another kind of token (worker, operator) answer 401 or
            // 403 to the submitter's, as documented; these checks assume one token fits all.
            .args(["--exclude-checks", "ignored_auth,positive_data_acceptance"])
            .args(["--max-examples", "8", "--workers", "1", "--seed", "1"])
            .args(["--phases", "examples,coverage,fuzzing"])
            .args(["--request-timeout", "30"])
            .args(["--max-response-time", "25"])
            .args(["--suppress-health-check", "all", "--no-color"])
            .arg("--report-dir")
            .arg(&report)
            .output()
            .expect("running schemathesis")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        lab.log("server")
    );
    // It really ran the operations (a run that tested nothing would also exit 0).
    assert!(stdout.contains("passed"), "{stdout}");
}
