"""TLS serving with --tls-cert-file/--tls-key-file (a self-signed pair made by openssl)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_master_serves_https(tmp_path):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nfd", "--log-level", "info", "master", "--no-publish", "--no-auth",
         "--host", "127.0.0.1", "--port", "0", "--tls-cert-file", str(cert), "--tls-key-file", str(key)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:
            m = re.search(r"running on (https://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "no https URL in the log"
        r = httpx.get(f"{url}/healthz", verify=ssl.create_default_context(cafile=str(cert)))
        assert r.status_code == 200 and r.json() == {"status": "ok"}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
