"""A newcomer's local cluster (scripts/cluster.sh): N relay nodes on loopback behind a real
HAProxy, one PostgreSQL, from the repository's test kit (Tests/testkit/wimz_testkit.py), with
commands on stdin to kill, stop, start and add nodes."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "testkit"))
from wimz_testkit import Cluster  # noqa: E402


def main() -> None:
    """``python3 wimz_cluster.py --admin-url URL [--nodes 3] [--port 8080]``: starts a local
    cluster and takes commands on stdin until ``quit`` (or end of input / Ctrl-C)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--admin-url", required=True, help="libpq conninfo of a PostgreSQL server (dbname=postgres)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--port", type=int, default=8080, help="HAProxy's port on 127.0.0.1")
    parser.add_argument("--relay-bin", required=True)
    parser.add_argument("--migrations", required=True)
    args = parser.parse_args()
    cluster = Cluster(args.nodes, admin_url=args.admin_url, relay_bin=args.relay_bin, migrations=args.migrations,
                      haproxy_port=args.port, node_env={"WIMZ_DRAIN": "3"})
    try:
        (device, (robot, app)), = cluster.add_devices(1, prefix="demo").items()
        status = f"WIMZ_DATABASE_URL='{cluster.database_url}' {args.relay_bin} cluster status"
        print(f"""
{args.nodes} relay nodes behind HAProxy at {cluster.haproxy.url} (nodes: {', '.join(f'{n.name}={n.url}' for n in cluster.nodes.values())})
admin token: {cluster.admin_token}
demo device {device}: robot token {robot}
                      app token   {app}
watch the cluster:   watch -n1 "{status}"
a robot:             WIMZ_RELAY_URL={cluster.haproxy.url} WIMZ_DEVICE_ID={device} WIMZ_ROBOT_TOKEN={robot} scripts/example-robot.sh
commands here: status | kill NODE | stop NODE | start NODE | add | quit
""", flush=True)
        for line in iter(input, "quit"):
            words = line.split()
            node = cluster.nodes.get(words[1]) if len(words) > 1 else None
            if not words:
                continue
            if words[0] == "status":
                print(cluster.cli("cluster", "status"), end="")
            elif words[0] == "add":
                print(f"added {cluster.add_node().name}")
            elif node and words[0] == "kill":
                node.kill()
            elif node and words[0] == "stop":
                print(f"{node.name} drained and exited in {node.stop():.1f} s")
            elif node and words[0] == "start":
                node.start()
            else:
                print("commands: status | kill NODE | stop NODE | start NODE | add | quit")
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
