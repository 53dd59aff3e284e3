//! The writes of a task's end, coalesced: a round's tasks end together, so sixty-four hosts
//! upload their runs and complete their tasks at the same instant. The uploads that arrive
//! together are checked and stored by one statement (`store::runs::upload_batch`), and the
//! completions by another (`store::queue::complete_batch`), each on this replica's write
//! connections (`db::side_pool`). Before, each took a statement to check its token and one
//! or two more, on the main pool, where they queued behind each other and the scheduler
//! (the large loadtest's upload p99 was 296 ms).

use crate::coalesce::{Coalescer, Waiting, answer_all, retry_deadlocks};
use crate::state::AppState;
use crate::store;
use crate::store::queue::{Completed, Completion};
use crate::store::runs::{NewUpload, Uploaded};

/// Upload statements running at once, per replica; as many completion statements. Each runs
/// on a connection of its own (`CONNECTIONS` at once; the pool keeps a spare for each,
/// `db::side_pool`).
const BATCHES_AT_ONCE: usize = 2;

/// The write statements a replica runs at once, beside its main pool.
pub const CONNECTIONS: usize = 2 * BATCHES_AT_ONCE;

/// Uploads or completions one statement takes at most.
const BATCH_MAX: usize = 128;

/// Readies a write connection as it opens (`db::side_pool`): an upload and a completion of
/// nothing, which write nothing, prepare both statements and fill the backend's caches.
pub fn warm(conn: &mut sqlx::PgConnection) -> crate::db::Warming<'_> {
    Box::pin(async move {
        store::runs::upload_batch(&mut *conn, &[], 0.0, 0.0).await?;
        store::queue::complete_batch(&mut *conn, &[], 0.0).await?;
        Ok(())
    })
}

/// This replica's uploads and completions waiting for a statement, and those running.
#[derive(Debug)]
pub struct Writes {
    uploads: Coalescer<NewUpload, Uploaded>,
    completions: Coalescer<Completion, Completed>,
}

impl Default for Writes {
    fn default() -> Self {
        Writes {
            uploads: Coalescer::new(BATCHES_AT_ONCE, BATCH_MAX),
            completions: Coalescer::new(BATCHES_AT_ONCE, BATCH_MAX),
        }
    }
}

/// Checks and stores `upload` in a statement shared with the uploads waiting beside it.
pub async fn upload(state: &AppState, upload: NewUpload) -> sqlx::Result<Uploaded> {
    let (db, lease) = (state.writes_db.clone(), state.lease.as_secs_f64());
    state
        .writes
        .uploads
        .submit(upload, move |batch| upload_batch(db, batch, lease))
        .await
}

/// Ends a task in a statement shared with the completions waiting beside it.
pub async fn complete(state: &AppState, end: Completion) -> sqlx::Result<Completed> {
    let db = state.writes_db.clone();
    state
        .writes
        .completions
        .submit(end, move |batch| complete_batch(db, batch))
        .await
}

/// Makes one statement of `batch` (again after a deadlock) and answers each upload.
async fn upload_batch(db: sqlx::PgPool, batch: Vec<Waiting<NewUpload, Uploaded>>, lease: f64) {
    crate::metrics::observe_upload_batch(batch.len());
    let uploads: Vec<&NewUpload> = batch.iter().map(|w| &w.item).collect();
    let answers = retry_deadlocks("upload", || {
        store::runs::upload_batch(&db, &uploads, lease, crate::auth::SEEN_EVERY_SECS)
    })
    .await;
    drop(uploads);
    // Nothing to give back: an upload nobody heard of was stored all the same, and the
    // worker's retry of it is a no-op.
    answer_all(batch, answers);
}

/// Makes one statement of `batch` (again after a deadlock) and answers each completion.
async fn complete_batch(db: sqlx::PgPool, batch: Vec<Waiting<Completion, Completed>>) {
    crate::metrics::observe_complete_batch(batch.len());
    let ends: Vec<&Completion> = batch.iter().map(|w| &w.item).collect();
    let answers = retry_deadlocks("complete", || {
        store::queue::complete_batch(&db, &ends, crate::auth::SEEN_EVERY_SECS)
    })
    .await;
    drop(ends);
    // A completion nobody heard of ended its task all the same; the worker's retry of it
    // is answered 409, as after any answer lost on the way.
    answer_all(batch, answers);
}
