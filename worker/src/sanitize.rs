//! What leaves the worker: the environment its children get, and the text it uploads.
//!
//! Job commands are the least trusted code on the host, and everything they print is served
//! by the API. So a child starts from an empty environment plus an allow-list (and the
//! worker's `PERFBISECT_*` settings that are not secrets), never the worker's own; and every
//! string the worker uploads is scrubbed of the secrets it knows (its enrollment and worker
//! tokens) and of NUL characters, which PostgreSQL text cannot hold.

use std::sync::{Arc, RwLock};

/// Variables a job may see from the worker's environment (besides `LC_*` and the
/// non-secret `PERFBISECT_*`): what shells, compilers and ssh need to work.
const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "TMPDIR",
    "SSH_AUTH_SOCK",
];

/// Parts of a variable's name that mark it as a secret.
const SECRET_MARKERS: &[&str] = &["TOKEN", "PASSWORD", "SECRET", "CREDENTIAL", "PASSPHRASE"];

/// Variables the operator added to the allow-list (`--pass-env`).
static EXTRA: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Adds `names` to the allow-list, once, at start.
pub fn pass_also(names: &[String]) {
    let _ = EXTRA.set(names.iter().map(|n| n.trim().to_string()).collect());
}

/// Is variable `name` passed on to job commands?
pub fn inherited(name: &str) -> bool {
    if EXTRA.get().is_some_and(|e| e.iter().any(|x| x == name)) {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    if SECRET_MARKERS.iter().any(|m| upper.contains(m)) {
        return false;
    }
    ALLOWED.contains(&name)
        || name.starts_with("LC_")
        || name.starts_with("CCACHE_")
        || name.starts_with("PERFBISECT_")
}

/// The part of this process's environment that children get.
pub fn child_env() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(inherited))
}

/// What replaces a secret in uploaded text.
pub const REDACTED: &str = "[redacted]";

/// The secrets this worker knows; shared by its clients, so a token learned at registration
/// is scrubbed from then on.
#[derive(Clone, Default)]
pub struct Scrubber {
    secrets: Arc<RwLock<Vec<String>>>,
}

impl Scrubber {
    pub fn add(&self, secret: &str) {
        // A short "secret" would redact ordinary words.
        if secret.len() >= 8 {
            let mut s = self.secrets.write().expect("scrubber lock");
            if !s.iter().any(|x| x == secret) {
                s.push(secret.to_string());
            }
        }
    }

    /// `text` without the known secrets and without NUL characters (U+FFFD instead).
    pub fn text(&self, text: &str) -> String {
        let mut out = text.replace('\0', "\u{FFFD}");
        for secret in self.secrets.read().expect("scrubber lock").iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// Every string (keys included) of a JSON document, scrubbed.
    pub fn json(&self, value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|v| self.json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, v)| (self.text(&k), self.json(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// Creates `path` with mode 600 from the start (a token is never readable by others, not
/// even briefly).
pub fn write_private(path: &std::path::Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_not_inherited() {
        assert!(!inherited("PERFBISECT_ENROLL_TOKEN"));
        assert!(!inherited("PERFBISECT_SMTP_PASSWORD"));
        assert!(!inherited("GITHUB_TOKEN"));
        assert!(!inherited("AWS_SECRET_ACCESS_KEY"));
        assert!(!inherited("DATABASE_URL"));
        assert!(inherited("PATH"));
        assert!(inherited("LC_ALL"));
        assert!(inherited("PERFBISECT_HOST_GROUP"));
    }

    #[test]
    fn scrubs_secrets_and_nul_everywhere_in_a_document() {
        let s = Scrubber::default();
        s.add("0123456789abcdef");
        s.add("short");
        let v = s.json(serde_json::json!({
            "log": "TOKEN=0123456789abcdef\0end",
            "env": {"k0123456789abcdef": ["x 0123456789abcdef y", 3]},
            "short": "short",
        }));
        let text = v.to_string();
        assert!(!text.contains("0123456789abcdef"), "{text}");
        assert!(!text.contains("\\u0000"), "{text}");
        assert!(text.contains("TOKEN=[redacted]\u{FFFD}end"), "{text}");
        assert!(text.contains("\"short\":\"short\""), "{text}");
    }
}
