"""What a plain ``nfd discover`` (labels out, no config file) may import: checked in a
fresh interpreter by ``tests/core/test_startup.py``. Options add what they need (``-o
json`` json and re, ``-o yaml`` and ``--config`` PyYAML). A module that is not here fails that test; add one only
with a measurement (bench/discover_bench.py) that the process stays within 2.2 times a
bare ``python -c pass``."""

# Standard-library modules a plain ``nfd discover`` may load beyond the interpreter's own
# start-up: CPUID through ctypes on x86-64, HWCAP through struct elsewhere, zlib for a
# gzipped kernel config; errno and types come with them.
STDLIB = frozenset(
    {"__future__", "_ctypes", "_struct", "ctypes", "ctypes._endian", "errno", "struct", "types", "zlib"}
)

# nfd's own modules on the path: the command, this room, the model, the policy and the
# sources (each imports its own helpers when it runs).
NFD = frozenset(
    {
        "nfd", "nfd.cli", "nfd.commands", "nfd.commands._common", "nfd.commands.discover",
        "nfd.discovery", "nfd.discovery.onepass", "nfd.config", "nfd.features", "nfd.hostroot", "nfd.hostfiles",
        "nfd.record", "nfd.lazylog", "nfd.chars", "nfd.settings", "nfd.labels", "nfd.policy", "nfd.decision", "nfd.sources",
    }
)  # fmt: skip
NFD_PACKAGES = ("nfd.sources.",)
