-- A number that moves whenever a bisect is added or removed, or its status, culprit or
-- endpoints change: what the list pages' cache (`server/src/list_cache.rs`) compares on
-- every request, so a page is never served with a bisect missing or a status out of date,
-- whichever replica made the change.
--
-- A sequence, not a counter row: `nextval` takes no row lock, so status changes in
-- different bisects never wait for each other. The triggers are deferred to the commit:
-- a submit that inserts its bisect row and then stores 100,000 candidates moves the number
-- only as it commits. Moved at the insert, a page read during those seconds would be cached
-- under the new number without the new bisect, and kept until the cache's age limit.
CREATE SEQUENCE bisect_list_version;

CREATE FUNCTION bump_bisect_list_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('bisect_list_version');
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER bisects_listed
    AFTER INSERT OR DELETE ON bisects
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION bump_bisect_list_version();

-- The advance rewrites a running bisect's status every round (with its reason), mostly to
-- the same value: only a change counts.
CREATE CONSTRAINT TRIGGER bisects_relisted
    AFTER UPDATE OF status, culprit_sha, good_sha, bad_sha ON bisects
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.culprit_sha IS DISTINCT FROM NEW.culprit_sha
          OR OLD.good_sha IS DISTINCT FROM NEW.good_sha
          OR OLD.bad_sha IS DISTINCT FROM NEW.bad_sha)
    EXECUTE FUNCTION bump_bisect_list_version();
