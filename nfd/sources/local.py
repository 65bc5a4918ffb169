"""The local feature source: ``name[=value]`` lines of the files in ``features.d``.

Each regular file of the directory (dot-files skipped, files over 64 KiB refused) is
read in name order; each line ``name=value`` (or ``name``, meaning ``true``) gives
``local.feature`` and ``local.label`` attributes, later files overriding earlier ones.
Comment lines ``# +<directive>`` steer the lines that follow:

- ``# +expiry-time=<RFC3339>``: lines after it are dropped once that time has passed
  (the source's ``next_expiry`` says when the next such time falls, so that a worker
  can run a pass then rather than at its next interval);
- ``# +no-label`` / ``# +no-feature``: the next line gives no label / no feature.

A line that cannot be used (no name, a name with blanks, an unknown or malformed
directive) is a warning naming the file and line; the other lines are kept. Names in
messages have their control characters escaped. Files are read as every host file is
(``nfd.hostfiles``: never blocking, bounded), and links are followed inside the host
root.

Executables in the directory are read as text like any file, never run: upstream
removed feature hooks.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nfd import hostfiles
from nfd.chars import printable
from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostPath, HostRoot

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    # The time to judge expiry-time against, or how to get it: datetime is imported only
    # when a file has an expiry-time directive.
    Now = datetime | Callable[[], datetime]

log = logging.getLogger(__name__)

MAX_FILE_SIZE = 64 * 1024
DIRECTIVE_PREFIX = "# +"


# Not compared, not printed (see docs/architecture.md, "Plain Python").
@dataclass(slots=True, eq=False, repr=False)
class ParsedFile:
    """What one feature file (or hook's output) gives: features, labels, what was wrong
    in it, and when its next entry expires."""

    features: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    next_expiry: datetime | None = None  # the earliest expiry-time still to come


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _parse_time(text: str) -> datetime | None:
    from datetime import datetime

    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    # RFC 3339 requires a zone; a time without one is not accepted.
    return t if t.tzinfo is not None else None


def _utc_now() -> datetime:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def _once(get: Callable[[], datetime]) -> Callable[[], datetime]:
    got: list[datetime] = []

    def once() -> datetime:
        if not got:
            got.append(get())
        return got[0]

    return once


def parse_feature_file(text: str, where: str, now: Now) -> ParsedFile:
    """One file's lines -> features and labels; ``where`` names the file in warnings."""
    out = ParsedFile()
    where = printable(where)
    expired = False
    skip_label = skip_feature = False
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if not line.startswith(DIRECTIVE_PREFIX):
                continue
            key, sep, value = line[len(DIRECTIVE_PREFIX) :].partition("=")
            if key == "expiry-time":
                t = _parse_time(value) if sep else None
                if t is None:
                    out.warnings.append(
                        f"{where}:{lineno}: expiry-time needs an RFC 3339 time, got {value!r}"
                    )
                else:
                    if callable(now):
                        now = now()
                    expired = t < now
                    if not expired:
                        out.next_expiry = _earliest(out.next_expiry, t)
            elif key == "no-label":
                skip_label = True
            elif key == "no-feature":
                skip_feature = True
            else:
                out.warnings.append(f"{where}:{lineno}: unknown directive {key!r}")
            continue
        if expired:
            continue
        name, sep, value = line.partition("=")
        if not name or any(c.isspace() for c in name):
            out.warnings.append(f"{where}:{lineno}: {line!r} is not name[=value], ignored")
            skip_label = skip_feature = False
            continue
        value = value if sep else "true"
        if skip_feature:
            out.features.pop(name, None)
        else:
            out.features[name] = value
        if skip_label:
            out.labels.pop(name, None)
        else:
            out.labels[name] = value
        # no-label / no-feature apply to one line only.
        skip_label = skip_feature = False
    return out


def features_dir(host: HostRoot, config: SourcesConfig) -> HostPath:
    """The configured directory, taken under the host root's /etc when it is in /etc."""
    d = config.local.features_dir
    if d == "/etc" or d.startswith("/etc/"):
        return host.etc / d[len("/etc") :].lstrip("/")
    return HostPath(d)


def read_features_dir(
    directory: str | os.PathLike[str],
    now: Now,
    warn: Callable[[str], None],
    *,
    host: HostRoot | None = None,
) -> ParsedFile:
    """Every file of ``directory``; with ``host``, links are followed inside its root."""
    total = ParsedFile()
    if callable(now):  # one time for the whole directory, taken when first needed
        now = _once(now)
    resolved = host.resolve(os.fspath(directory)) if host is not None else os.fspath(directory)
    if resolved is None:
        return total
    try:
        names = sorted(os.listdir(resolved))
    except (FileNotFoundError, NotADirectoryError):
        return total
    except OSError as e:
        warn(f"cannot list {printable(str(directory))}: {e.strerror or e}")
        return total
    for name in names:
        if name.startswith("."):
            continue
        shown = printable(os.path.join(directory, name))
        path = (
            host.resolve(os.path.join(resolved, name)) if host is not None else os.path.join(resolved, name)
        )
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            st = None  # removed while we looked, or a dangling link
        # Directories, FIFOs, devices: not feature files (and never opened: a FIFO would block).
        if path is None or st is None or not stat.S_ISREG(st.st_mode):
            continue
        if st.st_size > MAX_FILE_SIZE:
            warn(f"{shown}: {st.st_size} bytes is over the {MAX_FILE_SIZE}-byte limit, ignored")
            continue
        data = hostfiles.read_bytes(path, limit=MAX_FILE_SIZE)
        if data is None:
            continue
        parsed = parse_feature_file(data.decode("utf-8", "replace"), shown, now)
        for w in parsed.warnings:
            warn(w)
        total.features.update(parsed.features)
        total.labels.update(parsed.labels)
        total.next_expiry = _earliest(total.next_expiry, parsed.next_expiry)
    return total


class LocalSource:
    name = "local"

    def __init__(self) -> None:
        self.next_expiry: datetime | None = None
        """After a pass: the earliest ``expiry-time`` still to come (a pass then drops
        the lines it ends), or None."""

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        parsed = read_features_dir(features_dir(host, config), _utc_now, log.warning, host=host)
        self.next_expiry = parsed.next_expiry
        f = Features()
        f.set_attributes("local.label", parsed.labels)
        f.set_attributes("local.feature", parsed.features)
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        return dict(features.attributes.get("local.label", {}))
