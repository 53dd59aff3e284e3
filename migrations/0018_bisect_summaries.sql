-- What list pages and a running bisect's page read, kept on the bisect's row (issue 14), so
-- that no read loads runs or every candidate's probability:
-- `measured_change`: the change as `change::measure` computes it, written by every advance
-- and after the bisect ends (NULL until then: readers compute it);
-- `belief`: the engine's belief in brief (most likely culprit, its probability, how many
-- candidates hold 90% of the mass, the entropy left), written with each round of assessments.
ALTER TABLE bisects
    ADD COLUMN measured_change JSONB,
    ADD COLUMN belief JSONB;
