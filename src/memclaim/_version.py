"""The installed memclaim version, in the lowest layer so that every module may import it.

``memclaim.__version__`` re-exports it; code inside the package imports it from here
(``from memclaim._version import __version__``), never from ``memclaim`` (the package's
``__init__`` is the public API, the top layer).

>>> from memclaim._version import __version__
>>> isinstance(__version__, str)
True
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _distribution_version

try:
    __version__: str = _distribution_version("memclaim")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
