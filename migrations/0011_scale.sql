-- Scheduling and storage at lab scale (issue 14).

-- Wake-ups of the scheduler: anything that can change a bisect's decision (a run stored, a
-- task ended, a lease expired, a host came, a bisect submitted) appends a row here in its own
-- transaction and NOTIFYs `perfbisect_advance`. An advance deletes the rows of its bisect that
-- were committed before it read its evidence, so a wake-up is consumed only by an advance that
-- saw its cause, and one that arrives during an advance is left for the next. Append-only
-- inserts never wait on an advance in progress.
CREATE TABLE scheduler_wakeups (
    id          BIGSERIAL PRIMARY KEY,
    bisect_id   BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    reason      TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX scheduler_wakeups_bisect ON scheduler_wakeups (bisect_id, id);

-- The engine's verdict and culprit probability per candidate, written incrementally: a row
-- only where the value changed since the last write (no row: unknown, no probability).
-- `bisects.assessments` keeps only the measured and skipped points (what the API's commit table
-- and the report read), so no large value is rewritten every round.
CREATE TABLE bisect_assessments (
    bisect_id   BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('good', 'bad', 'unknown', 'skipped')),
    p           REAL,
    PRIMARY KEY (bisect_id, idx)
);

-- A summary the list pages read instead of loading every bisect in full.
-- `priority` weighs a bisect's share of its host group (2 gets twice the hosts of 1).
-- `assessed_round` counts writes of `bisect_assessments`, so a replica knows whether the copy
-- it keeps in memory is the latest.
ALTER TABLE bisects
    ADD COLUMN priority INTEGER NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 100),
    ADD COLUMN candidates_total INTEGER,
    ADD COLUMN candidates_remaining INTEGER,
    ADD COLUMN assessed_round BIGINT NOT NULL DEFAULT 0;

UPDATE bisects b SET
    candidates_total = (SELECT count(*) FROM bisect_commits c WHERE c.bisect_id = b.id AND c.idx >= 0);

-- Older bisects' assessments move to the table.
INSERT INTO bisect_assessments (bisect_id, idx, verdict, p)
SELECT b.id, c.idx, a ->> 'verdict', (a ->> 'p')::real
FROM bisects b, jsonb_array_elements(b.assessments) a
JOIN bisect_commits c ON c.sha = a ->> 'sha'
WHERE c.bisect_id = b.id AND c.idx >= 0 AND a ->> 'verdict' IN ('good', 'bad', 'unknown', 'skipped')
ON CONFLICT DO NOTHING;

-- The list pages filter by these and sort by id.
CREATE INDEX bisects_metric ON bisects (metric);
CREATE INDEX tasks_active ON tasks (bisect_id) WHERE state IN ('queued', 'running');
