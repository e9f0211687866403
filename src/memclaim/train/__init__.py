"""Training: the one training loop (:mod:`.trainer`, DP-SGD in :mod:`.dp`), the built-in tiny GPT
(:mod:`.toy`), fine-tuning with planted canaries, shadow models, unlearning.

Importing this package registers the named model ``toy`` (:mod:`memclaim.models.registry`).
"""

from . import toy  # noqa: F401  (registers "toy")
