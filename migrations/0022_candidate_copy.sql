-- A large range's candidate set is one COPY of 100,000 rows into bisect_commits, on the
-- submit's path. Measured on a scratch cluster, the COPY took 1.33-1.55 s, of which the
-- foreign key to bisects (a check per row) cost ~40% and the unique B-tree on
-- (bisect_id, sha), filled in random order, another ~30%: 0.37-0.81 s without both.
--
-- Nothing deletes a bisect, so the foreign key (and its ON DELETE CASCADE) guards nothing;
-- the row's bisect is inserted in the same transaction as its candidates.
ALTER TABLE bisect_commits DROP CONSTRAINT bisect_commits_bisect_id_fkey;
-- A bisect's shas are unique by construction (one row per commit of the walk). Every lookup
-- by sha (shown commits, subjects, the culprit's first parent, the list's culprit subject)
-- names its bisect too: a hash index on the sha finds the few bisects that hold a commit,
-- and is cheaper to fill than a B-tree.
ALTER TABLE bisect_commits DROP CONSTRAINT bisect_commits_bisect_id_sha_key;
CREATE INDEX bisect_commits_sha ON bisect_commits USING hash (sha);
