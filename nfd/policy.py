"""What may be published: label, annotation, extended-resource and taint names and
values, and the namespace policy, as upstream's master applies them.

Pure functions, each answering for one item; :func:`nfd.decision.decide` applies them to
everything a node would carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from decimal import Decimal

    from nfd.features import Features

FEATURE_NS = "feature.node.kubernetes.io"
PROFILE_NS = "profile.node.kubernetes.io"
# Namespace of the master's own bookkeeping annotations.
NFD_NS = "nfd.node.kubernetes.io"

# ``kubernetes.io``, ``k8s.io`` and their sub-namespaces are denied, except the feature
# namespace (labels: also the profile namespace) and their sub-namespaces. Upstream
# v0.19's code denies only ``kubernetes.io``; its documentation and our policy also keep
# ``k8s.io`` (the Kubernetes project's other namespace) out of reach of rules.
_LABEL_ALLOWED = (FEATURE_NS, PROFILE_NS)
_OTHER_ALLOWED = (FEATURE_NS,)  # annotations, extended resources, taints

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Kubernetes' own expressions (ASCII only, as there): a name part or a non-empty label
# value, and one dot-separated part of a DNS-1123 subdomain. Length limits are checked
# apart, so that each error says which rule a name breaks.
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


# No slots: a process holds one or two; not compared, not printed (see docs/architecture.md, "Plain Python").
@dataclass(eq=False, repr=False)
class Policy:
    """The master's publishing policy (``--extra-label-ns``, ``--deny-label-ns``,
    ``--label-whitelist``, ``--enable-taints``)."""

    extra_label_ns: frozenset[str] = frozenset()
    deny_label_ns: frozenset[str] = frozenset()
    label_whitelist: str = ""
    enable_taints: bool = False
    _whitelist_re: re.Pattern[str] | None = None

    @classmethod
    def build(
        cls,
        *,
        extra_label_ns: Iterable[str] = (),
        deny_label_ns: Iterable[str] = (),
        label_whitelist: str = "",
        enable_taints: bool = False,
    ) -> Policy:
        """Raises ValueError for a whitelist that is not a valid regular expression."""
        wl = None
        if label_whitelist:
            try:
                wl = re.compile(label_whitelist)
            except (re.error, OverflowError, RecursionError) as e:  # a{99999999999}, ((((...
                raise ValueError(f"label whitelist {label_whitelist!r} is not a valid regex: {e}") from None
        return cls(
            extra_label_ns=frozenset(_split_list(extra_label_ns)),
            deny_label_ns=frozenset(_split_list(deny_label_ns)),
            label_whitelist=label_whitelist,
            enable_taints=enable_taints,
            _whitelist_re=wl,
        )

    def namespace_denied(self, ns: str) -> bool:
        """For labels, as upstream's master: the built-in denial or ``--deny-label-ns``
        (``*`` prefixes make a suffix match; ``*`` alone denies every namespace), unless
        ``--extra-label-ns`` names the namespace exactly."""
        if ns in self.extra_label_ns:
            return False
        if builtin_denied(ns, _LABEL_ALLOWED):
            return True
        for d in self.deny_label_ns:
            if d.startswith("*"):
                if ns.endswith(d.lstrip("*")):
                    return True
            elif ns == d:
                return True
        return False

    def whitelisted(self, base: str) -> bool:
        # Go's MatchString is a search, not an anchored match.
        return self._whitelist_re is None or self._whitelist_re.search(base) is not None


DEFAULT_POLICY = Policy()


_DENIED = ("kubernetes.io", "k8s.io")


def builtin_denied(ns: str, allowed: tuple[str, ...]) -> bool:
    """``kubernetes.io``, ``k8s.io`` and below, unless one of ``allowed`` or below it."""
    if not any(ns == d or ns.endswith("." + d) for d in _DENIED):
        return False
    return not (ns in allowed or ns.endswith(tuple("." + a for a in allowed)))


def _split_list(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for it in items:
        out.extend(p.strip() for p in it.split(",") if p.strip())
    return out


def split_ns(name: str) -> tuple[str, str]:
    ns, sep, base = name.rpartition("/")
    return (ns, base) if sep else ("", name)


def qualify(name: str) -> str:
    """Unprefixed names go into ``feature.node.kubernetes.io/``."""
    return name if "/" in name else f"{FEATURE_NS}/{name}"


def qualified_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Names qualified; where one source gives both spellings of a name, the prefixed
    one wins (as upstream's master)."""
    out: dict[str, str] = {}
    for name_as_written, value in labels.items():
        name = qualify(name_as_written)
        if name_as_written == name or name not in labels:
            out[name] = value
    return out


def qualified_name_error(name: str) -> str | None:
    """Kubernetes' IsQualifiedName, as a reason or None."""
    ns, sep, base = name.partition("/")
    if not sep:
        ns, base = "", name
    elif "/" in base:
        return f"{name!r}: a qualified name has at most one '/'"
    if not base:
        return f"{name!r}: name part must not be empty"
    if len(base) > 63:
        return f"{name!r}: name part must be no more than 63 characters"
    if not _NAME.fullmatch(base):
        return f"{name!r}: name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
    if sep:
        err = dns_subdomain_error(ns)
        if err:
            return f"{name!r}: prefix {err}"
    return None


def dns_subdomain_error(ns: str) -> str | None:
    if not ns:
        return "must not be empty"
    if len(ns) > 253:
        return "must be no more than 253 characters"
    if not all(_DNS1123_LABEL.fullmatch(p) for p in ns.split(".")):
        return f"{ns!r} must be a lowercase RFC 1123 subdomain"
    return None


def label_value_error(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63:
        return f"value {value[:20]!r}... must be no more than 63 characters"
    if not _NAME.fullmatch(value):
        return f"value {value!r} must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
    return None


def check_label(name: str, value: str, policy: Policy = DEFAULT_POLICY) -> str | None:
    """Why a (qualified) label may not be published, or None if it may."""
    err = qualified_name_error(name)
    if err:
        return err
    ns, base = split_ns(name)
    if ns and policy.namespace_denied(ns):
        return f"namespace {ns!r} is not allowed"
    if not policy.whitelisted(base):
        return f"{base!r} does not match the label whitelist {policy.label_whitelist!r}"
    return label_value_error(value)


def _namespace_error(name: str) -> str | None:
    """Annotations, extended resources and taints: a prefix is required, and the
    ``kubernetes.io``/``k8s.io`` namespaces are denied except the feature namespace."""
    ns, _ = split_ns(name)
    if not ns:
        return "unprefixed keys are not allowed"
    if builtin_denied(ns, _OTHER_ALLOWED):
        return f"namespace {ns!r} is not allowed"
    return None


def check_annotation(name: str, value: str, policy: Policy = DEFAULT_POLICY) -> str | None:
    """Feature annotations: ``kubernetes.io`` namespaces are denied except
    ``feature.node.kubernetes.io`` and below (so nfd's own ``nfd.node.kubernetes.io`` is
    never writable by rules); ``--extra/--deny-label-ns`` do not apply (upstream)."""
    err = qualified_name_error(name) or _namespace_error(name)
    if err:
        return err
    if len(value) > ANNOTATION_VALUE_LIMIT:
        return (
            f"value too long: feature annotations must not be longer than {ANNOTATION_VALUE_LIMIT} characters"
        )
    return None


# Upstream's FeatureAnnotationValueSizeLimit.
ANNOTATION_VALUE_LIMIT = 1 << 10


def check_extended_resource(name: str, value: str, policy: Policy = DEFAULT_POLICY) -> str | None:
    """A qualified name outside the denied ``kubernetes.io`` namespaces (the feature
    namespace allowed) and a Kubernetes quantity. ``--extra/--deny-label-ns`` do not
    apply (upstream)."""
    err = qualified_name_error(name) or _namespace_error(name)
    if err:
        return err
    try:
        parse_quantity(value)
    except ValueError as e:
        return str(e)
    return None


def check_taint(key: str, value: str, effect: str, policy: Policy = DEFAULT_POLICY) -> str | None:
    """Upstream checks the key's namespace (unprefixed keys are refused, ``kubernetes.io``
    namespaces denied except the feature namespace) and the effect. The key's and value's
    syntax are checked here too: the API server would refuse the Node patch otherwise."""
    if not policy.enable_taints:
        return "taints are disabled (enable with --enable-taints)"
    err = _namespace_error(key)
    if err:
        return err
    if not effect:
        return "empty taint effect"
    if effect not in _TAINT_EFFECTS:
        return f"invalid taint effect {effect!r} (must be one of {', '.join(_TAINT_EFFECTS)})"
    err = qualified_name_error(key)
    if err:
        return err
    return label_value_error(value)


# -- Kubernetes quantities -------------------------------------------------------------

# As text: re compiles it (then keeps it in its cache) when a quantity is first parsed,
# which nfd discover does only for rule output with extended resources.
_QUANTITY = r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE]|)$"
# Suffix -> (base, exponent); decimal is imported on first use, as only rule output
# with extended resources needs it.
_SUFFIX: dict[str, tuple[int, int]] = {
    "": (10, 0), "n": (10, -9), "u": (10, -6), "m": (10, -3),
    "k": (10, 3), "M": (10, 6), "G": (10, 9), "T": (10, 12), "P": (10, 15), "E": (10, 18),
    "Ki": (2, 10), "Mi": (2, 20), "Gi": (2, 30), "Ti": (2, 40), "Pi": (2, 50), "Ei": (2, 60),
}  # fmt: skip


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``4``, ``100m``, ``1Gi``, ``1e3``) as a number."""
    m = re.match(_QUANTITY, text.strip()) if isinstance(text, str) else None
    if not m or text.strip() != text:
        raise ValueError(f"{text!r} is not a valid quantity")
    from decimal import Decimal, InvalidOperation

    num, suffix = m.groups()
    try:
        base = Decimal(num)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a valid quantity") from None
    if suffix[:1] in ("e", "E"):
        return base * (Decimal(10) ** int(suffix[1:]))
    radix, exp = _SUFFIX[suffix]
    return base * (Decimal(radix) ** exp)


def scaled_quantity(text: str, scale: int = 1) -> int:
    """A Kubernetes resource quantity times ``scale``, rounded up as Kubernetes rounds
    (``scaled_quantity("250m", 1000)`` is 250 milli-CPUs, ``scaled_quantity("1Gi")`` bytes).
    Integer arithmetic: no ``decimal`` (a megabyte of RSS) in the per-node agents that
    read pod requests. Raises ValueError, also for exponents past 10**30."""
    m = re.match(_QUANTITY, text.strip()) if isinstance(text, str) else None
    if not m or text.strip() != text:
        raise ValueError(f"{text!r} is not a valid quantity")
    num, suffix = m.groups()
    sign = -1 if num.startswith("-") else 1
    whole, _, frac = num.lstrip("+-").partition(".")
    mantissa, exp10, exp2 = int((whole + frac) or "0"), -len(frac), 0
    if suffix[:1] in ("e", "E"):
        exp10 += int(suffix[1:])
    else:
        radix, exp = _SUFFIX[suffix]
        exp10, exp2 = (exp10 + exp, 0) if radix == 10 else (exp10, exp)
    if exp10 > 30 or exp10 < -60:
        raise ValueError(f"{text!r} is out of range")
    value = (mantissa * scale) << exp2
    ten: int = 10 ** abs(exp10)
    return sign * (value * ten if exp10 >= 0 else -(-value // ten))


# -- dynamic values ---------------------------------------------------------------------


def dynamic_value(value: str, features: Features, matched: Mapping[str, str] | None = None) -> str:
    """Upstream's ``@domain.feature.element``: the value of an attribute feature element,
    ``rule.matched`` (the rules' labels and vars) included. Raises ValueError."""
    parts = value[1:].split(".", 2)
    if len(parts) != 3:
        raise ValueError(f"value {value} is not in the form of '@domain.feature.element'")
    fname = f"{parts[0]}.{parts[1]}"
    attrs = matched if fname == "rule.matched" and matched is not None else features.attributes.get(fname)
    if attrs is None:
        raise ValueError(f"feature {fname} not found")
    if parts[2] not in attrs:
        raise ValueError(f"element {parts[2]} not found on feature {fname}")
    return attrs[parts[2]]
