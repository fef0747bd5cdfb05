-- The household's timeline (docs/protocol.md "The household's timeline", v1.6): what the robot said that the
-- household would want to know later, and the relay's own entries (the robot gone and back,
-- household changes), per device, in the order they were stored.

-- Per device: the next entry's number (taken under this row's lock, so a device's numbers rise in
-- the order their transactions commit: a reader paging `after=` never sees a gap fill in behind
-- it), its retention (null: the relay's WIMZ_TIMELINE_DAYS), its last erase, and whether the
-- robot's last presence entry said it was offline (so `robot_online` follows a `robot_offline`
-- whichever node either was written on).
CREATE TABLE timeline_devices (
    device_id      text PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    next_number    bigint NOT NULL DEFAULT 1 CHECK (next_number >= 1),
    days           integer CHECK (days >= 1),
    erased_at      timestamptz,
    robot_offline  boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- The entries, partitioned by day on `at` (the relay's receive time): a day past every device's
-- retention goes as one partition; a device's shorter retention is pruned in bounded batches.
-- `message` is the frame's exact text; `household` marks the household's changes, which a guest
-- never sees.
CREATE TABLE timeline_entries (
    device_id  text NOT NULL,
    number     bigint NOT NULL,
    at         timestamptz NOT NULL,
    source     text NOT NULL CHECK (source IN ('robot', 'relay')),
    event      text NOT NULL,
    message    text NOT NULL,
    household  boolean NOT NULL DEFAULT false
) PARTITION BY RANGE (at);
-- Every read is one device's entries by number, within its window: one descent per partition.
CREATE INDEX timeline_entries_device_number_idx ON timeline_entries (device_id, number);
-- What no day's partition covers (a clock far off, a partition not made yet) is kept, not lost.
CREATE TABLE timeline_entries_default PARTITION OF timeline_entries DEFAULT;

-- Since when the relay holds every entry: before this migration it kept none.
CREATE TABLE timeline_started (
    started_at timestamptz NOT NULL
);
INSERT INTO timeline_started VALUES (now());

-- When each guest became one (its token's creation, or the change that made it a guest): a
-- guest's timeline begins there.
ALTER TABLE tokens ADD COLUMN guest_since timestamptz;
UPDATE tokens SET guest_since = created_at WHERE access = 'guest';
CREATE FUNCTION wimz_guest_since() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.access = 'guest' AND (TG_OP = 'INSERT' OR OLD.access IS DISTINCT FROM 'guest') THEN
        NEW.guest_since := now();
    ELSIF NEW.access IS DISTINCT FROM 'guest' THEN
        NEW.guest_since := NULL;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER tokens_guest_since BEFORE INSERT OR UPDATE OF access ON tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_guest_since();

-- The first days' partitions (UTC); the relay makes the next ones ahead of time (TimelinePartitions).
DO $$
DECLARE day date;
BEGIN
    FOR day IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 2, interval '1 day')::date LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF timeline_entries FOR VALUES FROM (%L) TO (%L)',
                       'timeline_entries_p' || to_char(day, 'YYYYMMDD'),
                       day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
END $$;

-- An owner's grant of earlier history to a family member of a sealed device: the grant as put
-- (B64 of its exact bytes), who signed it and the signature, handed only to that member with its
-- epoch answers. A roster in which the member is no longer family takes it away.
CREATE TABLE sealed_history_grants (
    device_id  text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    kid        text NOT NULL CHECK (kid ~ '^[0-9a-f]{32}$'),
    grant_b64  text NOT NULL,
    by_kid     text NOT NULL CHECK (by_kid ~ '^[0-9a-f]{32}$'),
    signature  text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, kid)
);
