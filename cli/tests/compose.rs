//! `docker-compose.yml` as written: valid against the Compose Specification's JSON schema
//! (vendored in `tests/data`, validated by python3-jsonschema), with what a deployment needs
//! (restart policies, healthchecks, stable worker names, writable volumes, one variable for
//! the public URL), and accepted by `docker compose config` where a container engine runs.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// (valid, violations printed, the document as JSON).
fn check(compose: &Path) -> (bool, String, Value) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let out = Command::new("python3")
        .arg(dir.join("support/check_compose.py"))
        .arg(dir.join("data/compose-spec.schema.json"))
        .arg(compose)
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc = stderr
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!("the checker needs python3-jsonschema and python3-yaml (scripts/test-packages): {stderr}")
        });
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        doc,
    )
}

#[test]
fn the_compose_file_follows_the_compose_specification() {
    let (valid, violations, _) = check(&root().join("docker-compose.yml"));
    assert!(valid, "docker-compose.yml: {violations}");
    // The validator is real: a service key the specification does not know is refused.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("docker-compose.yml");
    let text = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
    std::fs::write(
        &broken,
        text.replacen(
            "    restart: unless-stopped\n",
            "    restart_policy: always\n",
            1,
        ),
    )
    .unwrap();
    let (valid, violations, _) = check(&broken);
    assert!(!valid);
    assert!(violations.contains("restart_policy"), "{violations}");
}

#[test]
fn the_compose_file_has_what_a_deployment_needs() {
    let (_, _, doc) = check(&root().join("docker-compose.yml"));
    let services = doc["services"].as_object().unwrap();
    for (name, s) in services {
        assert_eq!(
            s["restart"], "unless-stopped",
            "{name} has no restart policy"
        );
        assert!(
            s.get("deploy").is_none(),
            "{name}: replicas get container ids as names"
        );
    }
    for name in ["postgres", "server"] {
        assert!(services[name]["healthcheck"]["test"].is_array(), "{name}");
    }
    assert_eq!(
        services["server"]["environment"]["PERFBISECT_PUBLIC_URL"],
        "${PERFBISECT_PUBLIC_URL:-http://localhost:8080}"
    );
    let workers: Vec<(&String, &Value)> = services
        .iter()
        .filter(|(n, _)| n.starts_with("worker"))
        .collect();
    assert!(workers.len() >= 2);
    let mut names = Vec::new();
    for (service, w) in &workers {
        let args: Vec<&str> = w["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let at = args.iter().position(|a| *a == "--name").expect("--name");
        assert_eq!(
            args[at + 1],
            service.as_str(),
            "a worker is named after its service"
        );
        assert_eq!(w["hostname"], service.as_str());
        names.push(args[at + 1]);
        assert_eq!(
            w["depends_on"]["server"]["condition"], "service_healthy",
            "{service}"
        );
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), workers.len(), "worker names are unique");
    // Every volume mounted by the server or a worker is a directory the image creates and
    // gives to its user (Docker copies that ownership into a fresh named volume).
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let chown = dockerfile
        .lines()
        .find(|l| l.contains("chown perfbisect:perfbisect"))
        .expect("the Dockerfile gives the volume mount points to its user");
    assert!(dockerfile.contains("USER perfbisect"));
    for (name, s) in services {
        if name == "postgres" || name == "mail" {
            continue;
        }
        for v in s["volumes"].as_array().unwrap() {
            let target = v.as_str().unwrap().split(':').nth(1).unwrap();
            assert!(
                chown.contains(target),
                "{name}: {target} is not made writable"
            );
        }
    }
}

/// `docker compose config` parses and interpolates the file as Docker would; it only runs
/// where a container engine and the compose plugin answer (the development machines of
/// this project have neither; the schema test above runs everywhere).
#[test]
fn docker_compose_config_accepts_the_file_where_an_engine_exists() {
    let engine = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success());
    let plugin = Command::new("docker")
        .args(["compose", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !(engine && plugin) {
        eprintln!(
            "no container engine with the compose plugin here: docker compose config not run"
        );
        return;
    }
    let out = Command::new("docker")
        .args(["compose", "-f"])
        .arg(root().join("docker-compose.yml"))
        .args(["config", "--quiet"])
        .env("PERFBISECT_API_TOKEN", "x")
        .env("PERFBISECT_ENROLL_TOKEN", "y")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
