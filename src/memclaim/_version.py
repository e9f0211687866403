"""The memclaim version, in the lowest layer so that every module may import it.

This is the one place the version is written: ``pyproject.toml`` reads it from here
(``[tool.setuptools.dynamic]``), ``memclaim.__version__`` re-exports it, and code inside the
package imports it from here (``from memclaim._version import __version__``), never from
``memclaim`` (the package's ``__init__`` is the public API, the top layer). A literal, not the
installed distribution's metadata: a source tree on ``PYTHONPATH`` and an older install in the
same environment cannot disagree about which memclaim is running.

>>> from memclaim._version import __version__
>>> __version__
'0.2.0'
"""

from __future__ import annotations

__version__: str = "0.2.0"

__all__ = ["__version__"]
