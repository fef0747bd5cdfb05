-- A token's lookup from the index alone (issue 60, a cold node's storm of lookups). Measured on a
-- 1M-device database with PostgreSQL's default 128 MB of shared buffers: 2,000 tokens looked up
-- in batches of 40 took 91 ms of the server's time when their pages were not in its buffers
-- (an index leaf and a heap page each), 23 ms from a covering index.

-- When a token was last used is written to a table of its own. A write to a token's row clears
-- its page's all-visible bit, and a lookup must then read the heap page after all; written once a
-- minute per token in use, `last_used_at` kept exactly the tokens a restarted node needs off the
-- index-only path. A token's row now changes only when it is issued, revoked or its rights change.
CREATE TABLE token_uses (
    token_id bigint PRIMARY KEY REFERENCES tokens(id) ON DELETE CASCADE,
    last_used_at timestamptz NOT NULL
);
-- `tokens.last_used_at` stays: the releases since the floor read and write it, and serve this
-- schema during a rolling upgrade or after a roll back (docs/operations.md). This release writes
-- only `token_uses` and shows the later of the two; a migration that raises the floor drops it.

-- Every column a lookup reads, in the digest's unique index. Built under a lock that holds
-- lookups and issuance meanwhile: 1.8 s at 3,000,000 tokens on the machine of the figures above.
ALTER TABLE tokens DROP CONSTRAINT tokens_digest_key,
    ADD CONSTRAINT tokens_digest_key UNIQUE (digest) INCLUDE (id, device_id, role, expires_at, revoked_at, access, control);

-- Newly issued tokens are on pages not yet marked all-visible until a vacuum passes; by default
-- that waits for inserts of a fifth of the table (600,000 tokens at a million devices). A
-- hundredth keeps the tokens issued lately, the ones in use, on the index-only path too.
ALTER TABLE tokens SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.01);
