"""``nfd discover`` stays cheap to start: checked by what it imports, not by timing.

Each check runs in a fresh interpreter, so nothing the test process loaded counts.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from nfd.cli import build_parser, parse_fast

FIXTURE_HOST = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "this-vm"

# Modules a discovery must not load: the cluster-side libraries, and the standard
# library modules whose import cost more than a discovery pass.
HEAVY = {
    "kubernetes", "fastapi", "pydantic", "pydantic_settings", "uvicorn", "grpc", "google.protobuf",
    "apscheduler", "prometheus_client", "pynvml", "cpuinfo", "pyudev", "yaml", "nfd.rules",
    "decimal", "hashlib", "json", "datetime", "platform", "inspect", "dataclasses", "typing",
    "logging", "argparse", "locale", "shutil",
    # pathlib (with fnmatch, urllib.parse and ipaddress), re (with enum and functools) and
    # collections were a third of the process before they were taken off the path.
    "pathlib", "fnmatch", "urllib", "ipaddress", "re", "enum", "functools", "collections",
}  # fmt: skip

_PROBE = """
import sys
before = set(sys.modules)
from nfd.cli import main
rc = main(sys.argv[1:])
new = sorted(set(sys.modules) - before)
import json
sys.stdout.flush()
print(json.dumps({"rc": rc, "new": new}), file=sys.stderr)
"""


def _discover_in_fresh_interpreter(*args: str) -> tuple[str, set[str]]:
    """stdout, and the modules the run imported."""
    p = subprocess.run(
        [sys.executable, "-c", _PROBE, "discover", "--host-root", str(FIXTURE_HOST), *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report["rc"] == 0, p.stderr
    return p.stdout, set(report["new"])


def _loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_discover_imports_nothing_heavy() -> None:
    out, modules = _discover_in_fresh_interpreter()
    assert "feature.node.kubernetes.io/kernel-version.full=" in out
    assert sorted(h for h in HEAVY if _loaded(modules, h)) == []
    assert "nfd.master" not in modules and "nfd.commands.worker" not in modules


def _over_budget(modules: set[str]) -> list[str]:
    from nfd.discovery import budget

    return sorted(
        m for m in modules if m not in budget.STDLIB | budget.NFD and not m.startswith(budget.NFD_PACKAGES)
    )


def test_discover_keeps_to_its_import_budget() -> None:
    _, modules = _discover_in_fresh_interpreter()
    assert _over_budget(modules) == []
    # The budget is a real one: what the path used to load by way of dataclasses,
    # logging and argparse would not fit.
    assert _over_budget({"dataclasses", "logging", "argparse", "re", "typing"}) != []


def test_each_architecture_loads_only_its_own_cpu_reader() -> None:
    _, modules = _discover_in_fresh_interpreter("--sources", "cpu")
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert "nfd.sources.cpuid_x86" in modules and "ctypes" in modules
        assert "nfd.sources.cpu_hwcap" not in modules
    else:
        assert "nfd.sources.cpu_hwcap" in modules and "ctypes" not in modules


def test_gfd_naming_loads_only_when_nvml_answers() -> None:
    # GFD's label naming is for GPUs NVML described: without NVML (or without an NVIDIA
    # GPU) discovery does not import it.
    for host in ("this-vm", "gpu-a100"):
        p = subprocess.run(
            [sys.executable, "-c", _PROBE, "discover", "--host-root", str(FIXTURE_HOST.parent / host),
             "--sources", "gpu"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        modules = set(json.loads(p.stderr.strip().splitlines()[-1])["new"])
        assert "nfd.sources.gpu" in modules and "nfd.sources.gpu_gfd" not in modules, host


def test_a_process_run_writes_everything_before_it_ends() -> None:
    # Run as a process, discover leaves without the interpreter's teardown: what it
    # printed must all be there, and the exit code must be the command's.
    out, _ = _discover_in_fresh_interpreter("-o", "json")
    p = subprocess.run(
        [sys.executable, "-m", "nfd", "discover", "--host-root", str(FIXTURE_HOST), "-o", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert p.stdout == out and len(out) > 10_000
    bad = subprocess.run(
        [sys.executable, "-m", "nfd", "discover", "--sources", "warp"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "warp" in bad.stderr


def test_a_reader_that_leaves_early_is_not_an_error() -> None:
    # `nfd discover | head -1`: the pipe closes before the output is flushed.
    with subprocess.Popen(
        [sys.executable, "-m", "nfd", "discover", "--host-root", str(FIXTURE_HOST), "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as p:  # fmt: skip
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        err = p.stderr.read()
        rc = p.wait(timeout=60)
    assert rc == 0 and err == b""


def test_probe_sees_what_an_output_format_needs() -> None:
    # The check above is only worth something if the probe notices imports at all.
    out, modules = _discover_in_fresh_interpreter("-o", "yaml")
    assert out.startswith("labels:")
    assert _loaded(modules, "yaml")
    out, modules = _discover_in_fresh_interpreter("-o", "json")
    assert json.loads(out)["labels"]
    assert "json" in modules and not _loaded(modules, "yaml")


def _run_code(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def test_a_deferred_configuration_applies_with_the_first_record_that_passes() -> None:
    p = _run_code(
        "import os, sys\n"
        "finders = list(sys.meta_path)\n"
        "from nfd.lazylog import configure, get_logger\n"
        "configure('info', 'text', now=False)\n"
        "assert sys.meta_path == finders  # no import hook\n"
        "log = get_logger('nfd.x')\n"
        "log.debug('below the level')\n"
        "print('logging' in sys.modules)\n"
        "log.info('hello %s', 'there')\n"
        "print('logging' in sys.modules)\n"
        "get_logger('nfd.y').warning('once configured, %s', 'plain logging')\n"
    )
    assert p.stdout.split() == ["False", "True"]
    lines = p.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(" INFO nfd.x: hello there")
    assert lines[1].endswith(" WARNING nfd.y: once configured, plain logging")


def test_the_long_running_commands_configure_logging_at_once() -> None:
    p = _run_code(
        "from nfd.lazylog import configure\n"
        "configure('warning', 'json', now=True)\n"
        "import logging\n"
        "logging.getLogger('lib').info('dropped')\n"
        "logging.getLogger('lib').warning('kept')\n"
    )
    assert [json.loads(line)["msg"] for line in p.stderr.splitlines()] == ["kept"]
    assert json.loads(p.stderr)["logger"] == "lib"


def test_discover_warnings_keep_their_format(tmp_path: Path) -> None:
    # The custom source warns about a legacy rule; logging is imported only then.
    conf = tmp_path / "nfd-worker.conf"
    conf.write_text("sources:\n  custom:\n    - name: old\n      matchOn: [{pciId: {vendor: ['15b3']}}]\n")
    for fmt in ("text", "json"):
        p = subprocess.run(
            [sys.executable, "-m", "nfd", "--log-format", fmt, "discover", "--host-root",
             str(FIXTURE_HOST), "--config", str(conf)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        line = p.stderr.strip()
        if fmt == "text":
            assert " WARNING nfd.sources.custom: custom rule 'old': the legacy matchOn format" in line
        else:
            assert json.loads(line)["logger"] == "nfd.sources.custom"


# -- the argument fast path ----------------------------------------------------------------

SAME_AS_ARGPARSE = [
    ["discover"],
    ["discover", "--host-root", "/x", "--sources", "cpu,kernel", "--config", "c.conf"],
    ["discover", "--host-root=/x", "--sources=all,-pci", "--output=json"],
    ["discover", "-o", "yaml", "-o", "labels"],
    ["discover", "-o=json"],
    ["discover", "--extra-label-ns", "a.io", "--extra-label-ns=b.io", "--deny-label-ns", "*.c.io"],
    ["discover", "--sources=-pci"],
    ["discover", "--sources", ""],
    ["discover", "--host-root", "a=b"],
    ["--log-level", "debug", "discover"],
    ["--log-level=error", "--log-format", "json", "discover", "--output", "json"],
]

LEFT_TO_ARGPARSE = [
    ["discover", "--help"],
    ["discover", "-h"],
    ["--version", "discover"],
    ["discover", "--host", "/x"],  # an abbreviation
    ["discover", "-ojson"],
    ["discover", "--output", "xml"],
    ["discover", "--sources"],
    ["discover", "--sources", "-pci"],
    ["discover", "extra"],
    ["discover", "--", "x"],
    ["--log-level", "loud", "discover"],
    ["discover", "--log-level", "debug"],
    ["rules", "--help"],
]


@pytest.mark.parametrize("argv", SAME_AS_ARGPARSE, ids=" ".join)
def test_fast_path_parses_as_argparse_does(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ({}, {"NFD_LOG_LEVEL": "info", "NFD_LOG_FORMAT": "json"}):
        for k in ("NFD_LOG_LEVEL", "NFD_LOG_FORMAT"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        fast = parse_fast(argv, "discover")
        assert fast is not None
        assert vars(fast) == vars(build_parser(only="discover").parse_args(argv))


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=" ".join)
def test_fast_path_leaves_the_rest_to_argparse(argv: list[str]) -> None:
    command = next((a for a in argv if a in ("discover", "rules")), None)
    assert parse_fast(argv, command) is None


def test_unknown_level_from_the_environment_is_still_an_error() -> None:
    # argparse does not check defaults; logging refused the level when it was set up.
    p = subprocess.run(
        [sys.executable, "-m", "nfd", "discover", "--host-root", str(FIXTURE_HOST)],
        capture_output=True, text=True, env={**os.environ, "NFD_LOG_LEVEL": "loud"},
    )  # fmt: skip
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip() == "nfd discover: internal error: ValueError: Unknown level: 'LOUD'"
