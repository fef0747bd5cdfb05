-- Live Activities (docs/protocol.md v1.4): the tokens an app hands over so the relay can keep a
-- mission on the lock screen. Both belong to one app token of one device and go with it (revoked,
-- expired, removed member, disabled device), as push registrations do (0007).

-- The push-to-start token (iOS 17.2+): one per app token and device; a new one replaces the old.
CREATE TABLE live_activity_start_tokens (
    device_id    text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    app_token_id bigint NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    token        text NOT NULL CHECK (token ~ '^[0-9a-f]{32,200}$'),
    environment  text NOT NULL CHECK (environment IN ('production', 'sandbox')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, app_token_id)
);

-- The update token of an activity the app runs (ActivityKit's Activity.id): at most four per app
-- token and device (the repository counts under the app token's row lock).
CREATE TABLE live_activities (
    device_id           text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    app_token_id        bigint NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    activity_id         text NOT NULL CHECK (activity_id ~ '^[A-Za-z0-9-]{1,64}$'),
    token               text NOT NULL CHECK (token ~ '^[0-9a-f]{32,200}$'),
    environment         text NOT NULL CHECK (environment IN ('production', 'sandbox')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, app_token_id, activity_id)
);
CREATE INDEX live_activities_app_token_idx ON live_activities (app_token_id);
CREATE INDEX live_activity_start_tokens_app_token_idx ON live_activity_start_tokens (app_token_id);

-- Every node's mirror follows both tables: 'live:<device>' on the credentials channel.
CREATE FUNCTION wimz_notify_live_activity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'live:' || COALESCE(NEW.device_id, OLD.device_id));
    RETURN NULL;
END $$;
CREATE TRIGGER live_activity_start_tokens_notify AFTER INSERT OR UPDATE OR DELETE ON live_activity_start_tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_live_activity();
CREATE TRIGGER live_activities_notify AFTER INSERT OR UPDATE OR DELETE ON live_activities
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_live_activity();

-- Every removal is audited with its reason (wimz.live_activity_removal_reason for the transaction,
-- default 'removed'): which token went (its last 8 digits) and, for an activity, its id.
CREATE FUNCTION wimz_audit_live_activity_removal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_log (event_id, at, event, actor, device_id, token_id, details)
    VALUES (gen_random_uuid(), now(), 'live_activity_removed', 'relay', OLD.device_id, OLD.app_token_id,
            jsonb_build_object('kind', TG_ARGV[0], 'token_suffix', right(OLD.token, 8),
                               'activity_id', to_jsonb(OLD) -> 'activity_id',
                               'reason', COALESCE(NULLIF(current_setting('wimz.live_activity_removal_reason', true), ''), 'removed')));
    RETURN NULL;
END $$;
CREATE TRIGGER live_activity_start_tokens_audit AFTER DELETE ON live_activity_start_tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_audit_live_activity_removal('start_token');
CREATE TRIGGER live_activities_audit AFTER DELETE ON live_activities
    FOR EACH ROW EXECUTE FUNCTION wimz_audit_live_activity_removal('activity');

-- A revoked or expired app token (a removed member's is revoked), or a disabled device, takes its
-- tokens with it.
CREATE FUNCTION wimz_live_activity_follow_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revoked_at IS NOT NULL OR (NEW.expires_at IS NOT NULL AND NEW.expires_at <= now()) THEN
        PERFORM set_config('wimz.live_activity_removal_reason', 'token_revoked', true);
        DELETE FROM live_activity_start_tokens WHERE app_token_id = NEW.id;
        DELETE FROM live_activities WHERE app_token_id = NEW.id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tokens_live_activity_follow AFTER UPDATE OF revoked_at, expires_at ON tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_live_activity_follow_token();

CREATE FUNCTION wimz_live_activity_follow_device() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.disabled_at IS NOT NULL THEN
        PERFORM set_config('wimz.live_activity_removal_reason', 'device_disabled', true);
        DELETE FROM live_activity_start_tokens WHERE device_id = NEW.id;
        DELETE FROM live_activities WHERE device_id = NEW.id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER devices_live_activity_follow AFTER UPDATE OF disabled_at ON devices
    FOR EACH ROW EXECUTE FUNCTION wimz_live_activity_follow_device();

-- A device's open mission run (v1.4 "A mission run"): its state (the content state, robot_online
-- included) and when it opened; no row, no run. Written behind by the node that serves the device
-- (at most once a second), read by a node when the device arrives there, so the run is the same
-- after a restart and on another node. Ended by that node, or — when the robot has been gone
-- WIMZ_PUSH_OFFLINE_AFTER seconds — claimed by whichever node deletes the row first.
CREATE TABLE device_mission_runs (
    device_id  text PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    opened_at  timestamptz NOT NULL,
    state      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- An ended run: every node forgets what it holds of it ('run:<device>' on the credentials channel).
CREATE FUNCTION wimz_notify_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'run:' || OLD.device_id);
    RETURN NULL;
END $$;
CREATE TRIGGER device_mission_runs_ended AFTER DELETE ON device_mission_runs
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_run_ended();
