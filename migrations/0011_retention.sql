-- Retention (docs/operations.md "Retention"): the relay prunes rows older than the operator's
-- WIMZ_*_RETENTION_DAYS in small batches, one node at a time (RetentionPruner). Batches rather
-- than monthly partitions: measured at 10 million rows in docs/performance.md, and the audit
-- log keeps its one unique event_id, which the audit writer's idempotent replays rely on.

-- The audit log stays append-only for everyone but the pruner, which says so for its own
-- transaction (SET LOCAL wimz.audit_prune = 'on') and may then only delete. Checked once per
-- statement rather than per row: a batch of thousands of deletions pays for one call.
DROP TRIGGER audit_log_append_only ON audit_log;
CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('wimz.audit_prune', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- TURN issuances arrive in time order, like the audit log: a BRIN finds the old ones for the
-- pruner at a few pages' cost.
CREATE INDEX turn_issuances_issued_brin ON turn_issuances USING brin (issued_at);
