-- Several nodes (docs/cluster.md): membership leases, presence and device handoffs.

-- One row per running relay process. A node renews its lease every second; a node whose
-- lease has run out is dead for everyone (queries filter on lease_expires_at), and the
-- next node to notice deletes it, its presence going with it (ON DELETE CASCADE).
CREATE TABLE relay_nodes (
    node_id          text PRIMARY KEY CHECK (node_id ~ '^[A-Za-z0-9_.:-]{1,128}$'),
    incarnation      uuid NOT NULL,          -- new on every start: a restarted node is a new member
    address          text NOT NULL,
    started_at       timestamptz NOT NULL,
    renewed_at       timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    draining         boolean NOT NULL DEFAULT false,
    sockets          integer NOT NULL DEFAULT 0,
    devices          integer NOT NULL DEFAULT 0
);

-- Which node holds which device's sockets, and since when. Written in batches by each node
-- (never on the forwarding path); a device on two live nodes at once is "split".
CREATE TABLE device_presence (
    device_id   text NOT NULL,
    node_id     text NOT NULL REFERENCES relay_nodes (node_id) ON DELETE CASCADE,
    robot_since timestamptz,                 -- null: no robot socket on this node
    apps        integer NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, node_id)
);
CREATE INDEX device_presence_node_idx ON device_presence (node_id);

-- When each device's robot was last seen going offline (for `since` while it is offline).
CREATE TABLE device_robot_left (
    device_id text PRIMARY KEY,
    left_at   timestamptz NOT NULL
);

-- A node that gives a device up to the node that claimed it leaves what the device's apps
-- must keep seeing: the status time and the replayed events (a JSON array of the events'
-- text). The claiming node takes (deletes) its rows when notified.
CREATE TABLE device_handoffs (
    id           bigserial PRIMARY KEY,
    to_node      text NOT NULL,
    device_id    text NOT NULL,
    status_since timestamptz NOT NULL,
    robot_online boolean NOT NULL,
    replay       jsonb NOT NULL DEFAULT '[]',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX device_handoffs_to_idx ON device_handoffs (to_node);
