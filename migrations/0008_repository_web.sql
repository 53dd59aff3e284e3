-- A repository's public web view, as a commit URL template with `{sha}` (cgit, gitweb or
-- GitHub style): reports and the dashboard link commits there, not to the fetch URL.
ALTER TABLE repositories ADD COLUMN web_url TEXT;
