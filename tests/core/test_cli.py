import json
import subprocess
import sys
from pathlib import Path


def nfd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nfd", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def one_line_error(p: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert p.returncode == code, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert needle in lines[0]
    assert "Traceback" not in p.stderr


def test_missing_host_root(tmp_path: Path) -> None:
    one_line_error(nfd("discover", "--host-root", str(tmp_path / "nope")), 2, "--host-root")


def test_missing_config(tmp_path: Path) -> None:
    one_line_error(nfd("discover", "--config", str(tmp_path / "nope.conf")), 2, "nope.conf")


def test_unknown_source() -> None:
    one_line_error(nfd("discover", "--sources", "cpu,warp"), 2, "unknown feature source 'warp'")


def test_unknown_flag() -> None:
    one_line_error(nfd("discover", "--frobnicate"), 2, "unrecognized arguments")


def test_a_word_before_the_command_is_refused_with_every_command_listed() -> None:
    # The command's own parser alone would list only "discover" as a choice.
    p = nfd("warp", "discover")
    one_line_error(p, 2, "invalid choice: 'warp'")
    assert "'worker'" in p.stderr and "'master'" in p.stderr


def test_log_format_json_writes_json_lines(tmp_path: Path) -> None:
    p = nfd("--log-format", "json", "--log-level", "debug", "discover", "--host-root", str(tmp_path))
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in p.stderr.splitlines()]
    assert records and all(r["level"] in ("debug", "info", "warning", "error") for r in records)


def test_empty_host_tree_gives_no_error(tmp_path: Path) -> None:
    p = nfd("discover", "--host-root", str(tmp_path), "-o", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert set(doc) == {"labels", "features"}
    assert set(doc["features"]) == {"flags", "attributes", "instances"}


def test_labels_come_out_sorted_by_their_full_name(fixtures: Path) -> None:
    # A GPU node mixes feature.node.kubernetes.io/ labels with nvidia.com/ ones.
    p = nfd("discover", "--host-root", str(fixtures / "hosts" / "gpu-h100x8"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(line.startswith("nvidia.com/") for line in lines)
    keys = [line.split("=", 1)[0] for line in lines]
    assert keys == sorted(keys)
    doc = json.loads(
        nfd("discover", "--host-root", str(fixtures / "hosts" / "gpu-h100x8"), "-o", "json").stdout
    )
    assert list(doc["labels"]) == sorted(doc["labels"])


def test_a_signal_landing_while_the_main_thread_holds_the_stop_events_lock_still_stops() -> None:
    # Event.wait() holds the event's lock as it begins and ends waiting, so SIGTERM may
    # land there; a handler that set the event itself, on that thread, waited for the
    # lock for good (as APScheduler's shutdown once waited for the job-store lock).
    code = (
        "import logging, os, signal, threading\n"
        "from nfd.commands._common import stop_on_signals\n"
        "stop = threading.Event()\n"
        "stop_on_signals(stop.set, logging.getLogger('t'))\n"
        "with stop._cond:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    for _ in range(1000):  # the handler runs in here\n"
        "        pass\n"
        "print(stop.wait(10), flush=True)\n"
    )
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("the signal handler waits for a lock its own thread holds") from None
    assert (p.returncode, p.stdout) == (0, "True\n"), p.stderr
