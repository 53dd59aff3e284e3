//! `bisect_assessments`: the engine's culprit probability per candidate, stored incrementally
//! (only rows whose value moved); every candidate's verdict as one byte each on `bisects`
//! (a round can flip tens of thousands at once); and the compact summary on `bisects`.

use perfbisect_wire::states::Verdict;

/// One candidate's stored assessment.
#[derive(Debug, Clone)]
pub struct AssessmentRow {
    pub idx: i32,
    pub verdict: Verdict,
    pub p: Option<f32>,
}

/// Every stored row of a bisect (candidates without a row are unknown, without probability).
pub async fn load<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
) -> sqlx::Result<Vec<AssessmentRow>> {
    sqlx::query_as!(
        AssessmentRow,
        r#"SELECT idx, verdict AS "verdict: Verdict", p FROM bisect_assessments WHERE bisect_id = $1"#,
        bisect,
    )
    .fetch_all(db)
    .await
}

/// Every candidate's verdict as one byte, in `idx` order (`bisects.candidate_verdicts`; `None`
/// until a round first changed a verdict, or for a bisect from before migration 0023 that
/// had none: then the rows' verdicts hold).
pub async fn verdicts<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
) -> sqlx::Result<Option<Vec<u8>>> {
    sqlx::query_scalar!(
        "SELECT candidate_verdicts FROM bisects WHERE id = $1",
        bisect
    )
    .fetch_optional(db)
    .await
    .map(Option::flatten)
}

/// A verdict's byte in `bisects.candidate_verdicts`.
pub fn verdict_byte(v: Verdict) -> u8 {
    match v {
        Verdict::Unknown => 0,
        Verdict::Good => 1,
        Verdict::Bad => 2,
        Verdict::Skipped => 3,
    }
}

fn byte_verdict(b: u8) -> Verdict {
    match b {
        1 => Verdict::Good,
        2 => Verdict::Bad,
        3 => Verdict::Skipped,
        _ => Verdict::Unknown,
    }
}

/// The `n` candidates' (verdict, culprit probability) in `idx` order, from the stored rows
/// and verdict bytes (see [`verdicts`]).
pub fn combine(
    n: usize,
    rows: Vec<AssessmentRow>,
    verdicts: Option<&[u8]>,
) -> Vec<(Verdict, Option<f32>)> {
    let mut values = vec![(Verdict::Unknown, None); n];
    for row in rows {
        if let Some(slot) = values.get_mut(row.idx as usize) {
            *slot = (row.verdict, row.p);
        }
    }
    if let Some(bytes) = verdicts {
        for (slot, &b) in values.iter_mut().zip(bytes) {
            slot.0 = byte_verdict(b);
        }
    }
    values
}

/// The round the stored rows belong to (see `write`).
pub async fn round<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar!("SELECT assessed_round FROM bisects WHERE id = $1", bisect)
        .fetch_one(db)
        .await
}

/// What one round changed and the summary it leaves.
pub struct RoundWrite<'a> {
    /// Rows whose culprit probability moved.
    pub changed: &'a [(i32, Verdict, Option<f32>)],
    /// Every candidate's verdict byte, when a verdict changed this round.
    pub verdicts: Option<&'a [u8]>,
    /// `bisects.assessments`: only the measured and skipped points (`[{sha, verdict, p}]`).
    pub measured: serde_json::Value,
    pub candidates_remaining: i32,
    /// `bisects.belief`: what the running page's progress is computed from.
    pub belief: &'a crate::progress::Belief,
}

/// Upserts the changed rows in one statement and updates the summary; returns the new round.
pub async fn write(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    w: RoundWrite<'_>,
) -> sqlx::Result<i64> {
    if !w.changed.is_empty() {
        let idx: Vec<i32> = w.changed.iter().map(|c| c.0).collect();
        let verdict: Vec<Verdict> = w.changed.iter().map(|c| c.1).collect();
        let p: Vec<Option<f32>> = w.changed.iter().map(|c| c.2).collect();
        sqlx::query!(
            "INSERT INTO bisect_assessments (bisect_id, idx, verdict, p)
             SELECT $1, i, v, p FROM UNNEST($2::int[], $3::text[], $4::real[]) AS u(i, v, p)
             ON CONFLICT (bisect_id, idx) DO UPDATE SET verdict = EXCLUDED.verdict, p = EXCLUDED.p",
            bisect,
            &idx,
            &verdict as &[Verdict],
            &p as &[Option<f32>],
        )
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query_scalar!(
        "UPDATE bisects SET assessments = $2, candidates_remaining = $3, belief = $5,
                candidate_verdicts = coalesce($6, candidate_verdicts),
                assessed_round = assessed_round + CASE WHEN $4 THEN 1 ELSE 0 END
         WHERE id = $1 RETURNING assessed_round",
        bisect,
        w.measured,
        w.candidates_remaining,
        !w.changed.is_empty() || w.verdicts.is_some(),
        sqlx::types::Json(w.belief) as _,
        w.verdicts,
    )
    .fetch_one(&mut *tx)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_bytes_override_the_rows_and_the_rest_is_unknown() {
        let rows = vec![
            AssessmentRow {
                idx: 0,
                verdict: Verdict::Unknown,
                p: Some(0.25),
            },
            AssessmentRow {
                idx: 2,
                verdict: Verdict::Bad,
                p: None,
            },
            AssessmentRow {
                idx: 9,
                verdict: Verdict::Bad,
                p: Some(0.5),
            },
        ];
        let bytes: Vec<u8> = [Verdict::Good, Verdict::Skipped, Verdict::Unknown]
            .map(verdict_byte)
            .to_vec();
        assert_eq!(
            combine(4, rows.clone(), Some(&bytes)),
            vec![
                (Verdict::Good, Some(0.25)),
                (Verdict::Skipped, None),
                (Verdict::Unknown, None),
                (Verdict::Unknown, None),
            ]
        );
        // Without bytes (a bisect from before them) the rows' verdicts hold.
        assert_eq!(combine(3, rows, None)[2], (Verdict::Bad, None));
        for v in Verdict::ALL {
            assert_eq!(byte_verdict(verdict_byte(*v)), *v);
        }
    }
}
