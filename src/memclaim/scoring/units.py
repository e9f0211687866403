"""Deterministic work units shared by every backend (local, Ray).

Items (one (prompt, suffix) token pair each, deduplicated by content) are bucketed by
(prompt length, suffix length), so the windows of a unit have equal lengths and are scored
without padding; within a bucket they are sorted by content key and cut into units of
``unit_size``. The same items and procedure always give the same units and unit ids, whatever
the batch size, thread count or backend, which is what makes resume and cross-backend
comparison exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..fsutil import sha256_bytes
from ..runtime import DEFAULT_UNIT_SIZE  # windows per unit: the runtime is its home
from ..validate import integer


def item_key(prompt: Sequence[int], suffix: Sequence[int]) -> str:
    """The content address of one (prompt ids, suffix ids) pair: equal pairs share one key, so a
    store scores each pair once whatever window or run it came from.

    >>> item_key([1, 2], [3]) == item_key((1, 2), (3,)), item_key([1, 2], [3]) == item_key([1], [2, 3])
    (True, False)
    """
    return sha256_bytes(
        ("p" + ",".join(map(str, prompt)) + "|s" + ",".join(map(str, suffix))).encode()
    )[:32]


@dataclass(frozen=True)
class Item:
    key: str
    prompt: tuple[int, ...]
    suffix: tuple[int, ...]


@dataclass(frozen=True)
class WorkUnit:
    unit_id: str
    procedure_key: str
    items: tuple[Item, ...]

    @property
    def n_items(self) -> int:
        return len(self.items)


def make_items(pairs: Iterable[tuple[Sequence[int], Sequence[int]]]) -> dict[str, Item]:
    """{key: Item} of the distinct pairs, in first-seen order (a repeated pair is scored once).

    >>> len(make_items([([1, 2], [3]), ([1, 2], [3]), ([4], [5])]))
    2
    """
    out: dict[str, Item] = {}
    for prompt, suffix in pairs:
        k = item_key(prompt, suffix)
        if k not in out:
            out[k] = Item(k, tuple(prompt), tuple(suffix))
    return out


def make_units(
    items: Iterable[Item], procedure_key: str, *, unit_size: int = DEFAULT_UNIT_SIZE
) -> list[WorkUnit]:
    """The work units of a run: items grouped by (prompt length, suffix length) so a unit needs
    no padding, sorted by key and cut into units of at most ``unit_size``; a unit's id hashes the
    procedure key and its items, so the same work is the same unit in every run.

    >>> units = make_units(make_items([([1, 2], [3]), ([4, 5], [6]), ([7], [8, 9])]).values(), "pk", unit_size=1)
    >>> [len(u.items) for u in units], len({u.unit_id for u in units})
    ([1, 1, 1], 3)
    """
    integer("unit size", unit_size, minimum=1)
    buckets: dict[tuple[int, int], list[Item]] = {}
    for it in items:
        buckets.setdefault((len(it.prompt), len(it.suffix)), []).append(it)
    units = []
    for shape in sorted(buckets):
        group = sorted(buckets[shape], key=lambda it: it.key)
        for a in range(0, len(group), unit_size):
            chunk = tuple(group[a : a + unit_size])
            uid = sha256_bytes((procedure_key + ":" + ",".join(it.key for it in chunk)).encode())[
                :32
            ]
            units.append(WorkUnit(uid, procedure_key, chunk))
    return units


@dataclass(frozen=True)
class UnitReceipt:
    """What a backend yields instead of a UnitResult when its worker wrote the unit file itself
    (atomically, into the same store): the driver only checks it and records it."""

    unit_id: str
    procedure_key: str
    n_items: int


# --------------------------------------------------------------------------- streamed units
class LazyUnit:
    """A work unit whose items are made from the windows when it is scored (a whole book's
    units are never all in memory). Same ``unit_id``, ``procedure_key``, ``n_items`` and
    ``items`` as the :class:`WorkUnit` that :func:`make_units` makes from the same items;
    :meth:`materialize` gives that WorkUnit (to send it to another process)."""

    __slots__ = ("unit_id", "procedure_key", "_index", "_positions")

    def __init__(self, unit_id: str, procedure_key: str, index: WindowIndex, positions):
        self.unit_id, self.procedure_key, self._index, self._positions = (
            unit_id,
            procedure_key,
            index,
            positions,
        )

    @property
    def n_items(self) -> int:
        return len(self._positions)

    @property
    def items(self) -> tuple[Item, ...]:
        return self._index.items_at(self._positions)

    def materialize(self) -> WorkUnit:
        return WorkUnit(self.unit_id, self.procedure_key, self.items)


class WindowIndex:
    """Every window's items as compact arrays, made in one pass over the windows (which may be
    lazy, :class:`memclaim.text.windows.DocumentWindows`): per window and prompt the item key
    (32 hex digits, as bytes), the prompt and target lengths. Items are made again from the
    windows when a unit is scored (:meth:`items_at`), so memory is ~60 bytes a window.

    :meth:`units` cuts the same units, with the same ids, as :func:`make_units` on the same
    items (deduplicated by key, bucketed by (prompt length, target length), sorted by key), so a
    store written before streaming existed resumes and keeps its run ids."""

    def __init__(self, window_set, item_fn, keys, prompt_len, target_len):
        import numpy as np

        self.window_set, self._item_fn = (
            window_set,
            item_fn,
        )  # item_fn(window) -> [(prompt, target), ...]
        # keys: [W, n_prompts] 'S16', the 16 bytes the 32 hex digits of item_key spell (same order)
        self.n_windows, self.n_prompts = keys.shape
        self.uniq, first, inverse = np.unique(
            keys.reshape(-1), return_index=True, return_inverse=True
        )
        small = np.int32 if len(self.uniq) < 2**31 else np.int64
        self.first = first.astype(
            small
        )  # flat position (window * n_prompts + prompt) of each distinct item
        self.inverse = inverse.astype(small).reshape(
            self.n_windows, self.n_prompts
        )  # window, prompt -> item
        self.prompt_len = prompt_len.reshape(-1)[first]  # per distinct item
        self.target_len = target_len.reshape(-1)[first]

    @property
    def n_items(self) -> int:
        return len(self.uniq)

    def key_str(self, k: int) -> str:
        return self.uniq[k].ljust(16, b"\0").hex()  # numpy strips trailing NUL bytes

    def window_keys(self, w: int) -> list[str]:
        return [self.key_str(int(self.inverse[w, j])) for j in range(self.n_prompts)]

    def items_of(self, window):
        """The (prompt, target) pairs of one window (made again, as when it was indexed)."""
        return self._item_fn(window)

    def items_at(self, positions) -> tuple[Item, ...]:
        out, made = [], {}
        for k in positions:
            pos = int(self.first[k])
            w, j = divmod(pos, self.n_prompts)
            if w not in made:
                made[w] = self._item_fn(self.window_set.windows[w])
            prompt, target = made[w][j]
            out.append(Item(self.key_str(k), tuple(prompt), tuple(target)))
        return tuple(out)

    def units(self, procedure_key: str, *, unit_size: int = DEFAULT_UNIT_SIZE) -> list[LazyUnit]:
        import numpy as np

        integer("unit size", unit_size, minimum=1)
        pl, tl = self.prompt_len, self.target_len
        order = np.lexsort((self.uniq, tl, pl))  # buckets by (prompt, target) length, then key
        units = []
        a = 0
        n = len(order)
        while a < n:
            shape = (pl[order[a]], tl[order[a]])
            b = a
            while b < n and (pl[order[b]], tl[order[b]]) == shape:
                b += 1
            for c in range(a, b, unit_size):
                pos = order[c : min(b, c + unit_size)]
                uid = sha256_bytes(
                    (procedure_key + ":" + ",".join(self.key_str(k) for k in pos)).encode()
                )[:32]
                units.append(LazyUnit(uid, procedure_key, self, pos))
            a = b
        return units
