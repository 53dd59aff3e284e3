-- Watches: branches measured at every new head, their series, the changes found in them and
-- the bisects those changes opened.

-- A watch names a repository, a branch (or a glob over branch names), a job and its metrics.
CREATE TABLE watches (
    id              BIGSERIAL PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    repository_id   BIGINT NOT NULL REFERENCES repositories (id),
    -- A branch name, or a glob over branch names (`release-*`).
    ref_pattern     TEXT NOT NULL,
    job_spec_id     BIGINT NOT NULL REFERENCES job_specs (id),
    -- [{ "name": "...", "direction": "increase" | "decrease" | "either", "threshold_pct": 2.0 }]
    metrics         JSONB NOT NULL,
    host_group      TEXT NOT NULL,
    cadence_secs    INTEGER NOT NULL CHECK (cadence_secs > 0),
    runs_per_head   INTEGER NOT NULL CHECK (runs_per_head > 0),
    -- When a push brings more than one commit, also measure up to this many of them.
    sample_commits  INTEGER NOT NULL DEFAULT 0 CHECK (sample_commits >= 0),
    -- On first sight of a branch, also measure this many first-parent ancestors of its head.
    backfill        INTEGER NOT NULL DEFAULT 0 CHECK (backfill >= 0),
    recipients      JSONB NOT NULL DEFAULT '[]',
    enabled         BOOLEAN NOT NULL DEFAULT true,
    created_by      BIGINT REFERENCES api_tokens (id),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    polled_at       TIMESTAMPTZ
);

-- Every commit a watch measures, in series order per branch (`seq`): the heads it saw and
-- the commits it sampled from pushes that brought many.
CREATE TABLE watch_heads (
    id          BIGSERIAL PRIMARY KEY,
    watch_id    BIGINT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    ref_name    TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    sha         TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('head', 'sample', 'backfill')),
    subject     TEXT NOT NULL,
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (watch_id, ref_name, sha),
    UNIQUE (watch_id, ref_name, seq)
);

-- A watch's measurement is an ordinary task (and its runs ordinary runs) that belongs to a
-- watched head instead of a bisect.
ALTER TABLE tasks ALTER COLUMN bisect_id DROP NOT NULL;
ALTER TABLE tasks ADD COLUMN watch_id BIGINT REFERENCES watches (id) ON DELETE CASCADE;
ALTER TABLE tasks ADD COLUMN watch_head_id BIGINT REFERENCES watch_heads (id) ON DELETE CASCADE;
ALTER TABLE tasks ADD CONSTRAINT tasks_one_owner CHECK ((bisect_id IS NULL) <> (watch_id IS NULL));
CREATE INDEX tasks_watch_head ON tasks (watch_head_id) WHERE watch_head_id IS NOT NULL;
ALTER TABLE runs ALTER COLUMN bisect_id DROP NOT NULL;
ALTER TABLE builds ALTER COLUMN bisect_id DROP NOT NULL;

-- How far each (watch, branch, metric) series has been analysed: heads up to `analyzed_seq`
-- were fed to the detector. Held FOR UPDATE while analysing, so replicas never analyse twice.
CREATE TABLE watch_series (
    watch_id        BIGINT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    ref_name        TEXT NOT NULL,
    metric          TEXT NOT NULL,
    analyzed_seq    INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (watch_id, ref_name, metric)
);

-- One bisect per (repository, job, range): the dedup key across metrics and watches. Its
-- row is held FOR UPDATE while the bisect is submitted; it has no foreign keys to
-- repositories and job_specs on purpose: the submission upserts the job_specs row, which
-- would wait for the KEY SHARE lock a foreign-key check leaves in the holding transaction.
CREATE TABLE watch_bisects (
    repository_id   BIGINT NOT NULL,
    job_spec_id     BIGINT NOT NULL,
    good_sha        TEXT NOT NULL,
    bad_sha         TEXT NOT NULL,
    bisect_id       BIGINT REFERENCES bisects (id),
    PRIMARY KEY (repository_id, job_spec_id, good_sha, bad_sha)
);

-- A change point found in a series: where (the last head before, the first head after),
-- the detector's record of it (size, confidence: the decision, as bisects.assessments is),
-- and what was done about it.
CREATE TABLE watch_changes (
    id              BIGSERIAL PRIMARY KEY,
    watch_id        BIGINT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    ref_name        TEXT NOT NULL,
    metric          TEXT NOT NULL,
    before_head_id  BIGINT NOT NULL REFERENCES watch_heads (id) ON DELETE CASCADE,
    after_head_id   BIGINT NOT NULL REFERENCES watch_heads (id) ON DELETE CASCADE,
    detected_head_id BIGINT NOT NULL REFERENCES watch_heads (id) ON DELETE CASCADE,
    relative        DOUBLE PRECISION NOT NULL,
    confidence      DOUBLE PRECISION NOT NULL,
    detection       JSONB NOT NULL,
    -- bisecting: this change opened `bisect_id`; duplicate: another change (another metric,
    -- another watch) already opened the bisect of the same range; ignored: below the
    -- metric's threshold or in the direction it does not watch; failed: the bisect could not
    -- be opened (`message` says why).
    action          TEXT NOT NULL CHECK (action IN ('bisecting', 'duplicate', 'ignored', 'failed')),
    bisect_id       BIGINT REFERENCES bisects (id),
    message         TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (watch_id, ref_name, metric, after_head_id)
);
CREATE INDEX watch_changes_bisect ON watch_changes (bisect_id);
