-- The job's recent tasks, newest first: an advance's cost medians read the last few hundred
-- of them (`store::runs::median_costs`), not the job's whole history, which grows without
-- bound in a lab that runs one job for months (with 15,000 tasks of one job, the fleet
-- loadtest's advances spent 120-160 ms in that scan).
CREATE INDEX tasks_job_spec_recent ON tasks (job_spec_id, id DESC);
