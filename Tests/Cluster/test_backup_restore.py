"""Backup and restore as docs/operations.md says: a running relay's database backed up with the
shipped backup command (deploy/backup/wimz-relay-backup: pg_dump, custom format, rotation),
restored with pg_restore into a fresh PostgreSQL server, and a relay started on it: the same
devices, tokens (a robot and an app pair again with their old tokens), TURN secrets and push
registrations."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

from fleet import Fleet, check_all
from turn_probe import turn_password
from wimz_testkit import Database, LoopbackPostgres, RelayNode, env, free_port, http_json

ROOT = Path(__file__).resolve().parents[2]
BACKUP = ROOT / "deploy/backup/wimz-relay-backup"


def backup(url: str, directory: Path, keep: int) -> None:
    subprocess.run([str(BACKUP), "--dir", str(directory), "--keep", str(keep)], check=True, capture_output=True,
                   env=dict(os.environ, WIMZ_DATABASE_URL=url))


async def test_a_backup_restores_into_a_fresh_server_and_serves_the_same_fleet(apns, tmp_path):
    source = Database(prefix="backup")
    node = RelayNode.started(source, env=apns.relay_env)
    devices = {device: source.add_device(device) for device in ("rex", "bella")}
    source.cli("turn-secret", "add")
    phone = secrets.token_hex(32)
    status, _ = http_json(f"{node.url}/api/devices/rex/push", devices["rex"][1], "PUT",
                          {"platform": "apns", "token": phone, "environment": "production", "events": ["bark_detected"]})
    assert status == 200
    before = {table: source.psql(f"SELECT count(*) FROM {table}") for table in ("devices", "tokens", "turn_secret", "push_registrations")}
    secret = source.psql("SELECT value FROM turn_secret ORDER BY id")

    # Three backups of the running relay's database, the newest two kept.
    backups = tmp_path / "backups"
    for _ in range(3):
        backup(source.url, backups, keep=2)
        time.sleep(1.1)  # the names have a second's resolution
    dumps = sorted(backups.glob("wimz-*.dump"))
    assert len(dumps) == 2 and not list(backups.glob(".*partial"))
    node.stop()
    source.drop()  # the original is gone: only the backup is left

    # A fresh server, an empty database, the newest backup restored into it.
    fresh = LoopbackPostgres(Path(env("WIMZ_TEST_WORKDIR")) / f"restore-pg-{secrets.token_hex(3)}", free_port())
    try:
        restored = Database(admin_url=fresh.admin_url, prefix="restored", migrated=False)
        subprocess.run(["pg_restore", "--no-owner", "--exit-on-error", f"--dbname={restored.url}", str(dumps[-1])],
                       check=True, capture_output=True)
        assert "schema is current" in restored.cli("migrate")  # the backup carries the applied migrations
        after = {table: restored.psql(f"SELECT count(*) FROM {table}") for table in before}
        assert after == before
        assert restored.psql("SELECT value FROM turn_secret ORDER BY id") == secret
        assert phone in restored.cli("push", "list", "--device", "rex")

        node = RelayNode.started(restored, env={**apns.relay_env, "WIMZ_TURN_URLS": "turn:127.0.0.1:3478"})
        try:
            fleet = Fleet(node.url, devices)
            await fleet.start()
            try:
                results = await check_all(node.url, devices, timeout=5.0)
            finally:
                await fleet.stop()
            assert all(r["ok"] for r in results), results
            # Signed with the restored secret (coturn, reading the same table, would accept it).
            status, turn = http_json(f"{node.url}/api/turn/credentials", devices["bella"][0])
            assert status == 200
            expected = turn_password(secret, turn["username"])
            assert turn["credential"] == expected
        finally:
            node.stop()
            restored.drop()
    finally:
        fresh.stop()
