-- Mail: the transactional outbox and the subscriptions that decide who gets what.

-- One mail about one event of one bisect. The row of a final event is written in the same
-- transaction as the bisect's final status (scheduler::finish), so an outcome never lacks its
-- mail. The sender renders and freezes the message (headers, bodies, envelope) before its
-- first SMTP attempt; every attempt then sends the same bytes with the same Message-ID.
CREATE TABLE outbox (
    id                  BIGSERIAL PRIMARY KEY,
    bisect_id           BIGINT NOT NULL REFERENCES bisects (id) ON DELETE CASCADE,
    event               TEXT NOT NULL CHECK (event IN
                        ('started', 'found', 'not_reproduced', 'inconclusive', 'failed')),
    -- The unique left part of the Message-ID, fixed when the row is written.
    message_key         TEXT NOT NULL UNIQUE,
    state               TEXT NOT NULL DEFAULT 'pending' CHECK (state IN
                        ('pending', 'sending', 'sent', 'failed', 'skipped')),
    -- Frozen with the message, before the first attempt.
    message_id          TEXT,
    subject             TEXT,
    envelope_from       TEXT,
    recipients          TEXT[],
    raw                 BYTEA,
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_expires_at    TIMESTAMPTZ,
    last_error          TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    frozen_at           TIMESTAMPTZ,
    sent_at             TIMESTAMPTZ
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_bisect ON outbox (bisect_id, id);
-- A bisect is announced as started once, whichever replica notices it first.
CREATE UNIQUE INDEX outbox_started_once ON outbox (bisect_id) WHERE event = 'started';

-- Who wants mail about what. NULL matches everything; `metric` is a glob (`fio.*_iops`).
CREATE TABLE subscriptions (
    id          BIGSERIAL PRIMARY KEY,
    email       TEXT NOT NULL,
    repository  TEXT,
    testcase    TEXT,
    metric      TEXT,
    events      TEXT[] NOT NULL DEFAULT '{found,not_reproduced,inconclusive,failed}',
    created_by  BIGINT REFERENCES api_tokens (id),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Per-bisect mail options: threading onto a posted patch, a different Reply-To, extra headers.
CREATE TABLE bisect_mail_options (
    bisect_id   BIGINT PRIMARY KEY REFERENCES bisects (id) ON DELETE CASCADE,
    in_reply_to TEXT,
    reply_to    TEXT,
    headers     JSONB NOT NULL DEFAULT '[]',
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
