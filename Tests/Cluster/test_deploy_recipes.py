"""The operator's recipes are checked by the tools that will run them: HAProxy's config
check on deploy/haproxy/haproxy.cfg, promtool on the scrape config and the alert rules (with
the rules' own unit tests)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_haproxy_recipe_is_valid(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=api.wimzai.com"], check=True, capture_output=True)
    bundle = tmp_path / "api.pem"
    bundle.write_text(cert.read_text() + key.read_text())
    config = (ROOT / "deploy/haproxy/haproxy.cfg").read_text()
    assert "/etc/haproxy/certs/api.wimzai.com.pem" in config
    local = tmp_path / "haproxy.cfg"
    local.write_text(config.replace("/etc/haproxy/certs/api.wimzai.com.pem", str(bundle))
                     .replace("/run/haproxy/admin.sock", str(tmp_path / "admin.sock")))
    done = subprocess.run(["haproxy", "-c", "-f", local], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for wanted in ("balance hdr(X-Wimz-Device)", "hash-type consistent", "option httpchk GET /readyz",
                   "on-marked-down shutdown-sessions", "hard-stop-after"):
        assert wanted in config


def test_haproxy_443_recipe_is_valid(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=api.wimzai.com"], check=True, capture_output=True)
    (tmp_path / "api.pem").write_text(cert.read_text() + key.read_text())
    config = (ROOT / "deploy/haproxy/haproxy-443.cfg").read_text()
    local = tmp_path / "haproxy-443.cfg"
    local.write_text(config.replace("/etc/haproxy/certs/api.wimzai.com.pem", str(tmp_path / "api.pem")))
    done = subprocess.run(["haproxy", "-c", "-f", local], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for wanted in ("req_ssl_sni -i api.wimzai.com", "default_backend turn_tls", "send-proxy-v2", "accept-proxy",
                   "balance hdr(X-Wimz-Device)"):
        assert wanted in config


def test_prometheus_config_and_alert_rules(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is installed by scripts/test.sh"
    directory = ROOT / "deploy/prometheus"
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "wimz-relay.rules.yml"],
                 ["test", "rules", "wimz-relay.rules.test.yml"]):
        done = subprocess.run([promtool, *args], cwd=directory, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    rules = (directory / "wimz-relay.rules.yml").read_text()
    for metric in ("wimz_cluster_split_devices", "wimz_cluster_lease_age_seconds", "wimz_turn_robots_past_refresh",
                   "wimz_audit_queue_depth"):
        assert metric in rules
