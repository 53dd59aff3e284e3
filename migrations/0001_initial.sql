-- The whole schema of perfbisect. This folder is the only place the schema is defined.

CREATE TABLE repositories (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    url         TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    fetched_at  TIMESTAMPTZ
);

-- A job spec is stored once per canonical hash: the same hash is "the same measurement".
CREATE TABLE job_specs (
    id          BIGSERIAL PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    spec        JSONB NOT NULL,
    yaml        TEXT NOT NULL,
    testcase    TEXT NOT NULL,
    tbox_group  TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Tokens are stored as SHA-256 hashes only. kind: 'api' (submit, cancel) or 'enroll' (register workers).
CREATE TABLE api_tokens (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('api', 'enroll')),
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at  TIMESTAMPTZ
);

CREATE TABLE hosts (
    id              BIGSERIAL PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    host_group      TEXT NOT NULL,
    machine         JSONB NOT NULL DEFAULT '{}',
    token_hash      TEXT NOT NULL UNIQUE,
    registered_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX hosts_group ON hosts (host_group);

CREATE TABLE bisects (
    id              BIGSERIAL PRIMARY KEY,
    repository_id   BIGINT NOT NULL REFERENCES repositories (id),
    job_spec_id     BIGINT NOT NULL REFERENCES job_specs (id),
    good_rev        TEXT NOT NULL,
    bad_rev         TEXT NOT NULL,
    good_sha        TEXT NOT NULL,
    bad_sha         TEXT NOT NULL,
    metric          TEXT NOT NULL,
    direction       TEXT CHECK (direction IN ('increase', 'decrease')),
    magnitude_pct   DOUBLE PRECISION,
    confidence      DOUBLE PRECISION NOT NULL,
    max_runs        INTEGER NOT NULL,
    notify          JSONB NOT NULL DEFAULT '[]',
    submitted_by    BIGINT REFERENCES api_tokens (id),
    status          TEXT NOT NULL DEFAULT 'queued' CHECK (status IN
                    ('queued', 'reproducing', 'searching', 'verifying', 'found',
                     'not_reproduced', 'inconclusive', 'failed', 'cancelled')),
    status_reason   TEXT,
    culprit_sha     TEXT,
    culprit_confidence DOUBLE PRECISION,
    -- The engine's last per-commit assessments (verdicts, probabilities): its explanation.
    assessments     JSONB NOT NULL DEFAULT '[]',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at     TIMESTAMPTZ
);
CREATE INDEX bisects_status ON bisects (status);

-- The candidate set and the good endpoint, fixed at submission. idx -1 is the good endpoint;
-- candidates are 0..n-1 in topological order (parents first), the bad endpoint last.
CREATE TABLE bisect_commits (
    bisect_id   BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    sha         TEXT NOT NULL,
    parents     INTEGER[] NOT NULL,
    subject     TEXT NOT NULL,
    author      TEXT NOT NULL,
    PRIMARY KEY (bisect_id, idx),
    UNIQUE (bisect_id, sha)
);

-- The queue. Claimed with FOR UPDATE SKIP LOCKED; a running task whose lease ran out goes
-- back to 'queued' (or to 'failed' after max_attempts).
CREATE TABLE tasks (
    id                  BIGSERIAL PRIMARY KEY,
    bisect_id           BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    sha                 TEXT NOT NULL,
    job_spec_id         BIGINT NOT NULL REFERENCES job_specs (id),
    host_group          TEXT NOT NULL,
    runs                INTEGER NOT NULL CHECK (runs > 0),
    phase               TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT 'queued'
                        CHECK (state IN ('queued', 'running', 'done', 'build_failed', 'failed', 'cancelled')),
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL DEFAULT 3,
    host_id             BIGINT REFERENCES hosts (id),
    lease_expires_at    TIMESTAMPTZ,
    message             TEXT,
    log_tail            TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at          TIMESTAMPTZ,
    finished_at         TIMESTAMPTZ
);
CREATE INDEX tasks_claimable ON tasks (host_group, id) WHERE state = 'queued';
CREATE INDEX tasks_running_lease ON tasks (lease_expires_at) WHERE state = 'running';
CREATE INDEX tasks_bisect ON tasks (bisect_id);

-- One benchmark execution. Every metric it produced is kept; statistics are derived.
CREATE TABLE runs (
    id              BIGSERIAL PRIMARY KEY,
    task_id         BIGINT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    bisect_id       BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    sha             TEXT NOT NULL,
    host_id         BIGINT NOT NULL REFERENCES hosts (id),
    iteration       INTEGER NOT NULL,
    completed       BOOLEAN NOT NULL,
    metrics         JSONB NOT NULL,
    log             TEXT NOT NULL DEFAULT '',
    started_at      TIMESTAMPTZ NOT NULL,
    finished_at     TIMESTAMPTZ NOT NULL,
    uploaded_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (task_id, iteration)
);
CREATE INDEX runs_bisect ON runs (bisect_id, sha);

-- What happened to a bisect, in order: decisions with their reasons, faults, status changes.
CREATE TABLE bisect_events (
    id          BIGSERIAL PRIMARY KEY,
    bisect_id   BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    kind        TEXT NOT NULL,
    message     TEXT NOT NULL
);
CREATE INDEX bisect_events_bisect ON bisect_events (bisect_id, id);
