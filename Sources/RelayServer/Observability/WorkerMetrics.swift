import RelayCore
import RelayWorkers

// The database threads' series (`Sources/RelayWorkers`), each from the worker's own counts.

extension AuditWriter: MetricsReporting {
    func report(to metrics: MetricsSink) {
        let audit = stats
        metrics.gauge("wimz_audit_queue_depth", "Audit events waiting in memory.", audit.queued)
        metrics.counter("wimz_audit_spooled_total", "Audit events written to the spool file.", audit.spooled)
        metrics.counter("wimz_audit_rejected_total", "Audit events the database refused, kept in audit-rejected.jsonl.",
                        audit.rejected)
        metrics.counter("wimz_audit_unmade_total", "Audit events that could not be made (no randomness for their id); each logged.",
                        unmadeCount)
    }
}

extension StoreMonitor: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.counter("wimz_store_schema_checks_total",
                        "Schema status reads by the store monitor: at most one a second however many notifications wake it, and one at each connect.",
                        statusChecks)
        metrics.counter("wimz_credential_lookup_statements_total",
                        "Statements that read presented tokens from the store (up to 1,000 each): against wimz_credential_lookups_total, how well lookups are batched.",
                        lookupStatements)
    }
}

extension TurnSessionCutter: MetricsReporting {
    func report(to metrics: MetricsSink) {
        let cuts = stats
        let help = "Removed members' TURN cuts by this node: done on every TURN server, or to retry."
        metrics.counter("wimz_turn_cuts_total", help, [("outcome", "done")], cuts.cutsDone)
        metrics.counter("wimz_turn_cuts_total", help, [("outcome", "retry")], cuts.cutsRetried)
        metrics.counter("wimz_turn_sessions_cut_total", "TURN sessions cancelled through coturn's CLI (cs).", cuts.sessionsCut)
        metrics.counter("wimz_turn_admin_failures_total", "TURN CLI conversations that failed (unreachable, refused, no prompt).",
                        cuts.serverFailures)
        metrics.gauge("wimz_turn_cuts_pending", "TURN cuts not done yet, cluster-wide (should return to 0).", cuts.pending)
    }
}

extension RetentionPruner: MetricsReporting {
    func report(to metrics: MetricsSink) {
        let pruned = stats
        for table in Table.allCases {
            metrics.counter("wimz_retention_deleted_rows_total", "Rows this node pruned past their retention, by table.",
                            [("table", table.rawValue)], pruned.deleted[table.rawValue] ?? 0)
        }
        metrics.counter("wimz_retention_deleted_rows_total", "Rows this node pruned past their retention, by table.",
                        [("table", "timeline_entries")], pruned.deleted["timeline_entries"] ?? 0)
        metrics.counter("wimz_timeline_partitions_dropped_total", "Timeline day partitions this node dropped: past every device's retention.",
                        pruned.partitionsDropped)
        metrics.counter("wimz_retention_rounds_total", "Pruning rounds this node ran holding the cluster's pruning lock.",
                        pruned.rounds)
        metrics.counter("wimz_retention_errors_total", "Pruning rounds that failed (retried next interval; database outages are not counted).",
                        pruned.errors)
        for size in pruned.sizes {
            metrics.gauge("wimz_table_bytes", "Each table's size on disk with its indexes and TOAST, as last read.",
                          [("table", size.table)], Int(size.bytes))
            metrics.gauge("wimz_table_rows", "Each table's row count as PostgreSQL estimates it (autovacuum's reltuples).",
                          [("table", size.table)], Int(size.rows))
        }
    }
}
