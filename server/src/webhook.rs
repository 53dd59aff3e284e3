//! Push webhooks from forges, which cannot send a bearer token: GitHub and Gitea sign the
//! body with HMAC-SHA256 under a shared secret (`X-Hub-Signature-256: sha256=<hex>`,
//! `X-Gitea-Signature: <hex>`), GitLab sends the secret itself (`X-Gitlab-Token`). The
//! secret is the server's `--webhook-secret-file`; an API token works as before.

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// What a request's forge headers say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    /// No forge header: the caller must bring an API token.
    Absent,
    /// Signed (or carrying the token) with the configured secret.
    Valid,
    /// A forge header that does not match the secret, or one sent while none is configured.
    Invalid,
}

/// Checks the forge headers of a webhook request against `secret`.
pub fn verify(secret: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Signature {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let github = header("x-hub-signature-256").map(|v| v.strip_prefix("sha256=").unwrap_or(""));
    let gitea = header("x-gitea-signature");
    let gitlab = header("x-gitlab-token");
    if github.is_none() && gitea.is_none() && gitlab.is_none() {
        return Signature::Absent;
    }
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return Signature::Invalid;
    };
    let signed = |hex_mac: &str| {
        let Ok(mac) = hex::decode(hex_mac.trim()) else {
            return false;
        };
        let mut m = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .expect("HMAC takes a key of any length");
        m.update(body);
        // Constant time: a mismatch says nothing about how much of the MAC was right.
        m.verify_slice(&mac).is_ok()
    };
    // The token itself is compared through its hash, so the time taken does not follow
    // the secret's bytes.
    let same_token = |t: &str| Sha256::digest(t.as_bytes()) == Sha256::digest(secret.as_bytes());
    let ok =
        github.is_some_and(signed) || gitea.is_some_and(signed) || gitlab.is_some_and(same_token);
    if ok {
        Signature::Valid
    } else {
        Signature::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn mac(secret: &str, body: &[u8]) -> String {
        let mut m = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        m.update(body);
        hex::encode(m.finalize().into_bytes())
    }

    #[test]
    fn forge_signatures_are_checked_against_the_secret_and_the_body() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        let s = Some("s3cret");
        let gh = |sig: String| headers(&[("x-hub-signature-256", format!("sha256={sig}"))]);
        assert_eq!(verify(s, &gh(mac("s3cret", body)), body), Signature::Valid);
        assert_eq!(verify(s, &gh(mac("other", body)), body), Signature::Invalid);
        assert_eq!(
            verify(s, &gh(mac("s3cret", b"{}")), body),
            Signature::Invalid
        );
        assert_eq!(verify(s, &gh("zz".into()), body), Signature::Invalid);
        let gitea = headers(&[("x-gitea-signature", mac("s3cret", body))]);
        assert_eq!(verify(s, &gitea, body), Signature::Valid);
        let gitlab = |t: &str| headers(&[("x-gitlab-token", t.to_string())]);
        assert_eq!(verify(s, &gitlab("s3cret"), body), Signature::Valid);
        assert_eq!(verify(s, &gitlab("s3cre"), body), Signature::Invalid);
        // Without a configured secret no signature is good; without a header, a token is asked.
        assert_eq!(verify(None, &gitlab("s3cret"), body), Signature::Invalid);
        assert_eq!(verify(s, &HeaderMap::new(), body), Signature::Absent);
    }
}
