"""memclaim: calibrated claims about memorization and extraction in language models.

The pipeline (see DESIGN.md): text -> windows -> scoring -> store -> claims -> report.
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("memclaim")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
