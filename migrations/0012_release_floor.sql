-- The oldest release that may serve this schema (docs/operations.md "Roll back"). Migrations only
-- add what older releases can ignore, except where ignoring it is unsafe: then the migration
-- raises this floor, and a relay older than it refuses to migrate or serve (it names both
-- releases and the way back: the backup taken before the upgrade). One row, set by migrations
-- only (UPDATE … SET oldest_release = …, migration = N).
CREATE TABLE release_floor (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    oldest_release text    NOT NULL CHECK (oldest_release ~ '^[0-9]+\.[0-9]+\.[0-9]+$'),
    migration      integer NOT NULL,
    reason         text    NOT NULL
);

-- Migration 0010 (the household) is the first such: a relay that predates it ignores a member's
-- access, so every guest could command the robot again. 1.1.0 is the first release with both.
INSERT INTO release_floor (oldest_release, migration, reason)
VALUES ('1.1.0', 10, 'the household: an older relay ignores a member''s access and lets every guest command the robot');
