"""The start-up room: one discovery pass, and what ``nfd discover`` may import to run it.

``nfd discover`` is a short process whose cost is mostly Python importing modules, so
its path has a budget (:mod:`nfd.discovery.budget`, held by
``tests/core/test_startup.py``): besides nfd's own modules on the path, only the few
standard-library modules listed there. The path runs ``nfd.cli`` ->
``nfd.commands.discover`` -> this room's pass over the sources -> ``nfd.labels`` ->
``nfd.decision``. The modules on it keep to the budget with three tools, each in one
place: :mod:`nfd.record` (value classes without :mod:`dataclasses`), :mod:`nfd.lazylog`
(logging imported with the first record) and the plain-spelling parser beside the
argparse definition in :mod:`nfd.commands.discover`. Code off the path uses plain
dataclasses, logging and argparse.
"""

from nfd.discovery.onepass import DiscoveryResult, discover

__all__ = ["DiscoveryResult", "discover"]
