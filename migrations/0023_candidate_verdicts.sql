-- Every candidate's verdict as one byte (0 unknown, 1 good, 2 bad, 3 skipped), in the order of
-- `bisect_commits.idx`, rewritten whole in a round where any verdict changed. A side of a
-- large range decided at once flipped 91,970 rows of `bisect_assessments` in one round (1 s);
-- the same news is about 100 KB here, which pglz stores in a few hundred bytes, since
-- verdicts come in long runs. `bisect_assessments` keeps the culprit probabilities (its
-- `verdict` column is only read where this is NULL).
ALTER TABLE bisects ADD COLUMN candidate_verdicts BYTEA;

UPDATE bisects b SET candidate_verdicts = (
    SELECT decode(string_agg(CASE a.verdict WHEN 'good' THEN '01' WHEN 'bad' THEN '02'
                                            WHEN 'skipped' THEN '03' ELSE '00' END,
                             '' ORDER BY g.i), 'hex')
    FROM generate_series(0, b.candidates_total - 1) g (i)
    LEFT JOIN bisect_assessments a ON a.bisect_id = b.id AND a.idx = g.i)
WHERE b.candidates_total > 0;
