-- Pairing (docs/protocol.md v1.1): codes a robot mints for an app to redeem for an app token.
-- Only the SHA-256 digest of a code is stored; a code is used once (used_at) and expires.
CREATE TABLE pairing_codes (
    id         bigserial PRIMARY KEY,
    device_id  text NOT NULL REFERENCES devices(id),
    digest     bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    created_by text NOT NULL,
    used_at    timestamptz,
    token_id   bigint REFERENCES tokens(id)
);
CREATE INDEX pairing_codes_device_idx ON pairing_codes (device_id);

-- Failed redemptions by client address, for the limit of 10 per minute on every node.
CREATE TABLE pairing_failures (
    address text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pairing_failures_address_at_idx ON pairing_failures (address, at);
