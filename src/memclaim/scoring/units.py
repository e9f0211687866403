"""Deterministic work units shared by every backend (local, Ray).

Items (one (prompt, suffix) token pair each, deduplicated by content) are bucketed by
(prompt length, suffix length), so the windows of a unit have equal lengths and are scored
without padding; within a bucket they are sorted by content key and cut into units of
``unit_size``. The same items and procedure always give the same units and unit ids, whatever
the batch size, thread count or backend, which is what makes resume and cross-backend
comparison exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from ..fsutil import sha256_bytes
from ..validate import integer

DEFAULT_UNIT_SIZE = 64


def item_key(prompt: Sequence[int], suffix: Sequence[int]) -> str:
    """The content address of one (prompt ids, suffix ids) pair: equal pairs share one key, so a
    store scores each pair once whatever window or run it came from.

    >>> item_key([1, 2], [3]) == item_key((1, 2), (3,)), item_key([1, 2], [3]) == item_key([1], [2, 3])
    (True, False)
    """
    return sha256_bytes(("p" + ",".join(map(str, prompt)) + "|s" + ",".join(map(str, suffix))).encode())[:32]


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


def make_units(items: Iterable[Item], procedure_key: str, *, unit_size: int = DEFAULT_UNIT_SIZE) -> list[WorkUnit]:
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
            chunk = tuple(group[a:a + unit_size])
            uid = sha256_bytes((procedure_key + ":" + ",".join(it.key for it in chunk)).encode())[:32]
            units.append(WorkUnit(uid, procedure_key, chunk))
    return units


@dataclass(frozen=True)
class UnitReceipt:
    """What a backend yields instead of a UnitResult when its worker wrote the unit file itself
    (atomically, into the same store): the driver only checks it and records it."""

    unit_id: str
    procedure_key: str
    n_items: int
