-- The household (docs/protocol.md v1.3): access levels on app tokens, invitations, and the TURN
-- sessions a removal must cut.

-- Every token has an access level; those issued before v1.3 are owners. A member's `until` is
-- the token's own expires_at: one time ends a token (docs/protocol.md "The household").
ALTER TABLE tokens
    ADD COLUMN access  text    NOT NULL DEFAULT 'owner' CHECK (access IN ('owner', 'family', 'guest')),
    ADD COLUMN control boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT tokens_robot_is_owner CHECK (role = 'app' OR access = 'owner'),
    ADD CONSTRAINT tokens_control_is_a_guest_grant CHECK (access = 'guest' OR NOT control);

-- A change of access or control reaches every node's token mirror (and its live sockets).
DROP TRIGGER tokens_notify ON tokens;
CREATE TRIGGER tokens_notify AFTER INSERT OR UPDATE OF revoked_at, expires_at, device_id, role, access, control ON tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_notify_token();

-- The cutters look for app tokens that expired lately (their TURN sessions are cut too).
CREATE INDEX tokens_expiry_idx ON tokens (expires_at) WHERE role = 'app' AND revoked_at IS NULL;

-- An invitation is a pairing code that carries what it grants: redeemed through the same
-- POST /api/pairing, with the same digest lookup, single use and failure limit.
ALTER TABLE pairing_codes
    ADD COLUMN access       text CHECK (access IN ('family', 'guest')),
    ADD COLUMN control      boolean NOT NULL DEFAULT false,
    ADD COLUMN until        timestamptz,
    ADD COLUMN label        text,
    -- The owner's token that invited (NULL: a robot's or operator's plain pairing code).
    ADD COLUMN invited_by   bigint REFERENCES tokens(id),
    ADD COLUMN cancelled_at timestamptz;
CREATE INDEX pairing_codes_pending_invites_idx ON pairing_codes (device_id)
    WHERE access IS NOT NULL AND used_at IS NULL AND cancelled_at IS NULL;

-- TURN sessions to cut on coturn (docs/protocol.md v1.3 "Removal cuts the video"): one row per
-- removed, revoked or expired app token, whichever node or process removed it. Every relay's
-- cutter claims due rows (a lease, so a crashed node's claim runs out), cuts on every TURN
-- server of its WIMZ_TURN_ADMIN, and marks them done: once per removal in a cluster.
CREATE TABLE turn_cuts (
    id              bigserial PRIMARY KEY,
    token_id        bigint NOT NULL UNIQUE REFERENCES tokens(id) ON DELETE CASCADE,
    device_id       text NOT NULL,
    reason          text NOT NULL CHECK (reason IN ('revoked', 'expired')),
    requested_at    timestamptz NOT NULL DEFAULT now(),
    -- Servers (host:port) already cut, so a retry skips them.
    servers_done    text[] NOT NULL DEFAULT '{}',
    sessions_cut    integer NOT NULL DEFAULT 0,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_by      text,
    claimed_until   timestamptz,
    last_error      text,
    done_at         timestamptz
);
CREATE INDEX turn_cuts_due_idx ON turn_cuts (next_attempt_at) WHERE done_at IS NULL;
CREATE INDEX turn_issuances_token_idx ON turn_issuances (token_id, expires_at);

-- A revoked app token asks for its cut in the revoking transaction (CLI, admin API, the robot,
-- an owner or plain SQL alike), and wakes the cutters.
CREATE FUNCTION wimz_turn_cut_on_revoke() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.role = 'app' AND NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS NULL THEN
        INSERT INTO turn_cuts (token_id, device_id, reason) VALUES (NEW.id, NEW.device_id, 'revoked')
        ON CONFLICT (token_id) DO NOTHING;
        PERFORM pg_notify('wimz_turn_cuts', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tokens_turn_cut AFTER UPDATE OF revoked_at ON tokens
    FOR EACH ROW EXECUTE FUNCTION wimz_turn_cut_on_revoke();
