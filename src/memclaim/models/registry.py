"""Named models: a MODEL argument such as ``smollm2`` or ``toy`` that is not a path.

The registry maps a name to a :class:`NamedModel`, whose ``resolve(log)`` returns the local
HF folder to load (converting or building it once, then cached). The loader
(:mod:`memclaim.models.loader`) registers the real models shipped on PyPI; layers above models/
register their own: :mod:`memclaim.train` registers ``toy``, the built-in tiny GPT, when it is
imported (``import memclaim`` and the CLI import it before loading a model). models/ never
imports train/: the registry is the one way down.

>>> from pathlib import Path
>>> m = register_model("example-model", resolve=lambda log=None: Path("/models/example"),
...                    description="an example", sot="bos", replace=True)
>>> named_model("example-model").resolve()
PosixPath('/models/example')
>>> "example-model" in named_models()
True
>>> unregister_model("example-model")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import DomainError, ModelLoadError

__all__ = [
    "NamedModel",
    "register_model",
    "unregister_model",
    "named_model",
    "named_models",
    "is_named_model",
    "registered_elsewhere",
]

# names registered by a layer above models/ that is not imported yet: what to import for them
_PROVIDED_ELSEWHERE = {"toy": "memclaim.train"}


@dataclass(frozen=True)
class NamedModel:
    """A named model: ``resolve(log)`` -> the local HF folder (``log`` gets progress lines of a
    first conversion or build, or None for silence); ``sot`` is its start-of-text rule
    (memclaim.models.base); ``provider`` the module that registered it."""

    name: str
    resolve: Callable[..., Path]
    description: str
    sot: str = "auto"
    provider: str = ""


_REGISTRY: dict[str, NamedModel] = {}
_LOCK = threading.Lock()


def register_model(
    name: str,
    *,
    resolve: Callable[..., Path],
    description: str,
    sot: str = "auto",
    provider: str = "",
    replace: bool = False,
) -> NamedModel:
    """Register ``name`` (a model name that is not a path); returns the entry.

    A second registration of a name raises :class:`DomainError` unless ``replace``.

    >>> import memclaim as mc
    >>> e = mc.register_model("my-folder", resolve=lambda log=None: Path("/models/mine"), description="mine")
    >>> named_model("my-folder").resolve(), is_named_model("my-folder")
    (PosixPath('/models/mine'), True)
    >>> unregister_model("my-folder"); is_named_model("my-folder")
    False
    """
    if not isinstance(name, str) or not name or "/" in name or name != name.strip():
        raise DomainError(
            f"a named model needs a plain non-empty name without '/', got {name!r}",
            hint="use a short name such as 'toy' or 'smollm2'",
        )
    entry = NamedModel(
        name=name, resolve=resolve, description=description, sot=sot, provider=provider
    )
    with _LOCK:
        if name in _REGISTRY and not replace:
            raise DomainError(
                f"the named model {name!r} is registered already (by {_REGISTRY[name].provider or '?'})",
                hint="pass replace=True to replace it, or choose another name",
            )
        _REGISTRY[name] = entry
    return entry


def unregister_model(name: str) -> None:
    """Remove ``name`` from the registry (no error if it is not there).

    >>> unregister_model("never-registered")
    """
    with _LOCK:
        _REGISTRY.pop(name, None)


def is_named_model(name: str) -> bool:
    """Whether ``name`` is registered.

    >>> is_named_model("smollm2")
    True
    """
    return name in _REGISTRY


def named_models() -> dict[str, str]:
    """{name: description} of every registered model, in registration order.

    >>> import memclaim as mc
    >>> "gemma3-270m" in mc.named_models()
    True
    """
    with _LOCK:
        return {k: v.description for k, v in _REGISTRY.items()}


def registered_elsewhere(name: str) -> str | None:
    """The module that registers ``name`` when imported, for the built-in names that a layer above
    models/ provides (``toy``: memclaim.train); None otherwise.

    >>> registered_elsewhere("toy")
    'memclaim.train'
    """
    return _PROVIDED_ELSEWHERE.get(name)


def named_model(name: str) -> NamedModel:
    """The registered entry for ``name``; :class:`ModelLoadError` naming the known ones otherwise.

    >>> named_model("smollm2").name
    'smollm2'
    """
    entry = _REGISTRY.get(name)
    if entry is not None:
        return entry
    known = ", ".join(named_models()) or "none"
    if name in _PROVIDED_ELSEWHERE:
        raise ModelLoadError(
            f"the named model {name!r} is not registered: {_PROVIDED_ELSEWHERE[name]} registers it "
            "when imported",
            hint=f"import {_PROVIDED_ELSEWHERE[name]} first (memclaim's API and CLI "
            f"do); named models now: {known}",
        )
    raise ModelLoadError(f"unknown named model {name!r}", hint=f"named models: {known}")
