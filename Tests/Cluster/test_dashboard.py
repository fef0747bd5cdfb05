"""The operator's view: every alert rule points at its runbook section, and every metric the
Grafana dashboard (deploy/grafana/wimz-relay.json) queries is one a live relay exports — after
a little traffic, because labelled counters (closes, drops, auth failures, pushes) have no series
until their first event."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from apns_standin import APNsStandIn
from metrics_reference import replaced
from wimz_testkit import Database, RelayNode, http_json

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = "https://github.com/wimzai/wimz-relay/blob/main/docs/runbook.md"


def test_every_alert_has_its_runbook_section():
    rules = (ROOT / "deploy/prometheus/wimz-relay.rules.yml").read_text()
    # Each rule from its "- alert:" line to the next (promtool checks the file's YAML itself).
    alerts = re.findall(r"- alert: (\w+)\n(.*?)(?=\n\s*- alert: |\Z)", rules, re.S)
    runbook = (ROOT / "docs/runbook.md").read_text()
    assert len(alerts) == rules.count("- alert: ") > 0
    for name, rule in alerts:
        assert f'runbook_url: "{RUNBOOK}#{name}"' in rule, name
        section = runbook.split(f'<a id="{name}"></a>\n## {name}\n', 1)
        assert len(section) == 2, f"docs/runbook.md has no section for {name}"
        body = section[1].split("\n<a id=", 1)[0]
        for part in ("**Means**", "**Check**", "**Do**"):
            assert part in body, f"{name}: no {part}"


async def _traffic(node: RelayNode, device: str, robot_token: str, app_token: str, apns: APNsStandIn) -> None:
    """One of each event the labelled counters count: a refused token, a message to an offline
    robot, a robot replaced (close 4001), a push delivered."""
    phone = secrets.token_hex(32)
    status, _ = http_json(f"{node.url}/api/devices/{device}/push", app_token, "PUT",
                          {"platform": "apns", "token": phone, "environment": "production", "events": ["bark_detected"]})
    assert status == 200
    ws = node.url.replace("http://", "ws://")
    with pytest.raises(InvalidStatus):
        await connect(f"{ws}/ws/app?device_id={device}&token=wimz_a_not-a-token")
    async with connect(f"{ws}/ws/app?device_id={device}&token={app_token}") as app:
        await app.recv()  # device_status: offline
        await app.send(json.dumps({"type": "command", "id": "1", "command": "treat", "data": {}}))
        assert json.loads(await asyncio.wait_for(app.recv(), 5))["code"] == "device_offline"
    robot_headers = {"Authorization": f"Bearer {robot_token}"}
    async with connect(f"{ws}/ws/robot?device_id={device}", additional_headers=robot_headers) as first:
        async with connect(f"{ws}/ws/robot?device_id={device}", additional_headers=robot_headers) as second:
            await asyncio.wait_for(first.wait_closed(), 5)
            assert first.close_code == 4001
            await second.send(json.dumps({"type": "event", "event": "bark_detected", "data": {"dog_name": "Rex"}}))
            apns.wait_for(lambda seen: any(r.token == phone for r in seen))


def exported_names(text: str) -> set[str]:
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    names |= {re.split(r"[{ ]", line, 1)[0] for line in text.splitlines() if line and not line.startswith("#")}
    return names


async def test_every_dashboard_metric_is_exported(apns):
    database = Database(prefix="dash")
    node = RelayNode.started(database, env=apns.relay_env)
    dashboard = json.loads((ROOT / "deploy/grafana/wimz-relay.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bwimz_[a-z0-9_]+", target["expr"])}
    assert len(queried) > 20
    try:
        robot_token, app_token = database.add_device("dash-robot")
        await _traffic(node, "dash-robot", robot_token, app_token, apns)
        # APNs's answer is counted a moment after the stand-in has the push.
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(f"{node.url}/metrics", timeout=5) as answer:
                exported = exported_names(answer.read().decode())
            # A histogram's series are its name with _bucket, _sum and _count.
            missing = {name for name in queried
                       if name not in exported and re.sub(r"_(bucket|sum|count)$", "", name) not in exported}
            if not missing or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    finally:
        node.stop()
        database.drop()
    assert not missing, f"the dashboard queries metrics the relay does not export: {sorted(missing)}"


def quiet_metrics(prefix: str, env: dict[str, str] | None = None) -> str:
    """/metrics of a node that has seen no traffic. The table sizes, a measurement and not a
    count, appear with the retention thread's first read just after start (a 0 before it would
    be a false reading), so the scrape waits for that read, however long a busy machine takes."""
    database = Database(prefix=prefix)
    node = RelayNode.started(database, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            with urllib.request.urlopen(f"{node.url}/metrics", timeout=5) as answer:
                text = answer.read().decode()
            if "wimz_table_bytes{" in text or time.monotonic() > deadline:
                return text
            time.sleep(0.1)
    finally:
        node.stop()
        database.drop()


def test_every_dashboard_metric_has_a_series_before_any_traffic(apns):
    # A panel over a counter that appears only with its first increment reads "no data", not 0,
    # on a quiet node: every metric a panel queries is there from the start.
    text = quiet_metrics("dash_quiet", apns.relay_env)
    dashboard = json.loads((ROOT / "deploy/grafana/wimz-relay.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bwimz_[a-z0-9_]+", target["expr"])}
    exported = exported_names(text)
    missing = {name for name in queried if name not in exported and re.sub(r"_(bucket|sum|count)$", "", name) not in exported}
    assert not missing, f"no series before the first event: {sorted(missing)}"
    assert 'wimz_drops_total{reason="queue_full"} 0' in text
    assert 'wimz_pushes_total{kind="bark_detected",result="delivered"} 0' in text


def test_the_metrics_reference_is_what_a_relay_exports():
    # docs/metrics.md's table is generated from a relay's own help texts (scripts/generate.sh):
    # a metric added, renamed or explained anew in the code is a table out of date.
    text = quiet_metrics("metrics_doc")
    document = (ROOT / "docs/metrics.md").read_text()
    assert "wimz_table_bytes{" in text
    assert replaced(document, text) == document, "docs/metrics.md is not what a relay exports: run scripts/generate.sh"
