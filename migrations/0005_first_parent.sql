-- First-parent mode (answer at merge level first) and the facts it needs: whether a
-- candidate's first parent lies on the good side while another parent is a candidate.
ALTER TABLE bisects ADD COLUMN first_parent BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE bisect_commits ADD COLUMN first_parent_outside BOOLEAN NOT NULL DEFAULT false;
