-- What the engine measured about the range beside its decision (issue 9): the change against
-- the good level, every change point with its size, the budget prediction, a contrary
-- direction hint and the verification's e-value. Rewritten on every advance.
ALTER TABLE bisects ADD COLUMN findings JSONB;
