-- Host inventory: what each test host is doing (reported by its worker), its current
-- kernel, its last power action, its failure streak, and whether it may take work
-- (quarantined by the server after repeated failures, drained by an operator).
ALTER TABLE hosts
    ADD COLUMN activity             TEXT NOT NULL DEFAULT 'idle'
        CHECK (activity IN ('idle', 'booting', 'running', 'powered_off')),
    ADD COLUMN current_kernel       TEXT,
    ADD COLUMN last_power_action    TEXT,
    ADD COLUMN last_power_action_at TIMESTAMPTZ,
    ADD COLUMN failure_streak       INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN quarantined_at       TIMESTAMPTZ,
    ADD COLUMN quarantine_reason    TEXT,
    ADD COLUMN drained_at           TIMESTAMPTZ,
    ADD COLUMN state_changed_at     TIMESTAMPTZ NOT NULL DEFAULT now();
