"""One discovery pass over the sources: what ``nfd discover``, the worker and the device
kinds run to learn this node's features."""

from nfd.discovery.onepass import DiscoveryResult, discover

__all__ = ["DiscoveryResult", "discover"]
