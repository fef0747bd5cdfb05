-- Cheaper presence rows (docs/performance.md "Session 17"): every device's first socket on a
-- node writes one, its last socket deletes it.
--
-- No foreign key to relay_nodes any more. Its check ran once per written row (a key-share
-- lock on the node's row through a query of its own): about half of an upsert's cost. The
-- repository keeps what the key promised: a presence batch takes that lock once per
-- transaction and fails when the node's row is gone, and whatever deletes a node's row
-- deletes its presence in the same transaction (ClusterRepository). Readers join relay_nodes.
ALTER TABLE device_presence DROP CONSTRAINT device_presence_node_id_fkey;

-- Nothing hot reads presence by node alone: only a node's start, stop and purge do, and they
-- can scan. One index entry less for every row written.
DROP INDEX device_presence_node_idx;
