-- Push registrations (docs/protocol.md v1.2): a phone's APNs device token, registered by an app
-- token of the device for some kinds of push. One row per device and APNs token; the app token
-- that registered it owns it (putting it again from another app token moves it there).
CREATE TABLE push_registrations (
    device_id    text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    token        text NOT NULL CHECK (token ~ '^[0-9a-f]{32,200}$'),
    environment  text NOT NULL CHECK (environment IN ('production', 'sandbox')),
    app_token_id bigint NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    events       text[] NOT NULL CHECK (cardinality(events) > 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, token)
);
CREATE INDEX push_registrations_app_token_idx ON push_registrations (app_token_id);

-- Every node's mirror follows the table: 'push:<device>' on the credentials channel.
CREATE FUNCTION wimz_notify_push() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'push:' || COALESCE(NEW.device_id, OLD.device_id));
    RETURN NULL;
END $$;
CREATE TRIGGER push_registrations_notify AFTER INSERT OR UPDATE OR DELETE ON push_registrations
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_push();

-- Every removal is audited with its reason: the statement that removes sets
-- wimz.push_removal_reason for its transaction (default 'removed').
CREATE FUNCTION wimz_audit_push_removal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_log (event_id, at, event, actor, device_id, token_id, details)
    VALUES (gen_random_uuid(), now(), 'push_unregistered', 'relay', OLD.device_id, OLD.app_token_id,
            jsonb_build_object('token_suffix', right(OLD.token, 8), 'environment', OLD.environment,
                               'reason', COALESCE(NULLIF(current_setting('wimz.push_removal_reason', true), ''), 'removed')));
    RETURN NULL;
END $$;
CREATE TRIGGER push_registrations_audit AFTER DELETE ON push_registrations
    FOR EACH ROW EXECUTE FUNCTION wimz_audit_push_removal();

-- A revoked or expired app token, or a disabled device, takes its registrations with it.
CREATE FUNCTION wimz_push_follow_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revoked_at IS NOT NULL OR (NEW.expires_at IS NOT NULL AND NEW.expires_at <= now()) THEN
        PERFORM set_config('wimz.push_removal_reason', 'token_revoked', true);
        DELETE FROM push_registrations WHERE app_token_id = NEW.id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tokens_push_follow AFTER UPDATE OF revoked_at, expires_at ON tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_push_follow_token();

CREATE FUNCTION wimz_push_follow_device() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.disabled_at IS NOT NULL THEN
        PERFORM set_config('wimz.push_removal_reason', 'device_disabled', true);
        DELETE FROM push_registrations WHERE device_id = NEW.id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER devices_push_follow AFTER UPDATE OF disabled_at ON devices
    FOR EACH ROW EXECUTE FUNCTION wimz_push_follow_device();

-- robot_offline is claimed once per departure, by whichever node gets there first
-- (PushRepository.claimRobotOffline): when it was sent for the robot's latest departure.
ALTER TABLE device_robot_left ADD COLUMN offline_pushed_at timestamptz;
