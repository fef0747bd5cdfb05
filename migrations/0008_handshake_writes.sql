-- What every connection writes, made cheaper (docs/performance.md "Session 15"): measured with
-- pg_stat_statements over 5,000 handshakes, the token's last_used_at update and the two audit
-- rows were most of PostgreSQL's time a handshake.

-- Room on every page for a token row's next version: last_used_at is no index's column, so its
-- update stays on the page (HOT) and writes no index entries. Applies to pages written from now
-- on (new tokens; old rows as they move); `VACUUM FULL tokens` applies it to all at once.
ALTER TABLE tokens SET (fillfactor = 70);

-- The audit log is appended in time order: a block-range index finds a time range as well as
-- the B-tree did (the listing pages by id anyway) at almost no cost per row. It is built in one
-- pass over the table without a sort; audit writes wait for it (the writer queues and retries).
DROP INDEX audit_log_at_idx;
CREATE INDEX audit_log_at_brin ON audit_log USING brin (at);
