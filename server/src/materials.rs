//! The materials to reproduce a bisect (its job spec and kernel config as links, the
//! `perfbisect submit` line, web links to its commits), gathered from stored rows for the
//! report's "To reproduce" section (`perfbisect_report::materials`).

use perfbisect_report::materials::{Materials, commit_url};
use perfbisect_wire::api::{BisectMaterials, CommitLink};
use sqlx::PgPool;

use crate::store::bisects::ForMaterials as Row;

/// Quotes a shell word when it needs it (a metric or name with odd characters).
fn sh(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

async fn fetch_row(db: &PgPool, id: i64) -> sqlx::Result<Option<Row>> {
    crate::store::bisects::for_materials(db, id).await
}

/// The materials of bisect `id`, with links under the server's `public_url`. `None` when
/// there is no such bisect.
pub async fn load(db: &PgPool, id: i64, public_url: &str) -> sqlx::Result<Option<Materials>> {
    Ok(fetch_row(db, id)
        .await?
        .map(|r| from_row(&r, id, public_url)))
}

fn from_row(r: &Row, id: i64, public_url: &str) -> Materials {
    let base = public_url.trim_end_matches('/');
    let mut submit = format!(
        "perfbisect submit --server {} --repo {} --good {} --bad {} --job job.yaml --metric {}",
        sh(base),
        sh(&r.repository),
        r.good_sha,
        r.bad_sha,
        sh(&r.metric)
    );
    if let Some(d) = &r.direction {
        submit += &format!(" --direction {}", sh(d));
    }
    if (r.confidence - 0.99).abs() > 1e-9 {
        submit += &format!(" --confidence {}", r.confidence);
    }
    if r.first_parent {
        submit += " --first-parent";
    }
    Materials {
        job_url: format!("{base}/api/v1/bisects/{id}/job.yaml"),
        kconfig_url: r
            .kconfig
            .as_ref()
            .map(|k| format!("{base}/api/v1/kconfigs/{k}")),
        submit_line: submit,
        commit_links: commit_links(r)
            .into_iter()
            .map(|l| (format!("{}:", l.role), l.url))
            .collect(),
    }
}

/// Web links of the culprit and the endpoints through the repository's `web_url` template;
/// none without a template, nor for an endpoint not yet resolved (a `fetching` bisect).
fn commit_links(r: &Row) -> Vec<CommitLink> {
    let Some(t) = &r.web_url else {
        return Vec::new();
    };
    [
        ("culprit", r.culprit_sha.as_deref()),
        ("good", Some(r.good_sha.as_str())),
        ("bad", Some(r.bad_sha.as_str())),
    ]
    .into_iter()
    .filter_map(|(role, sha)| {
        let sha = sha.filter(|s| !s.is_empty())?;
        Some(CommitLink {
            role: role.into(),
            sha: sha.into(),
            url: commit_url(t, sha),
        })
    })
    .collect()
}

/// The materials of bisect `id` as the API's bisect JSON carries them.
pub async fn for_api(
    db: &PgPool,
    id: i64,
    public_url: &str,
) -> sqlx::Result<Option<BisectMaterials>> {
    let Some(r) = fetch_row(db, id).await? else {
        return Ok(None);
    };
    let m = from_row(&r, id, public_url);
    Ok(Some(BisectMaterials {
        job_url: m.job_url,
        kconfig_url: m.kconfig_url,
        submit_line: m.submit_line,
        commit_links: commit_links(&r),
    }))
}
