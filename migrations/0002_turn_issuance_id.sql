-- Each issuance carries the id of its audit event, so a replay from the relay's spool file
-- (after a database outage across a shutdown) stores it once. Older rows have none.
ALTER TABLE turn_issuances ADD COLUMN issuance_id uuid;
CREATE UNIQUE INDEX turn_issuances_issuance_id_idx ON turn_issuances (issuance_id);
