-- Kernel configs named by jobs (`kconfig:`), fetched by workers. Immutable once stored: a
-- job's hash names the config by name, so the same name must always mean the same content.
CREATE TABLE kconfigs (
    name        TEXT PRIMARY KEY,
    content     TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Every build a worker did (or took from its cache) for a task, with its log.
CREATE TABLE builds (
    id              BIGSERIAL PRIMARY KEY,
    task_id         BIGINT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    bisect_id       BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    sha             TEXT NOT NULL,
    host_id         BIGINT NOT NULL REFERENCES hosts (id),
    succeeded       BOOLEAN NOT NULL,
    cached          BOOLEAN NOT NULL,
    duration_secs   DOUBLE PRECISION NOT NULL,
    log             TEXT NOT NULL,
    reported_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX builds_task ON builds (task_id);

-- Where a run ran: host, kernel release and command line, governor, microcode, boot method.
ALTER TABLE runs ADD COLUMN environment JSONB NOT NULL DEFAULT '{}';
