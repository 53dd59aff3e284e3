-- A bisect's budget follows from the engine's predictions (`server::budget::settle`): until
-- the first one after the endpoints, `max_runs` is the cap (the operator's ceiling, or the
-- submitter's lower number); then it is set from the prediction under that cap, and raised
-- again under it when the engine finds another change point.
-- budget_cap: the cap, kept once the budget is set from a prediction.
-- budget_steps: change points the budget was set for (0: not yet set); NULL for bisects
-- stored before this, whose budget stays as it was.
ALTER TABLE bisects ADD COLUMN budget_cap integer;
ALTER TABLE bisects ADD COLUMN budget_steps integer;
ALTER TABLE bisects ALTER COLUMN budget_steps SET DEFAULT 0;
