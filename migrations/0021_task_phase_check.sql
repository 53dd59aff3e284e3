-- A task's phase is read as an enum (`perfbisect_wire::states::Phase`): the column admits
-- only the phases the scheduler and the watches write, as the other state columns do.
ALTER TABLE tasks ADD CONSTRAINT tasks_phase_check
    CHECK (phase IN ('reproducing', 'searching', 'verifying', 'watch'));
