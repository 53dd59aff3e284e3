-- Fetches run off the request path (issue 11). A repository is registered in the `mirroring`
-- state and a background job fetches it; a bisect whose revisions need a fetch waits as
-- `fetching` until one is done.
--
-- Generations order the fetches a repository was asked for: every request takes the next
-- `fetch_requested`; a fetch that starts records the value it read, and sets `fetch_done` to
-- it when it ends (successfully or not, `fetch_error` says which). A bisect waiting for a
-- fetch holds the generation it asked for and is resolved once `fetch_done` reaches it.
ALTER TABLE repositories
    ADD COLUMN state TEXT NOT NULL DEFAULT 'ready'
        CHECK (state IN ('mirroring', 'ready', 'failed')),
    -- The last fetch's error, credential-free (user info stripped by perfbisect-gitfetch);
    -- NULL after a fetch that worked.
    ADD COLUMN fetch_error TEXT,
    ADD COLUMN fetch_requested BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN fetch_done BIGINT NOT NULL DEFAULT 0;

ALTER TABLE bisects DROP CONSTRAINT bisects_status_check;
ALTER TABLE bisects ADD CONSTRAINT bisects_status_check CHECK (status IN
    ('fetching', 'queued', 'reproducing', 'searching', 'verifying', 'found',
     'not_reproduced', 'inconclusive', 'failed', 'cancelled'));
-- While `fetching`, good_sha and bad_sha are '' and the bisect has no candidates: they are
-- set when the range is resolved, after the fetch of `fetch_generation`.
ALTER TABLE bisects
    ADD COLUMN fetch_generation BIGINT,
    ADD COLUMN use_merge_base BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX bisects_fetching ON bisects (repository_id) WHERE status = 'fetching';
