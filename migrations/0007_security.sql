-- Who may do what (see ARCHITECTURE.md, "Roles"). Token kinds: 'reader' (read the API and
-- the dashboard when reads need a token), 'api' (a submitter: submit, cancel, repositories,
-- subscriptions, kconfigs), 'operator' (everything a submitter may, plus tokens, the outbox
-- and taking over a worker's name), 'enroll' (register workers).
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_kind_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_kind_check
    CHECK (kind IN ('reader', 'api', 'operator', 'enroll'));
-- 'startup': given to the server at start (flag, environment or token file); each start
-- revokes the startup tokens of a kind that it was not given. 'api': made through the API,
-- valid until revoked.
ALTER TABLE api_tokens ADD COLUMN source TEXT NOT NULL DEFAULT 'startup'
    CHECK (source IN ('startup', 'api'));

-- The host that held a task last, kept when the task goes back to the queue: a worker may
-- only report an interruption of a task it held.
ALTER TABLE tasks ADD COLUMN last_host_id BIGINT REFERENCES hosts (id);
CREATE FUNCTION tasks_remember_holder() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.host_id IS NOT NULL THEN
        NEW.last_host_id := NEW.host_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER tasks_remember_holder BEFORE INSERT OR UPDATE OF host_id ON tasks
    FOR EACH ROW EXECUTE FUNCTION tasks_remember_holder();
UPDATE tasks SET last_host_id = host_id WHERE host_id IS NOT NULL;
