-- The submit of a large range stores only what scheduling needs. Its subjects and authors
-- are read from the mirror with `git cat-file --batch` (0.35-0.42 s for 100,000 commits),
-- which bounded the submit from below while they were part of its COPY; and the hash index
-- on bisect_commits.sha, filled in random order, was about half of that COPY's cost in
-- PostgreSQL (measured on a scratch cluster: 100,000 rows, heap ~0.24 s, primary key
-- ~0.13 s, hash index ~0.40 s, under the same load).
--
-- So bisect_commits keeps the graph (idx, sha, parents) under its primary key alone, and a
-- table of its own takes each commit's sha again with its subject and author, and the hash
-- index that lookups by sha use. `server::details` fills it once the submit has answered,
-- in one COPY; until then `bisects.details_missing` is set, and lookups by sha read
-- bisect_commits along its primary key (one bisect's rows) instead.
CREATE TABLE bisect_commit_details (
    bisect_id   BIGINT NOT NULL,
    idx         INTEGER NOT NULL,
    sha         TEXT NOT NULL,
    subject     TEXT NOT NULL,
    author      TEXT NOT NULL,
    PRIMARY KEY (bisect_id, idx)
);

INSERT INTO bisect_commit_details (bisect_id, idx, sha, subject, author)
SELECT bisect_id, idx, sha, subject, author FROM bisect_commits;

CREATE INDEX bisect_commit_details_sha ON bisect_commit_details USING hash (sha);
DROP INDEX bisect_commits_sha;
ALTER TABLE bisect_commits DROP COLUMN subject, DROP COLUMN author;

-- Set by the submit in the bisect's transaction, cleared in the transaction that stores the
-- details: a server that dies in between leaves it set, and any replica fills it (at start,
-- every few seconds, and before a report is built).
ALTER TABLE bisects ADD COLUMN details_missing BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX bisects_details_missing ON bisects (id) WHERE details_missing;
