"""The ``memclaim`` command: parse, call the library, print. Console output lives here."""
from ..train import toy as _toy  # noqa: F401  (registers the named model "toy")
