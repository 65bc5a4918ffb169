"""The functions rule templates may call: text/template's built-ins
(``templatebuiltins``) and the Sprig functions upstream's rules use (``templatesprig``),
with Go's semantics (the piped value comes last). Anything not here is "function ...
not defined" when the template is parsed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nfd.rules.templatebuiltins import BUILTINS
from nfd.rules.templatesprig import SPRIG

__all__ = ["FUNCTIONS"]

FUNCTIONS: dict[str, Callable[..., Any]] = {**BUILTINS, **SPRIG}
