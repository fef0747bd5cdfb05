-- wimz-relay schema v1: devices, tokens, audit log, TURN secrets and issuances.
-- Append-only: never edit an applied file (the runner checks checksums); add a new one.

CREATE TABLE devices (
    id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_.-]{1,64}$'),
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz
);

-- Bearer tokens. Only the SHA-256 digest of the secret is stored.
CREATE TABLE tokens (
    id           bigserial PRIMARY KEY,
    device_id    text NOT NULL REFERENCES devices(id),
    role         text NOT NULL CHECK (role IN ('robot', 'app')),
    digest       bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    label        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX tokens_device_idx ON tokens (device_id);

-- Append-only audit log. event_id makes replays from the daemon's spool idempotent.
-- device_id has no foreign key: failed authentications name devices that may not exist.
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    event_id    uuid NOT NULL UNIQUE,
    at          timestamptz NOT NULL,
    event       text NOT NULL,
    actor       text NOT NULL,
    device_id   text,
    token_id    bigint,
    remote_addr text,
    details     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_device_at_idx ON audit_log (device_id, at);
CREATE INDEX audit_log_at_idx ON audit_log (at);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- TURN shared secrets. coturn's psql-userdb reads `select value from turn_secret where
-- realm=$1` on every allocation, so every row here is accepted by coturn; retiring a
-- secret deletes its row. The newest row of a realm signs new credentials.
CREATE TABLE turn_secret (
    id         bigserial UNIQUE,
    realm      varchar(127) NOT NULL DEFAULT '',
    value      varchar(256) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (realm, value)
);

-- Every TURN credential handed out (HTTP or pushed over the robot socket).
CREATE TABLE turn_issuances (
    id          bigserial PRIMARY KEY,
    device_id   text NOT NULL,
    token_id    bigint,
    role        text NOT NULL CHECK (role IN ('robot', 'app')),
    user_id     text NOT NULL,
    username    text NOT NULL,
    secret_id   bigint,
    issued_at   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    client_addr text,
    via         text NOT NULL CHECK (via IN ('http', 'push'))
);
CREATE INDEX turn_issuances_device_idx ON turn_issuances (device_id, issued_at);
CREATE INDEX turn_issuances_secret_idx ON turn_issuances (secret_id, expires_at);

-- Running daemons LISTEN on wimz_credentials so revocations and disables made by any
-- process (CLI, admin API, plain SQL) close live sockets within a second.
CREATE FUNCTION wimz_notify_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'token:' || NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER tokens_notify AFTER INSERT OR UPDATE OF revoked_at, expires_at, device_id, role ON tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_token();

CREATE FUNCTION wimz_notify_device() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'device:' || NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER devices_notify AFTER INSERT OR UPDATE OF disabled_at ON devices
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_device();

CREATE FUNCTION wimz_notify_turn_secret() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'turn_secret:' || COALESCE(NEW.realm, OLD.realm));
    RETURN NULL;
END $$;
CREATE TRIGGER turn_secret_notify AFTER INSERT OR UPDATE OR DELETE ON turn_secret
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_turn_secret();
