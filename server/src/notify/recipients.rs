//! Who gets a mail: the submitter (the submission's `notify` list), subscribers by
//! repository, testcase or metric, and, when configured, the culprit's author and the
//! addresses in its `Signed-off-by:` / `Cc:` trailers.
//!
//! To: the submitter and the author; Cc: the trailers (as a patch reply would); Bcc: the
//! subscribers, so one subscriber's address is not shown to everyone else.

use super::{Event, MailSettings};
use crate::git::Mirrors;
use crate::report_input::Loaded;
use lettre::message::Mailbox;
use perfbisect_report::Outcome;
use sqlx::PgPool;
use std::collections::HashSet;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recipients {
    pub to: Vec<Mailbox>,
    pub cc: Vec<Mailbox>,
    pub bcc: Vec<Mailbox>,
}

impl Recipients {
    pub fn is_empty(&self) -> bool {
        self.to.is_empty() && self.cc.is_empty() && self.bcc.is_empty()
    }

    /// Every envelope recipient, To then Cc then Bcc.
    pub fn envelope(&self) -> impl Iterator<Item = &Mailbox> {
        self.to.iter().chain(&self.cc).chain(&self.bcc)
    }

    /// Builds the lists, dropping unparsable addresses and repeats (an address keeps its
    /// most visible place: To, then Cc, then Bcc).
    pub fn assemble<'a>(
        to: impl IntoIterator<Item = &'a str>,
        cc: impl IntoIterator<Item = &'a str>,
        bcc: impl IntoIterator<Item = &'a str>,
    ) -> Recipients {
        let mut seen = HashSet::new();
        let mut take = |list: &mut Vec<Mailbox>, items: &mut dyn Iterator<Item = &'a str>| {
            for item in items {
                let Ok(mb) = item.trim().parse::<Mailbox>() else {
                    tracing::warn!(address = item, "not a mail address; left out");
                    continue;
                };
                if seen.insert(mb.email.to_string().to_lowercase()) {
                    list.push(mb);
                }
            }
        };
        let mut r = Recipients::default();
        take(&mut r.to, &mut to.into_iter());
        take(&mut r.cc, &mut cc.into_iter());
        take(&mut r.bcc, &mut bcc.into_iter());
        r
    }
}

/// A subscription: NULL fields match everything; `metric` is a glob.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Subscription {
    pub id: i64,
    pub email: String,
    /// Registered repository name.
    pub repository: Option<String>,
    pub testcase: Option<String>,
    /// Metric name or glob, e.g. `fio.*_iops`.
    pub metric: Option<String>,
    /// Events to mail: `found`, `not_reproduced`, `inconclusive`, `failed`, `started`, `reproduced`.
    pub events: Vec<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl Subscription {
    pub fn matches(&self, repository: &str, testcase: &str, metric: &str, event: Event) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.repository, repository)
            && eq(&self.testcase, testcase)
            && self
                .metric
                .as_deref()
                .is_none_or(|m| perfbisect_report::glob::matches(m, metric))
            && self.events.iter().any(|e| e == event.as_str())
    }
}

/// Addresses in a commit message's trailers (`Signed-off-by:`, `Cc:`), in order.
pub fn trailer_addresses(message: &str) -> Vec<String> {
    // Trailers are the last paragraph of the message.
    let last = message.trim_end().rsplit("\n\n").next().unwrap_or_default();
    last.lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            let key = key.trim().to_ascii_lowercase();
            (key == "signed-off-by" || key == "cc").then(|| value.trim())
        })
        // `Cc: <stable@vger.kernel.org> # 6.1.x`: drop the comment.
        .map(|v| v.split(" #").next().unwrap_or(v).trim().to_string())
        .filter(|v| v.contains('@'))
        .collect()
}

async fn subscribers(db: &PgPool, loaded: &Loaded, event: Event) -> sqlx::Result<Vec<String>> {
    let subs = crate::store::subscriptions::all(db).await?;
    Ok(subs
        .into_iter()
        .filter(|s| {
            s.matches(
                &loaded.repository,
                &loaded.testcase,
                &loaded.input.metric,
                event,
            )
        })
        .map(|s| s.email)
        .collect())
}

/// The culprit's commit message, from this server's mirror.
async fn culprit_message(mirrors: &Mirrors, repository_id: i64, sha: &str) -> Option<String> {
    let (mirrors, sha) = (mirrors.clone(), sha.to_string());
    let read = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
        let repo = mirrors.open(repository_id)?;
        let commit = repo.find_commit(git2::Oid::from_str(&sha)?)?;
        Ok(String::from_utf8_lossy(commit.message_bytes()).into_owned())
    })
    .await;
    match read {
        Ok(Ok(m)) => Some(m),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "reading the culprit's trailers");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading the culprit's trailers");
            None
        }
    }
}

/// Everyone who gets this bisect's mail about `event`.
pub async fn resolve(
    db: &PgPool,
    mirrors: &Mirrors,
    settings: &MailSettings,
    loaded: &Loaded,
    event: Event,
) -> sqlx::Result<Recipients> {
    let culprit = match &loaded.input.outcome {
        Outcome::Found { culprit, .. } if event == Event::Found => Some(culprit),
        _ => None,
    };
    let mut to: Vec<String> = loaded.notify.clone();
    if settings.culprit_author
        && let Some(author) = culprit.and_then(|c| c.author.clone())
    {
        to.push(author);
    }
    let mut cc = Vec::new();
    if settings.trailers
        && let Some(c) = culprit
        && let Some(message) = culprit_message(mirrors, loaded.repository_id, &c.sha).await
    {
        cc = trailer_addresses(&message);
    }
    let bcc = subscribers(db, loaded, event).await?;
    Ok(Recipients::assemble(
        to.iter().map(String::as_str),
        cc.iter().map(String::as_str),
        bcc.iter().map(String::as_str),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_come_from_the_last_paragraph() {
        let msg = "ext4: avoid a transaction\n\nSigned-off-by: in the body: a@b.c is not a trailer\n\nReviewed-by: R <r@example.org>\nSigned-off-by: Jan Kara <jack@suse.cz>\nCc: <stable@vger.kernel.org> # 6.1.x\nLink: https://lore.kernel.org/x\nSigned-off-by: Ted <tytso@mit.edu>\n";
        assert_eq!(
            trailer_addresses(msg),
            [
                "Jan Kara <jack@suse.cz>",
                "<stable@vger.kernel.org>",
                "Ted <tytso@mit.edu>"
            ]
        );
        assert!(trailer_addresses("one line").is_empty());
    }

    #[test]
    fn an_address_appears_once_in_its_most_visible_place() {
        let r = Recipients::assemble(
            ["dev@example.org", "Author <a@example.org>"],
            ["A <A@example.org>", "list@example.org", "junk"],
            ["dev@example.org", "sub@example.org"],
        );
        let emails = |v: &[Mailbox]| v.iter().map(|m| m.email.to_string()).collect::<Vec<_>>();
        assert_eq!(emails(&r.to), ["dev@example.org", "a@example.org"]);
        assert_eq!(emails(&r.cc), ["list@example.org"]);
        assert_eq!(emails(&r.bcc), ["sub@example.org"]);
        assert_eq!(r.envelope().count(), 4);
    }

    #[test]
    fn subscriptions_match_on_what_they_name() {
        let s =
            |repository: Option<&str>, testcase: Option<&str>, metric: Option<&str>| Subscription {
                id: 1,
                email: "x@example.org".into(),
                repository: repository.map(Into::into),
                testcase: testcase.map(Into::into),
                metric: metric.map(Into::into),
                events: vec!["found".into(), "failed".into()],
                created_at: chrono::Utc::now(),
            };
        let m = |s: &Subscription, e| s.matches("linux", "fio-basic", "fio.write_iops", e);
        assert!(m(&s(None, None, None), Event::Found));
        assert!(m(
            &s(Some("linux"), None, Some("fio.*_iops")),
            Event::Failed
        ));
        assert!(!m(&s(Some("glibc"), None, None), Event::Found));
        assert!(!m(&s(None, Some("aim7"), None), Event::Found));
        assert!(!m(&s(None, None, Some("fio.*_bw_MBps")), Event::Found));
        assert!(!m(&s(None, None, None), Event::Inconclusive));
    }
}
