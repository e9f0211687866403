"""Moved: :mod:`memclaim.store.store` (issue 26 item 3: the store is its own stage). This
former name stays importable and *is* that module (``memclaim.scoring.store is
memclaim.store.store``), so imports, monkeypatches and pickles made under it keep working."""

import sys

from ..store import store as _moved

sys.modules[__name__] = _moved
