-- The sealed household (docs/protocol.md "The sealed household (v1.5)"). The relay keeps what the
-- ends need to find each other's keys and their epochs, and nothing that opens a frame: public
-- keys, signed rosters (public keys, roles, labels) and epoch secrets sealed to each member.

-- An app's public keys (B64 of 32 bytes each), tied to its app token for this device. A token
-- that goes takes its key with it (revoked, expired: the member is gone).
CREATE TABLE sealed_member_keys (
    device_id    text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    app_token_id bigint NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    kid          text NOT NULL CHECK (kid ~ '^[0-9a-f]{32}$'),
    sign_key     text NOT NULL CHECK (sign_key ~ '^[A-Za-z0-9_-]{43}$'),
    hpke_key     text NOT NULL CHECK (hpke_key ~ '^[A-Za-z0-9_-]{43}$'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, app_token_id),
    UNIQUE (device_id, kid)
);
CREATE INDEX sealed_member_keys_app_token_idx ON sealed_member_keys (app_token_id);

-- One row per epoch the robot accepted: the owner's signed roster as sent (B64 of its exact
-- bytes, who signed, the signature) and the robot's acceptance. A device with a row is sealed.
CREATE TABLE sealed_epochs (
    device_id  text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    epoch      integer NOT NULL CHECK (epoch >= 1),
    roster     text NOT NULL,
    signed_by  text NOT NULL CHECK (signed_by ~ '^[0-9a-f]{32}$'),
    signature  text NOT NULL,
    robot_sig  text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, epoch)
);

-- The epoch secret sealed to each member of that epoch's roster (HPKE: the encapsulated key,
-- then the ciphertext, B64). Only the member's own package is ever handed out.
CREATE TABLE sealed_packages (
    device_id text NOT NULL,
    epoch     integer NOT NULL,
    kid       text NOT NULL CHECK (kid ~ '^[0-9a-f]{32}$'),
    sealed    text NOT NULL,
    PRIMARY KEY (device_id, epoch, kid),
    FOREIGN KEY (device_id, epoch) REFERENCES sealed_epochs (device_id, epoch) ON DELETE CASCADE
);

-- A new epoch reaches the node serving the device ('sealed:<device> <epoch>' on the credentials
-- channel): its apps hear of it, and from the first one on it refuses unsealed frames.
CREATE FUNCTION wimz_notify_sealed_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'sealed:' || NEW.device_id || ' ' || NEW.epoch);
    RETURN NULL;
END $$;
CREATE TRIGGER sealed_epochs_notify AFTER INSERT ON sealed_epochs
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_sealed_epoch();

-- Rosters an owner's app signed for the robot to accept (POST …/sealed/rosters): the signed
-- envelope as sent, for the epoch it names. The node holding the robot hands each one over as a
-- `roster` frame ('roster:<device> <id>'); a robot that was away asks for those above its epoch.
CREATE TABLE sealed_rosters (
    id         bigserial PRIMARY KEY,
    device_id  text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    epoch      integer NOT NULL CHECK (epoch >= 1),
    signed     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sealed_rosters_device_idx ON sealed_rosters (device_id, epoch);

CREATE FUNCTION wimz_notify_sealed_roster() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('wimz_credentials', 'roster:' || NEW.device_id || ' ' || NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER sealed_rosters_notify AFTER INSERT ON sealed_rosters
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_sealed_roster();
