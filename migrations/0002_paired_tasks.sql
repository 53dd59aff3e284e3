-- Verification runs two commits interleaved on one host: a task may carry a second commit.
ALTER TABLE tasks ADD COLUMN pair_sha TEXT;
-- Which commit's build failed (the task's own or its pair's).
ALTER TABLE tasks ADD COLUMN failed_sha TEXT;
