-- The disabled devices, apart (issue 60, a cold node's storm of lookups): a token's lookup asks
-- whether its device is disabled, and joining `devices` for it cost every lookup a descent of the
-- devices' primary key (text, collated) and a heap page — about a third of the statement. This
-- index holds only the disabled devices, so for the rest the answer is a descent of an index of a
-- few pages that finds nothing.
CREATE INDEX devices_disabled_idx ON devices (id) WHERE disabled_at IS NOT NULL;
