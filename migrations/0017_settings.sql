-- The robot's settings (docs/protocol.md "The robot's settings", v1.6): what the household asked
-- for (desired, versioned: a write names the version it read) and what the robot last said it
-- runs (reported, with the desired version it applied). Documents are kept as their JSON text, as
-- sent: for a sealed device a sealed frame the relay can't open. A device that goes takes its row.
CREATE TABLE device_settings (
    device_id        text PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    desired_version  bigint NOT NULL DEFAULT 0 CHECK (desired_version >= 0),
    desired_doc      text,
    desired_by       bigint,
    desired_at       timestamptz,
    reported_version bigint CHECK (reported_version >= 0),
    reported_doc     text,
    reported_at      timestamptz,
    CHECK ((desired_version = 0) = (desired_doc IS NULL)),
    CHECK ((reported_version IS NULL) = (reported_doc IS NULL))
);

-- Every change reaches every node ('settings:<device> <desired> <reported>', '-' for none): the
-- node holding the robot hands it a newer desired document, the ones holding apps tell them.
CREATE FUNCTION wimz_notify_settings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'settings:' || NEW.device_id || ' ' || NEW.desired_version || ' '
                                          || coalesce(NEW.reported_version::text, '-'));
    RETURN NULL;
END $$;
CREATE TRIGGER device_settings_notify AFTER INSERT OR UPDATE ON device_settings
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_settings();
