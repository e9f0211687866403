"""Moved: :mod:`memclaim.store.results` (issue 26 item 3: the store is its own stage). This
former name stays importable and *is* that module (``memclaim.scoring.results is
memclaim.store.results``), so imports, monkeypatches and pickles made under it keep working."""

import sys

from ..store import results as _moved

sys.modules[__name__] = _moved
