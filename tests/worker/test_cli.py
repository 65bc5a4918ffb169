"""``nfd worker`` as a command: --oneshot exit codes, identity, status endpoints, leanness."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from worker.worker_helpers import HostTree, Master, env, free_port, http_get, run_cli, wait_until


def test_oneshot_delivers_and_exits_0(master: Master, host: HostTree) -> None:
    host.write("f", "once=yes\n")
    r = run_cli(
        "worker", "--oneshot", "--master", master.url, "--node-name", "n-once",
        "--sources", "local", "--host-root", str(host.root),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert master.labels("n-once") == {"once": "yes"}


def test_oneshot_without_a_master_exits_1_with_one_line(host: HostTree) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    r = run_cli(
        "worker",
        "--oneshot",
        "--master",
        url,
        "--node-name",
        "n",
        "--sources",
        "local",
        "--host-root",
        str(host.root),
    )
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("nfd worker: error: features not delivered:") and "unreachable" in last
    assert "Traceback" not in r.stderr


def test_oneshot_refused_by_the_master_exits_1_with_its_reason(small_master: Master, host: HostTree) -> None:
    host.write("big", "".join(f"key{i}=value{i}\n" for i in range(50)))
    r = run_cli(
        "worker", "--oneshot", "--master", small_master.url, "--node-name", "n",
        "--sources", "local", "--host-root", str(host.root),
    )  # fmt: skip
    assert r.returncode == 1
    assert "HTTP 413" in r.stderr.strip().splitlines()[-1]


def test_missing_node_name_exits_2_with_one_line() -> None:
    r = run_cli("worker", "--master", "http://127.0.0.1:1")
    assert r.returncode == 2
    assert r.stderr.strip() == "nfd worker: error: no node name: give --node-name or set NODE_NAME"


def test_node_name_from_the_environment(master: Master, host: HostTree) -> None:
    r = run_cli(
        "worker", "--oneshot", "--master", master.url, "--sources", "local", "--host-root", str(host.root),
        extra_env={"NODE_NAME": "from-env"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert master.node("from-env") is not None


def test_missing_master_and_bad_flags_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from nfd.cli import main  # in-process: these fail before anything starts

    def run(*args: str) -> tuple[int, str]:
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            code = main(list(args))  # it sets up logging: put pytest's back afterwards
        finally:
            root.handlers[:], root.level = handlers, level
        return code, capsys.readouterr().err.strip()

    assert run("worker", "--node-name", "n") == (
        2,
        "nfd worker: error: no master: give --master URL or set NFD_MASTER_URL",
    )
    code, err = run("worker", "--node-name", "n", "--master", "ftp://x")
    assert code == 2 and "expected http://" in err
    code, err = run("worker", "--node-name", "n", "--master", "http://x", "--sleep-interval", "soon")
    assert code == 2 and "--sleep-interval" in err
    code, err = run("worker", "--node-name", "n", "--master", "http://x", "--sources", "nope")
    assert code == 2 and "unknown feature source 'nope'" in err
    code, err = run("worker", "--node-name", "n", "--master", "http://x", "--ca-file", "/nonexistent/ca.pem")
    assert code == 2 and "--ca-file" in err
    code, err = run("worker", "--node-name", "n", "--master", "http://x", "--port", "70000")
    assert code == 2 and "--port 70000" in err


def test_device_plugin_resources_follow_the_devices(
    master: Master, host: HostTree, start_worker, node: str, tmp_path: Path
) -> None:
    cfg = tmp_path / "device-plugin.yaml"
    cfg.write_text(
        "resources:\n"
        "  - name: example.com/widget\n    devnode: /dev/widget*\n"
        "  - name: example.com/gadget\n    devnode: /dev/gadget*\n"
    )
    dev = host.root / "dev"
    dev.mkdir()
    (dev / "widget0").touch()
    w = start_worker(master.url, host, "--sleep-interval", "1s", "--device-plugin-config", str(cfg))

    def reported() -> list[str] | None:
        view = master.node(node)
        return None if view is None else view["devicePluginResources"]

    # Served means: configured and a device is there, as the device plugin decides.
    wait_until(lambda: reported() == ["example.com/widget"], what="the widget resource")
    (dev / "gadget0").touch()  # a new device: the list changes, the features do not
    wait_until(lambda: reported() == ["example.com/gadget", "example.com/widget"], what="both resources")
    wait_until(lambda: w.requests("features", "ok") == 2, what="two full deliveries")


def test_a_bad_device_plugin_config_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "device-plugin.yaml"
    cfg.write_text("resources:\n  - count: 1\n")
    r = run_cli("worker", "--oneshot", "--master", "http://127.0.0.1:1", "--node-name", "n",
                "--device-plugin-config", str(cfg))  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.startswith(f"nfd worker: error: --device-plugin-config: config file {cfg}: resources[0]")
    assert len(r.stderr.strip().splitlines()) == 1


def test_healthz_and_metrics(master: Master, host: HostTree, start_worker, node: str) -> None:
    w = start_worker(master.url, host, "--sleep-interval", "1s")
    wait_until(lambda: w.requests("heartbeat", "ok") >= 1, what="a heartbeat")
    status, body = http_get(f"http://127.0.0.1:{w.port}/healthz")
    assert (status, body) == (200, b"ok\n")
    text = http_get(f"http://127.0.0.1:{w.port}/metrics")[1].decode()
    assert 'nfd_worker_build_info{version="' in text
    for le in ("0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "+Inf"):
        assert f'nfd_worker_feature_discovery_duration_seconds_bucket{{le="{le}",node="{node}"}}' in text
    count = w.metrics()[f'nfd_worker_feature_discovery_duration_seconds_count{{node="{node}"}}']
    assert count >= 2


def test_json_logs(master: Master, host: HostTree) -> None:
    r = run_cli(
        "--log-format", "json", "--log-level", "info", "worker", "--oneshot", "--master", master.url,
        "--node-name", "n-json", "--sources", "local", "--host-root", str(host.root),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    # The master here keeps nodes in memory: the worker says so, not "applied".
    (msg,) = [rec["msg"] for rec in records if "delivered" in rec["msg"]]
    assert "in memory only" in msg and "none applied" in msg


# The worker must stay lean: none of the master's or the device plugin's libraries, a
# worker given the device config (to report the plugin's resources) neither.
FORBIDDEN = ("kubernetes", "fastapi", "pydantic", "grpc", "starlette", "uvicorn")

_PROBE = """
import json, os, sys, threading, time, urllib.request
from nfd.cli import main
argv = sys.argv[1:]
port = argv[argv.index("--port") + 1]

def probe():
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
            if 'kind="heartbeat",result="ok"' in body:
                print(json.dumps(sorted(sys.modules)), flush=True)
                os._exit(0)
        except OSError:
            pass
        time.sleep(0.05)
    os._exit(3)

threading.Thread(target=probe, daemon=True).start()
main(argv)
"""


@pytest.mark.parametrize("with_plugin", [False, True])
def test_the_running_worker_never_imports_heavy_libraries(
    master: Master, host: HostTree, tmp_path: Path, with_plugin: bool
) -> None:
    port = free_port()
    plugin = tmp_path / "device-plugin.yaml"  # the device plugin's matching runs too
    plugin.write_text("resources:\n  - name: example.com/tty\n    devnode: /dev/tty*\n")
    # Every source (the real worker's import set), the status server, the device plugin.
    args = [
        "worker", "--master", master.url, "--node-name", "n-lean", "--sleep-interval", "1s",
        "--port", str(port), "--status-host", "127.0.0.1",
        *(["--device-plugin-config", str(plugin)] if with_plugin else []),
    ]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], env=env(), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    modules = json.loads(r.stdout.strip().splitlines()[-1])
    ran = {"nfd.worker.schedule", "apscheduler", *(["nfd.devices.inventory"] if with_plugin else [])}
    assert ran <= set(modules)
    heavy = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)
    assert heavy == []


def test_sleep_interval_from_the_config_file(
    master: Master, host: HostTree, start_worker, node: str, tmp_path: Path
) -> None:
    conf = tmp_path / "nfd-worker.conf"
    conf.write_text("core:\n  sleepInterval: 1s\nklog: {}\n")
    host.write("f", "configured=yes\n")
    w = start_worker(master.url, host, "--config", str(conf))
    wait_until(lambda: w.requests("heartbeat", "ok") >= 3, what="passes at the configured interval")
    assert master.labels(node) == {"configured": "yes"}
    assert "unknown key 'klog' ignored" in w.output()


def test_https_master_verified_with_the_ca_file(tmp_path: Path, host: HostTree) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    master = Master(tmp_path, ["--tls-cert-file", str(cert), "--tls-key-file", str(key)], tls=True)
    master.start()
    try:
        base = ["worker", "--oneshot", "--master", master.url, "--node-name", "n-tls", "--sources", "local",
                "--host-root", str(host.root)]  # fmt: skip
        r = run_cli(*base, "--ca-file", str(cert))
        assert r.returncode == 0, r.stderr
        r = run_cli(*base)  # the system CAs do not know this certificate
        assert r.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in r.stderr
    finally:
        master.stop()


def test_a_features_d_line_expires_on_time(master: Master, host: HostTree, start_worker, node: str) -> None:
    # An hour between passes: only the expiry time can take the label away.
    expires = datetime.now(UTC) + timedelta(seconds=3)
    host.write("expiring", f"# +expiry-time={expires.strftime('%Y-%m-%dT%H:%M:%SZ')}\nexpiring=yes\n")
    start_worker(master.url, host, "--sleep-interval", "1h")
    wait_until(lambda: (master.labels(node) or {}).get("expiring") == "yes", what="the label")
    wait_until(lambda: "expiring" not in (master.labels(node) or {}), timeout=15, what="the label expired")
    assert datetime.now(UTC) >= expires.replace(microsecond=0)
