"""Value classes declared like dataclasses, for the modules on ``nfd discover``'s
start-up path.

``import dataclasses`` pulls in inspect, ast, dis, tokenize, re and enum, and every
``@dataclass`` compiles its generated methods with ``exec``: on ``nfd discover``'s path
that was a quarter of the whole process. Code off that path uses plain dataclasses. A
:class:`Record` subclass is written as a dataclass is::

    class KernelConfig(Record, frozen=True):
        kconfig_file: str = ""
        config_opts: tuple[str, ...] = ("NO_HZ", "PREEMPT")

    class Result(Record):
        labels: dict[str, str] = field(default_factory=dict)

and gets what a dataclass gets: ``__init__`` (positional or keyword arguments),
``__eq__``, ``__repr__``, ``__hash__`` (frozen: from the fields; mutable: unhashable),
assignment refused with :class:`FrozenInstanceError` when frozen, ``__post_init__`` run
at the end of ``__init__``. mypy checks records as dataclasses (``dataclass_transform``).
Fields are the class's annotated names, in order, except ``ClassVar`` ones; a field
without a default is required. ``field(compare=False)`` leaves a field out of equality
and hashing, ``field(repr=False)`` out of ``repr``; ``metadata`` is free-form.
Annotations are never evaluated: what a field holds is for mypy.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, ClassVar, TypeVar, dataclass_transform

    T = TypeVar("T")
    R = TypeVar("R", bound="Record")
else:

    def dataclass_transform(**_kwargs: object) -> Callable[[T], T]:
        return lambda cls: cls


_MISSING: Any = object()


class _Field:
    __slots__ = ("compare", "default", "default_factory", "metadata", "repr")

    def __init__(
        self, default: Any, default_factory: Any, compare: bool, repr: bool, metadata: Mapping[str, Any]
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.compare = compare
        self.repr = repr
        self.metadata = metadata


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] = _MISSING,
    compare: bool = True,
    repr: bool = True,
    metadata: Mapping[str, Any] = {},
) -> Any:
    """A field's default or default factory, whether it takes part in equality and
    ``repr``, and free-form metadata (as :func:`dataclasses.field`)."""
    return _Field(default, default_factory, compare, repr, metadata)


def record_fields(cls: type[Record] | Record) -> tuple[str, ...]:
    """Field names in declaration order."""
    return cls._fields


def field_metadata(cls: type[Record], name: str) -> Mapping[str, Any]:
    return cls._metadata.get(name, {})


def replace(obj: R, **changes: Any) -> R:
    """A copy of ``obj`` with some fields changed (as :func:`dataclasses.replace`)."""
    values = {n: obj.__dict__[n] for n in obj._fields}
    values.update(changes)
    return type(obj)(**values)


class FrozenInstanceError(AttributeError):
    """Assignment to a frozen record (as :class:`dataclasses.FrozenInstanceError`)."""


@dataclass_transform(field_specifiers=(field,))
class Record:
    """Base of value classes; see the module's docstring."""

    _fields: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[tuple[str, ...]] = ()
    _shown: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _factories: ClassVar[dict[str, Callable[[], Any]]] = {}
    _metadata: ClassVar[dict[str, Mapping[str, Any]]] = {}
    _frozen: ClassVar[bool] = False
    _all_compared: ClassVar[bool] = True

    def __init_subclass__(cls, *, frozen: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields, compared, shown = list(cls._fields), list(cls._compared), list(cls._shown)
        defaults, factories = dict(cls._defaults), dict(cls._factories)
        metadata = dict(cls._metadata)
        # The class's own annotations (inspect.get_annotations would import inspect).
        for name, tp in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            if str(tp).startswith(("ClassVar", "typing.ClassVar")):
                continue
            if name not in fields:
                fields.append(name)
            value = cls.__dict__.get(name, _MISSING)
            compare = show = True
            defaults.pop(name, None)
            factories.pop(name, None)
            if isinstance(value, _Field):
                compare, show = value.compare, value.repr
                if value.metadata:
                    metadata[name] = value.metadata
                if value.default_factory is not _MISSING:
                    factories[name] = value.default_factory
                elif value.default is not _MISSING:
                    defaults[name] = value.default
                delattr(cls, name)
            elif value is not _MISSING:
                defaults[name] = value
            for keep, names in ((compare, compared), (show, shown)):
                if keep and name not in names:
                    names.append(name)
                elif not keep and name in names:
                    names.remove(name)
        cls._fields, cls._compared, cls._shown = tuple(fields), tuple(compared), tuple(shown)
        cls._defaults, cls._factories = defaults, factories
        cls._metadata = metadata
        cls._frozen = frozen or cls._frozen
        cls._all_compared = cls._compared == cls._fields
        if not cls._frozen:
            cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        names = cls._fields
        if len(args) > len(names):
            raise TypeError(
                f"{cls.__name__}.__init__() takes {len(names) + 1} positional arguments "
                f"but {len(args) + 1} were given"
            )
        values = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in cls._fields:
                raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument {key!r}")
            values[key] = value
        d = self.__dict__
        for name in names:
            if name in values:
                d[name] = values[name]
            elif name in cls._defaults:
                d[name] = cls._defaults[name]
            elif name in cls._factories:
                d[name] = cls._factories[name]()
            else:
                raise TypeError(f"{cls.__name__}.__init__() missing required argument: {name!r}")
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:  # checks after the fields are set, as dataclasses do
            post_init()

    def _compare_key(self) -> tuple[Any, ...]:
        # Field by field, in order: what a dataclass's __eq__ and __hash__ compare.
        d = self.__dict__
        return tuple(d[n] for n in self._compared)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        if self._all_compared and len(mine) == len(theirs) == len(self._fields):
            return mine == theirs  # the same keys: equal exactly when every field is (faster)
        return self._compare_key() == other._compare_key()

    def __hash__(self) -> int:
        return hash(self._compare_key())

    def __repr__(self) -> str:
        d = self.__dict__
        inner = ", ".join(f"{n}={d[n]!r}" for n in self._shown)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._frozen:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)
