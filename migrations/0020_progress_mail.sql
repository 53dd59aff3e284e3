-- A progress mail: `reproduced`, sent once the endpoints reproduced the change and the
-- search began (opt-in, like `started`), in the thread of the bisect's mails.
ALTER TABLE outbox DROP CONSTRAINT outbox_event_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_event_check CHECK (event IN
    ('started', 'reproduced', 'found', 'not_reproduced', 'inconclusive', 'failed'));
-- Announced once, whichever replica notices it first.
CREATE UNIQUE INDEX outbox_reproduced_once ON outbox (bisect_id) WHERE event = 'reproduced';
