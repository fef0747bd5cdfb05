-- Missed-event recovery (docs/protocol.md v1.1): a hand-off also carries the device's numbered
-- history, {"epoch":E,"last_seq":N,"entries":[{"seq":N,"age_ms":MS,"text":T},…]}, so apps that
-- resume on the new node recover. NULL: the device had none.
ALTER TABLE device_handoffs ADD COLUMN history jsonb;
