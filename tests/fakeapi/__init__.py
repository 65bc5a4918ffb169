"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, spoken to by the real
``kubernetes`` client. See docs/testing.md."""

from .errors import ApiError
from .fake import FakeApiServer, Objects, node_object
from .faults import FaultRule, Faults
from .requestlog import RequestLog, RequestRecord
from .tokens import TokenRegistry, TokenUser

__all__ = [
    "ApiError",
    "FakeApiServer",
    "FaultRule",
    "Faults",
    "Objects",
    "RequestLog",
    "RequestRecord",
    "TokenRegistry",
    "TokenUser",
    "node_object",
]
