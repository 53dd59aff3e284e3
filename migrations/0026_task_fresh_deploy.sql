-- A task may ask its runner to deploy the commit afresh before its first run (a new boot on a
-- runner that keeps what it booted): runs of one boot share that boot's level, so the engine
-- measures a commit again on a deployment of its own (`Request::fresh_deploy`).
ALTER TABLE tasks ADD COLUMN fresh_deploy BOOLEAN NOT NULL DEFAULT false;
