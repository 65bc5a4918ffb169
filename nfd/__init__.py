"""nfd: Node Feature Discovery for Kubernetes."""

__version__ = "0.1.0"
