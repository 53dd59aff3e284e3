-- The step, in noise standard deviations, that a bisect's budget was last set from
-- (`perfbisect_engine::budget`): when the measured step shrinks well below it, the
-- prediction the budget came from was too hopeful, and the budget is set again.
ALTER TABLE bisects ADD COLUMN budget_basis double precision;
