-- Last-known state (docs/protocol.md v1.2): the robot's latest message of each replayed event, as it
-- sent it, and when it arrived. Written behind the forwarding path (batched, at most once a second
-- per device); read by GET /api/devices/{id}/state on any node, also while the robot is offline.
CREATE TABLE device_state_events (
    device_id   text NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    name        text NOT NULL,
    message     text NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (device_id, name)
);
