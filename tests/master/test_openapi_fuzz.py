"""schemathesis against the master's OpenAPI document, over real HTTP: every phase
(examples, coverage, fuzzing, stateful) and every default check, which include no
server errors and no status code the document does not declare.

The default run is small and bounded in time; ``NFD_SCHEMATHESIS_EXAMPLES=1000`` makes
it the full run (at least 1,000 cases per operation)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from nfd.master.api.app import create_app
from nfd.master.runtime import build_runtime

from .conftest import memory_settings
from .helpers import FixtureSource, serve

EXAMPLES = int(os.environ.get("NFD_SCHEMATHESIS_EXAMPLES", "5"))
MAX_SECONDS = 45 if EXAMPLES <= 100 else 3600


def test_schemathesis_finds_no_server_error_and_no_undocumented_status(tmp_path: Path) -> None:
    rt = build_runtime(memory_settings(), sources=[FixtureSource()])
    cli = Path(sys.executable).parent / "schemathesis"
    with serve(create_app(runtime=rt)) as url:
        args = [str(cli), "run", f"{url}/openapi.json",
                "--phases", "examples,coverage,fuzzing,stateful",
                "--max-examples", str(EXAMPLES), "--seed", "1", "--continue-on-failure",
                "--max-time", str(MAX_SECONDS), "--request-timeout", "10",
                "--suppress-health-check", "too_slow,filter_too_much"]  # fmt: skip
        run = subprocess.run(
            args,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=MAX_SECONDS + 60,
            env={**os.environ, "NO_COLOR": "1"},
        )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    generated = re.search(r"(\d+) generated", out)
    assert generated is not None and int(generated.group(1)) >= 7 * EXAMPLES, out[-2000:]
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert re.search(rf"✅ {phase}", out), out[-3000:]
