//! `outbox`: writing mail rows, claiming them, freezing their message, and recording how
//! each attempt went. Only this module speaks SQL about the outbox (`notify::outbox` is
//! this module, under the name the mail code has always used).
//!
//! Every state change after a claim is fenced by the attempt number the claim returned: a
//! sender whose lease ran out (and whose row another sender took over) changes nothing.

use crate::notify::Event;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use std::time::Duration;

/// NOTIFY channel raised whenever a mail row is written.
pub const CHANNEL: &str = "perfbisect_outbox";

/// Writes the mail of a bisect's final status. Called by `scheduler::finish` inside the
/// transaction that sets the status, so the outcome and its mail commit together.
pub async fn enqueue(tx: &mut PgConnection, bisect: i64, status: &str) -> sqlx::Result<()> {
    if let Some(event) = Event::of_final_status(status) {
        insert(tx, bisect, event).await?;
    }
    Ok(())
}

/// The row's Message-ID key is fixed here, at insertion: 128 random bits make it unique.
async fn insert(conn: &mut PgConnection, bisect: i64, event: Event) -> sqlx::Result<()> {
    sqlx::query!(
        "WITH row AS (
            INSERT INTO outbox (bisect_id, event, message_key)
            VALUES ($1::bigint, $2::text,
                    'perfbisect.' || $1::bigint || '.' || $2::text || '.' || replace(gen_random_uuid()::text, '-', ''))
            ON CONFLICT DO NOTHING RETURNING id)
         SELECT pg_notify($3, id::text) FROM row",
        bisect,
        event.as_str(),
        CHANNEL,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Queues a `started` mail for every running bisect that has none yet (only while the
/// event is configured: the sender calls this).
pub async fn enqueue_started(db: &PgPool) -> sqlx::Result<u64> {
    enqueue_running(db, "started", &["reproducing", "searching", "verifying"]).await
}

/// Queues a `reproduced` mail for every bisect whose endpoints reproduced the change (it
/// is searching or verifying) and that has none yet. One that ended first has its report.
pub async fn enqueue_reproduced(db: &PgPool) -> sqlx::Result<u64> {
    enqueue_running(db, "reproduced", &["searching", "verifying"]).await
}

async fn enqueue_running(db: &PgPool, event: &str, statuses: &[&str]) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "INSERT INTO outbox (bisect_id, event, message_key)
         SELECT b.id, $1::text, 'perfbisect.' || b.id || '.' || $1::text || '.' || replace(gen_random_uuid()::text, '-', '')
         FROM bisects b
         WHERE b.status = ANY($2)
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.bisect_id = b.id AND o.event = $1::text)
         ON CONFLICT DO NOTHING",
        event,
        statuses as &[&str],
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// A row a sender holds, with its frozen message when it has one.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub bisect_id: i64,
    pub event: String,
    pub message_key: String,
    /// The number of this attempt (1 = first).
    pub attempts: i32,
    pub message_id: Option<String>,
    pub envelope_from: Option<String>,
    pub recipients: Option<Vec<String>>,
    pub raw: Option<Vec<u8>>,
}

/// The message as sent, stored before the first attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Frozen {
    pub message_id: String,
    pub subject: String,
    pub envelope_from: String,
    pub recipients: Vec<String>,
    pub raw: Vec<u8>,
}

impl Claimed {
    pub fn frozen(&self) -> Option<Frozen> {
        Some(Frozen {
            message_id: self.message_id.clone()?,
            subject: String::new(),
            envelope_from: self.envelope_from.clone()?,
            recipients: self.recipients.clone()?,
            raw: self.raw.clone()?,
        })
    }
}

/// Marks failed the rows whose sender vanished during their last allowed attempt: whether
/// the SMTP server took that mail is unknown, and the row says so instead of looping.
pub async fn give_up_abandoned(db: &PgPool, max_attempts: i32) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "UPDATE outbox SET state = 'failed', lease_expires_at = NULL,
                last_error = 'the sender stopped during attempt ' || attempts
                             || ' (the last allowed); whether the SMTP server accepted the mail is unknown'
         WHERE state = 'sending' AND lease_expires_at < now() AND attempts >= $1",
        max_attempts,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Seconds until the next row falls due (a pending row's retry, or a sending row's lease
/// running out); `None` when no row waits. 0 when one is due already.
pub async fn next_due_in(db: &PgPool) -> sqlx::Result<Option<f64>> {
    sqlx::query_scalar!(
        r#"SELECT greatest(0, EXTRACT(EPOCH FROM min(due) - now()))::float8 AS "secs"
           FROM (SELECT next_attempt_at AS due FROM outbox WHERE state = 'pending'
                 UNION ALL
                 SELECT lease_expires_at FROM outbox WHERE state = 'sending') d"#
    )
    .fetch_one(db)
    .await
}

/// Takes the oldest due row: pending and due, or being sent by a sender whose lease ran out.
pub async fn claim(db: &PgPool, lease: Duration) -> sqlx::Result<Option<Claimed>> {
    sqlx::query_as!(
        Claimed,
        "UPDATE outbox o SET state = 'sending', attempts = o.attempts + 1,
                lease_expires_at = now() + make_interval(secs => $1)
         FROM (SELECT id FROM outbox
               WHERE (state = 'pending' AND next_attempt_at <= now())
                  OR (state = 'sending' AND lease_expires_at < now())
               ORDER BY next_attempt_at, id FOR UPDATE SKIP LOCKED LIMIT 1) c
         WHERE o.id = c.id
         RETURNING o.id, o.bisect_id, o.event, o.message_key, o.attempts, o.message_id,
                   o.envelope_from, o.recipients, o.raw",
        lease.as_secs_f64(),
    )
    .fetch_optional(db)
    .await
}

/// Stores the message before its first attempt. False if the row is no longer ours.
pub async fn freeze(db: &PgPool, c: &Claimed, f: &Frozen) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox SET message_id = $3, subject = $4, envelope_from = $5, recipients = $6,
                raw = $7, frozen_at = now()
         WHERE id = $1 AND attempts = $2 AND state = 'sending' AND raw IS NULL",
        c.id,
        c.attempts,
        f.message_id,
        f.subject,
        f.envelope_from,
        &f.recipients,
        f.raw,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The SMTP server accepted the message.
pub async fn mark_sent(db: &PgPool, c: &Claimed) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox SET state = 'sent', sent_at = now(), lease_expires_at = NULL, last_error = NULL
         WHERE id = $1 AND attempts = $2 AND state = 'sending'",
        c.id,
        c.attempts,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Nothing to send (no recipient, event not mailed): kept, with why, never deleted.
pub async fn mark_skipped(db: &PgPool, c: &Claimed, why: &str) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox SET state = 'skipped', lease_expires_at = NULL, last_error = $3
         WHERE id = $1 AND attempts = $2 AND state = 'sending'",
        c.id,
        c.attempts,
        why,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The attempt failed: retry after `retry_in`, or mark the row failed when `retry_in` is
/// `None` (a permanent error, or the last attempt).
pub async fn mark_attempt_failed(
    db: &PgPool,
    c: &Claimed,
    error: &str,
    retry_in: Option<Duration>,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox SET lease_expires_at = NULL, last_error = $3,
                state = CASE WHEN $4::float8 IS NULL THEN 'failed' ELSE 'pending' END,
                next_attempt_at = now() + make_interval(secs => coalesce($4::float8, 0))
         WHERE id = $1 AND attempts = $2 AND state = 'sending'",
        c.id,
        c.attempts,
        error,
        retry_in.map(|d| d.as_secs_f64()),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Puts a failed or skipped mail back in the queue (after the SMTP configuration or the
/// subscriptions were fixed). A frozen message keeps its bytes and Message-ID.
pub async fn retry(db: &PgPool, id: i64) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = now(), lease_expires_at = NULL
         WHERE id = $1 AND state IN ('failed', 'skipped')",
        id,
    )
    .execute(db)
    .await?;
    if done.rows_affected() == 1 {
        sqlx::query!("SELECT pg_notify($1, $2)", CHANNEL, id.to_string())
            .execute(db)
            .await?;
    }
    Ok(done.rows_affected() == 1)
}

/// Whether a mail of this bisect has its message frozen (its options can no longer change).
pub async fn any_frozen(db: &PgPool, bisect: i64) -> sqlx::Result<bool> {
    let frozen = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM outbox WHERE bisect_id = $1 AND raw IS NOT NULL) AS "frozen!""#,
        bisect,
    )
    .fetch_one(db)
    .await?;
    Ok(frozen)
}

/// The frozen message of a bisect's final mail, or its key when not frozen yet.
pub async fn final_mail(
    db: &PgPool,
    bisect: i64,
) -> sqlx::Result<Option<(String, Option<Vec<u8>>)>> {
    let row = sqlx::query!(
        "SELECT message_key, raw FROM outbox WHERE bisect_id = $1 AND event <> 'started'
         ORDER BY id DESC LIMIT 1",
        bisect,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.message_key, r.raw)))
}

/// One mail as the API shows it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OutboxMail {
    pub id: i64,
    pub bisect_id: i64,
    /// `started`, `reproduced`, `found`, `not_reproduced`, `inconclusive` or `failed`.
    pub event: String,
    /// `pending` (waiting for its next attempt, or for SMTP to be configured), `sending`,
    /// `sent`, `failed` (after its last attempt or a permanent error), `skipped` (nobody to
    /// send it to, or the event is not mailed).
    pub state: String,
    /// Set when the message is frozen, before the first attempt.
    pub message_id: Option<String>,
    pub subject: Option<String>,
    /// Envelope recipients (To, Cc and Bcc).
    pub recipients: Option<Vec<String>>,
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
}

pub async fn list(
    db: &PgPool,
    bisect: Option<i64>,
    state: Option<&str>,
    limit: i64,
    offset: i64,
) -> sqlx::Result<Vec<OutboxMail>> {
    sqlx::query_as!(
        OutboxMail,
        "SELECT id, bisect_id, event, state, message_id, subject, recipients, attempts,
                next_attempt_at, last_error, created_at, sent_at
         FROM outbox WHERE ($1::bigint IS NULL OR bisect_id = $1) AND ($2::text IS NULL OR state = $2)
         ORDER BY id DESC LIMIT $3 OFFSET $4",
        bisect,
        state,
        limit,
        offset,
    )
    .fetch_all(db)
    .await
}

pub async fn get(db: &PgPool, id: i64) -> sqlx::Result<Option<OutboxMail>> {
    sqlx::query_as!(
        OutboxMail,
        "SELECT id, bisect_id, event, state, message_id, subject, recipients, attempts,
                next_attempt_at, last_error, created_at, sent_at
         FROM outbox WHERE id = $1",
        id,
    )
    .fetch_optional(db)
    .await
}

/// The Message-ID key of the bisect's `started` mail, the root its later mails thread under.
pub async fn started_key(db: &PgPool, bisect: i64) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(
        "SELECT message_key FROM outbox WHERE bisect_id = $1 AND event = 'started'",
        bisect,
    )
    .fetch_optional(db)
    .await
}
