"""The single-document census ([EM] §5, App. E).

A fixed document is not a sample from a population, so there is no FPR to certify: the census
calibrates a threshold against a matched non-member control document and reports exactly which
characters of the document are covered by windows scoring above it.

- tau_doc = 10^ceil(log10 max control score), computed in log space: the mantissa of scores like
  1e-27 is unreliable, so it is discarded and the threshold rounded up a decade ([EM] Eq. 31, §5).
  We keep it as the integer log10 tau_doc and never exponentiate it.
- coverage(tau) = (1/L) |union of suffix spans of windows with score > tau| ([EM] Eq. 9). Only
  suffix spans count: the suffix is what was extracted; the prefix was given.
- margin Delta = log10(score / tau) ([EM] D.5, E.2), coverage curve over Delta (Fig. 6).
- per-character heat: each character gets the largest score among windows whose suffix covers
  it ([EM] Fig. 18). coverage(tau) is exactly the share of characters whose heat exceeds tau.
- decontamination: control windows overlapping listed spans are excluded before tau_doc is set
  ([EM] §5, E.1); :func:`flag_near_verbatim` lists high-scoring control windows whose text also
  occurs near-verbatim in the candidate document or a reference corpus, for a person to confirm
  (never removed automatically: [EM] E.1 culls only verified passages).
- the global threshold over several document pairs is the most conservative (largest) one ([EM] §7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin, to_jsonable
from .scores import LN10, controls_at_atom_hint


@dataclass(frozen=True)
class WindowScores:
    """Sliding-window scores over one document.

    log_scores: natural-log q of each window's suffix given its prefix ([EM] Eq. 1), float64.
    starts, ends: the character span [start, end) of each window's *suffix* in the document.
    doc_length: L, the document's length in characters.
    """

    log_scores: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    doc_length: int
    name: str = "document"

    @classmethod
    def from_arrays(
        cls, log_scores, starts, ends, *, doc_length: int, name: str = "document"
    ) -> WindowScores:
        s = np.asarray(log_scores, dtype=np.float64).ravel()
        a = np.asarray(starts).ravel()
        b = np.asarray(ends).ravel()
        if (
            isinstance(doc_length, bool)
            or not isinstance(doc_length, (int, np.integer))
            or doc_length < 1
        ):
            raise InputError(
                f"{name}: document length must be a positive number of characters, got {doc_length!r}",
                hint="pass len(text) of the document",
            )
        if s.size == 0:
            raise InputError(
                f"{name} has no windows: the document ({doc_length} characters) is shorter than one "
                "window (prefix + suffix tokens)",
                hint="use a longer document or shorter prefix/suffix lengths",
            )
        if not (s.size == a.size == b.size):
            raise InputError(
                f"{name}: {s.size} scores but {a.size} starts and {b.size} ends",
                hint="pass one suffix span per window",
            )
        if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
            raise InputError(
                f"{name}: suffix spans must be integer character offsets, got {a.dtype}/{b.dtype}"
            )
        bad = np.flatnonzero((a < 0) | (b > doc_length) | (a >= b))
        if bad.size:
            i = bad[0]
            raise InputError(
                f"{name}: window {i} has suffix span [{a[i]}, {b[i]}) outside [0, {doc_length}) "
                "or empty",
                hint="spans are [start, end) character offsets of the suffix",
            )
        nan = np.flatnonzero(np.isnan(s) | (s > 1e-6))
        if nan.size:
            raise InputError(
                f"{name}: window {nan[0]} has log score {s[nan[0]]!r}, not a log-probability <= 0"
            )
        return cls(
            np.minimum(s, 0.0), a.astype(np.int64), b.astype(np.int64), int(doc_length), name
        )

    def __len__(self) -> int:
        return int(self.log_scores.size)

    def subset(self, keep: np.ndarray) -> WindowScores:
        return WindowScores(
            self.log_scores[keep], self.starts[keep], self.ends[keep], self.doc_length, self.name
        )

    @property
    def log10_scores(self) -> np.ndarray:
        return self.log_scores / LN10


# ------------------------------------------------------------------ union of intervals
def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """|union of [start, end)| by a sort-and-merge sweep. Hand-written: numpy has no interval
    union; the per-character heat below is the fast path for many thresholds at once.

    >>> union_length(np.array([0, 5, 20]), np.array([10, 12, 25]))
    17
    """
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts)[order], np.asarray(ends)[order]
    total = 0
    cur_s, cur_e = int(s[0]), int(e[0])
    for a, b in zip(s[1:].tolist(), e[1:].tolist()):
        if a > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = a, b
        elif b > cur_e:
            cur_e = b
    return total + cur_e - cur_s


def coverage(windows: WindowScores, *, log_tau: float) -> float:
    """coverage(tau) of [EM] Eq. 9 (strict >), by the interval-union sweep.

    >>> ln = math.log
    >>> ctl = WindowScores.from_arrays([ln(1e-12), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([ln(2e-3), ln(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> coverage(doc, log_tau=ln(1e-8))  # only the first suffix, [0, 10), clears tau
    0.5
    """
    keep = windows.log_scores > log_tau
    return union_length(windows.starts[keep], windows.ends[keep]) / windows.doc_length


def char_heat(windows: WindowScores) -> np.ndarray:
    """Per character: the largest log score among windows whose suffix covers it ([EM] Fig. 18);
    -inf where no suffix covers the character. Shape [L], float64, natural log.

    >>> w = WindowScores.from_arrays([-1.0, -2.0], [0, 2], [3, 4], doc_length=5)
    >>> char_heat(w).tolist()  # the larger score paints the overlap
    [-1.0, -1.0, -1.0, -2.0, -inf]
    """
    heat = np.full(windows.doc_length, -np.inf)
    order = np.argsort(windows.log_scores, kind="stable")  # ascending: larger scores paint last
    for i in order.tolist():
        heat[windows.starts[i] : windows.ends[i]] = windows.log_scores[i]
    return heat


@dataclass(frozen=True)
class HeatSegments:
    """The per-character heat of :func:`char_heat` as disjoint segments (``starts``, ``ends``,
    ``values``: log10 of the largest score among windows whose suffix covers the segment; the
    characters of no segment have heat -inf): O(windows) memory, so a census of a whole book
    never holds one number per character ([EM] Fig. 18, Eq. 9).

    Exact: :meth:`array` equals ``char_heat(w) / ln 10`` and :meth:`coverage` equals
    :func:`coverage_from_heat` on it, number for number (tests/claims/test_claims_census.py)."""

    starts: np.ndarray  # [K] int64, increasing, disjoint
    ends: np.ndarray  # [K] int64
    values: np.ndarray  # [K] float64 log10, finite
    doc_length: int

    @classmethod
    def of(cls, windows: WindowScores) -> HeatSegments:
        """Paint the windows from the highest score down onto the elementary intervals between
        span ends, skipping painted intervals with a next-unpainted pointer (union-find): each
        interval is painted once, so O(W log W). Hand-written: numpy has no interval max-cover."""
        fin = np.isfinite(windows.log_scores)
        st, en, sc = windows.starts[fin], windows.ends[fin], windows.log_scores[fin] / LN10
        L = windows.doc_length
        if st.size == 0:
            z = np.zeros(0, np.int64)
            return cls(z, z, np.zeros(0), L)
        coords = np.unique(np.concatenate([st, en]))  # [E + 1] elementary boundaries
        E = len(coords) - 1
        si = np.searchsorted(coords, st)
        ei = np.searchsorted(coords, en)
        val = np.full(E, -np.inf)
        # nxt[i]: the first unpainted interval >= i (E: none); numpy, not a list: 8 bytes an
        # interval, not ~40 (a book has a million intervals)
        nxt = np.arange(E + 1, dtype=np.int64)

        def find(i):
            root = i
            while nxt[root] != root:
                root = int(nxt[root])
            while i != root:
                j = int(nxt[i])
                nxt[i] = root
                i = j
            return root

        for w in np.argsort(-sc, kind="stable"):
            i, e, v = find(int(si[w])), int(ei[w]), sc[w]
            while i < e:
                val[i] = v
                nxt[i] = i + 1
                i = find(i + 1)
        keep = np.isfinite(val)
        return cls(
            coords[:-1][keep].astype(np.int64), coords[1:][keep].astype(np.int64), val[keep], int(L)
        )

    @property
    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def covered_chars(self) -> int:
        """Characters covered by a window with a finite score."""
        return int(self.lengths.sum())

    def chars_above(self, log10_thresholds, *, strict: bool = True) -> np.ndarray:
        """Characters whose heat exceeds (``strict``) or reaches each threshold (log10)."""
        t = np.asarray(log10_thresholds, dtype=np.float64)
        order = np.argsort(self.values, kind="stable")
        v = self.values[order]
        cum = np.concatenate([[0], np.cumsum(self.lengths[order][::-1])])[
            ::-1
        ]  # cum[i] = length of v[i:]
        idx = np.searchsorted(v, t, side="right" if strict else "left")
        out = cum[idx]
        if not strict:  # -inf characters reach a -inf threshold
            out = np.where(np.isneginf(t), self.doc_length, out)
        return out

    def coverage(self, log10_thresholds, *, strict: bool = True) -> np.ndarray:
        """Share of characters with heat above each threshold (:func:`coverage_from_heat`)."""
        return self.chars_above(log10_thresholds, strict=strict) / self.doc_length

    def array(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """The per-character heat (log10; -inf uncovered) of characters [start, end)."""
        end = self.doc_length if end is None else min(int(end), self.doc_length)
        out = np.full(max(0, end - start), -np.inf)
        lo, hi = (
            np.searchsorted(self.ends, start, side="right"),
            np.searchsorted(self.starts, end, side="left"),
        )
        for a, b, v in zip(
            self.starts[lo:hi].tolist(), self.ends[lo:hi].tolist(), self.values[lo:hi].tolist()
        ):
            out[max(a, start) - start : min(b, end) - start] = v
        return out

    def binned(self, n_cells: int) -> tuple[np.ndarray, int]:
        """The heat at book scale: the document cut into at most ``n_cells`` cells of ``c``
        characters, each with the largest heat among its characters (-inf: none covered);
        returns (cells, c). c = 1 gives :meth:`array`."""
        c = max(1, -(-self.doc_length // max(1, int(n_cells))))
        n = -(-self.doc_length // c)
        out = np.full(n, -np.inf)
        order = np.argsort(self.values, kind="stable")  # ascending: larger values paint last
        for k in order.tolist():
            a, b = int(self.starts[k]) // c, (int(self.ends[k]) - 1) // c + 1
            np.maximum(out[a:b], self.values[k], out=out[a:b])
        return out, c

    def weighted(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, character counts) of the heat, the uncovered characters as one -inf entry."""
        rest = self.doc_length - self.covered_chars
        return (
            np.concatenate([self.values, [-np.inf]]) if rest else self.values,
            np.concatenate([self.lengths, [rest]]) if rest else self.lengths,
        )


def coverage_from_heat(
    heat: np.ndarray, log_thresholds: float | Sequence[float] | np.ndarray, *, strict: bool = True
) -> np.ndarray:
    """Share of characters with heat > t (or >= t) for each threshold t (vectorized).

    >>> coverage_from_heat(np.array([-1.0, -1.0, -2.0, -np.inf]), [-1.5, -1.0]).tolist()
    [0.5, 0.0]
    """
    hs = np.sort(heat)
    t = np.asarray(log_thresholds, dtype=np.float64)
    idx = np.searchsorted(hs, t, side="right" if strict else "left")
    return (hs.size - idx) / hs.size


# ------------------------------------------------------------------ the threshold
@dataclass(frozen=True)
class CensusThreshold(ResultMixin):
    """tau_doc = 10^log10_tau ([EM] Eq. 31), from the decontaminated control."""

    log10_tau: int  # an integer decade; tau itself is never exponentiated
    max_control_log10: float  # log10 of the top own-prose control score
    argmax_window: int  # index (in the full control) of the window that set it
    argmax_span: tuple[int, int]
    n_control_windows: int
    n_excluded: int
    excluded_windows: tuple[int, ...]
    excluded_spans: tuple[tuple[int, int], ...]
    control_name: str

    @property
    def log_tau(self) -> float:
        return self.log10_tau * LN10


def _normalize_spans(spans, name) -> tuple[tuple[int, int], ...]:
    out = []
    for sp in spans or ():
        try:
            a, b = (int(x) for x in sp)
        except (TypeError, ValueError):
            raise InputError(
                f"{name}: bad span {sp!r}", hint="give spans as (start, end) character offsets"
            ) from None
        if a < 0 or b <= a:
            raise InputError(
                f"{name}: span {sp!r} is empty or negative",
                hint="spans are [start, end) with start < end",
            )
        out.append((a, b))
    return tuple(out)


def overlapping_windows(windows: WindowScores, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Boolean mask: windows whose suffix span overlaps any of ``spans`` ([start, end)).

    >>> w = WindowScores.from_arrays([-1.0, -2.0], [0, 10], [10, 20], doc_length=20)
    >>> overlapping_windows(w, [(9, 11)]).tolist(), overlapping_windows(w, [(10, 12)]).tolist()
    ([True, True], [False, True])
    """
    mask = np.zeros(len(windows), dtype=bool)
    for a, b in spans:
        mask |= (windows.starts < b) & (windows.ends > a)
    return mask


def census_threshold(
    control: WindowScores,
    *,
    exclude_spans: Sequence[tuple[int, int]] = (),
    exclude_windows: Sequence[int] = (),
) -> CensusThreshold:
    """tau_doc = 10^ceil(log10 max score) over control windows that remain after excluding those
    whose suffix overlaps ``exclude_spans`` (verified quotations, [EM] E.1) and the windows
    listed by index in ``exclude_windows``.

    >>> ln = math.log
    >>> ctl = WindowScores.from_arrays([ln(1e-12), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([ln(2e-3), ln(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> census_threshold(ctl).log10_tau, census_threshold(ctl, exclude_spans=[(10, 20)]).log10_tau
    (-8, -11)
    """
    spans = _normalize_spans(exclude_spans, f"{control.name} exclusions")
    drop = overlapping_windows(control, spans)
    for i in exclude_windows or ():
        i = int(i)
        if not 0 <= i < len(control):
            raise InputError(
                f"{control.name}: excluded window index {i} is out of range 0..{len(control) - 1}"
            )
        drop[i] = True
    keep = ~drop
    if not keep.any():
        raise InputError(
            f"{control.name}: every one of its {len(control)} windows was excluded by decontamination",
            hint="exclude only verified quotations; the threshold needs own-prose windows",
        )
    s = np.where(keep, control.log_scores, -np.inf)
    if np.all(np.isneginf(s)):
        raise InputError(
            f"{control.name}: all {int(keep.sum())} remaining control windows score -inf (probability 0), "
            "so there is no threshold to calibrate ([EM] C.4.4)",
            hint=controls_at_atom_hint(None, binary_possible=False),
        )
    i = int(np.argmax(s))
    top10 = float(s[i]) / LN10
    # [EM] Eq. 31: discard the mantissa, round up to the next decade. ceil of a float log10 that
    # lands a hair above an exact integer rounds up one more decade: conservative, never lower.
    log10_tau = int(math.ceil(top10))
    return CensusThreshold(
        log10_tau,
        top10,
        i,
        (int(control.starts[i]), int(control.ends[i])),
        len(control),
        int(drop.sum()),
        tuple(int(x) for x in np.flatnonzero(drop)),
        spans,
        control.name,
    )


def global_threshold(thresholds: Sequence[CensusThreshold]) -> CensusThreshold:
    """The most conservative (largest) threshold over several document pairs ([EM] §7, Fig. 6).

    >>> ln = math.log
    >>> ctl = WindowScores.from_arrays([ln(1e-12), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([ln(2e-3), ln(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> global_threshold([census_threshold(ctl), census_threshold(doc)]).log10_tau
    -2
    """
    if not thresholds:
        raise InputError(
            "no thresholds given", hint="pass the census threshold of each document pair"
        )
    return max(thresholds, key=lambda t: t.log10_tau)


# ------------------------------------------------------------------ the census
@dataclass(frozen=True)
class CoverageCurve(ResultMixin):
    margins: np.ndarray  # Delta = log10(score / tau) thresholds
    coverage: np.ndarray  # share of characters with heat above tau x 10^Delta


@dataclass(frozen=True)
class CensusResult(ResultMixin):
    """A census of one document against its matched control ([EM] §5)."""

    document_name: str
    doc_length: int
    n_windows: int
    threshold: CensusThreshold
    log10_tau: int
    coverage: float  # coverage(tau_doc), [EM] Eq. 9
    covered_chars: int
    n_windows_above: int
    max_margin: float  # largest Delta over the document's windows
    curve: CoverageCurve  # [EM] Fig. 6
    coverage_at_margins: dict  # {"0": .., "5": ..}: the numbers of [EM] §5
    heat: HeatSegments = field(repr=False)  # the per-character heat, as segments (not in to_dict)
    window_margins: np.ndarray = field(repr=False)

    @property
    def heat_log10(self) -> np.ndarray:
        """The per-character heat, log10 (an array of the document's length: for a book, use
        ``heat``'s segments, ``heat.binned`` or ``heat.array(start, end)``)."""
        return self.heat.array()

    def to_dict(self) -> dict:
        d = {k: v for k, v in super().to_dict().items() if k not in ("heat", "window_margins")}
        d["heat_summary"] = {
            "covered_by_any_window": self.heat.covered_chars,
            "above_threshold": self.covered_chars,
        }
        return to_jsonable(d)


def census(
    document: WindowScores,
    control: WindowScores,
    *,
    exclude_spans: Sequence[tuple[int, int]] = (),
    exclude_windows: Sequence[int] = (),
    threshold: CensusThreshold | None = None,
    margins: Sequence[float] | np.ndarray | None = None,
    report_margins: Sequence[float] = (0, 1, 2, 5, 10),
) -> CensusResult:
    """Census of ``document`` against ``control`` ([EM] §5). ``threshold`` overrides the control's
    own (e.g. a global threshold from :func:`global_threshold`).

    >>> ln = math.log
    >>> ctl = WindowScores.from_arrays([ln(1e-12), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([ln(2e-3), ln(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> r = census(doc, ctl)
    >>> r.log10_tau, r.coverage, r.n_windows_above
    (-8, 0.5, 1)
    """
    th = (
        threshold
        if threshold is not None
        else census_threshold(control, exclude_spans=exclude_spans, exclude_windows=exclude_windows)
    )
    heat = HeatSegments.of(document)  # O(windows): never one number per character
    covered = int(heat.chars_above([th.log10_tau])[0])
    margins_w = document.log10_scores - th.log10_tau  # [EM] D.5: log10(score / tau)
    above = margins_w > 0
    max_margin = float(margins_w.max())
    if margins is None:
        top = max(1.0, math.ceil(max_margin) if math.isfinite(max_margin) else 1.0)
        margins = np.linspace(0.0, top, int(min(400, max(50, top * 10))) + 1)
    margins = np.asarray(margins, dtype=np.float64)
    cov_curve = heat.coverage(th.log10_tau + margins)
    at = {f"{m:g}": float(heat.coverage([th.log10_tau + m])[0]) for m in report_margins}
    return CensusResult(
        document.name,
        document.doc_length,
        len(document),
        th,
        th.log10_tau,
        covered / document.doc_length,
        covered,
        int(above.sum()),
        max_margin,
        CoverageCurve(margins, cov_curve),
        at,
        heat,
        margins_w,
    )


@dataclass(frozen=True)
class GlobalCensus(ResultMixin):
    threshold: CensusThreshold  # the most conservative pair's threshold
    per_pair_log10_tau: dict
    results: tuple  # CensusResult per document at the global threshold


def global_census(
    pairs: Sequence[tuple[WindowScores, WindowScores]], *, exclude_spans: Sequence = ()
) -> GlobalCensus:
    """Census of each document at the most conservative threshold over all pairs ([EM] §7).
    ``exclude_spans[i]`` decontaminates the i-th control.

    >>> import math
    >>> from memclaim.claims.census import WindowScores, global_census
    >>> ln = math.log
    >>> ctl = WindowScores.from_arrays([ln(1e-12), ln(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> ctl2 = WindowScores.from_arrays([ln(1e-5), ln(1e-9)], [0, 10], [10, 20], doc_length=20, name="ctl2")
    >>> doc = WindowScores.from_arrays([ln(2e-3), ln(1e-7)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> g = global_census([(doc, ctl), (doc, ctl2)])  # alone, ctl would put tau at 1e-8
    >>> g.threshold.log10_tau, [r.coverage for r in g.results]
    (-5, [0.5, 0.5])
    """
    if not pairs:
        raise InputError("no document pairs given")
    ths = []
    for i, (_, ctrl) in enumerate(pairs):
        ex = exclude_spans[i] if i < len(exclude_spans) else ()
        ths.append(census_threshold(ctrl, exclude_spans=ex))
    g = global_threshold(ths)
    res = tuple(census(doc, ctrl, threshold=g) for doc, ctrl in pairs)
    return GlobalCensus(g, {f"{doc.name}": t.log10_tau for (doc, _), t in zip(pairs, ths)}, res)


# ------------------------------------------------------------------ near-verbatim flags
@dataclass(frozen=True)
class FlaggedWindow(ResultMixin):
    window: int
    span: tuple[int, int]
    log10_score: float
    text: str
    source: str
    similarity: float  # rapidfuzz partial_ratio, 0..100
    source_span: tuple[int, int]


def flag_near_verbatim(
    control: WindowScores,
    control_text: str,
    *,
    candidate_text: str | None = None,
    references: dict | None = None,
    min_similarity: float = 90.0,
    top: int = 200,
    min_chars: int = 20,
) -> tuple[FlaggedWindow, ...]:
    """Control windows whose suffix text occurs near-verbatim in the candidate document or a
    reference corpus (rapidfuzz ``partial_ratio_alignment`` >= ``min_similarity``), among the
    ``top`` highest-scoring control windows ([EM] E.1: inspect the high-scoring tail). These
    are suspects for a person to confirm, never removed automatically.

    >>> from memclaim.claims.census import WindowScores, flag_near_verbatim
    >>> text = "It was the best of times, it was the worst of times."
    >>> ctl = WindowScores.from_arrays([-3.0, -9.0], [0, 26], [26, 52], doc_length=52, name="ctl")
    >>> [(f.span, f.source) for f in flag_near_verbatim(ctl, text, references={"Dickens": "... " + text[:26]})]
    [((0, 26), 'Dickens')]
    """
    from rapidfuzz import fuzz

    if len(control_text) != control.doc_length:
        raise InputError(
            f"{control.name}: text has {len(control_text)} characters but the windows say "
            f"{control.doc_length}",
            hint="pass the same control text the windows were cut from",
        )
    sources = {}
    if candidate_text:
        sources["candidate document"] = candidate_text
    for k, v in (references or {}).items():
        if not isinstance(v, str):
            raise InputError(f"reference {k!r} is not a text")
        sources[str(k)] = v
    if not sources:
        return ()
    order = np.argsort(-control.log_scores, kind="stable")[: max(0, int(top))]
    out = []
    for i in order.tolist():
        if control.log_scores[i] == -np.inf:
            break
        a, b = int(control.starts[i]), int(control.ends[i])
        text = control_text[a:b]
        if len(text.strip()) < min_chars:
            continue
        best = None
        for name, src in sources.items():
            al = fuzz.partial_ratio_alignment(text, src, score_cutoff=min_similarity)
            if al is not None and (best is None or al.score > best[1].score):
                best = (name, al)
        if best is not None:
            name, al = best
            out.append(
                FlaggedWindow(
                    i,
                    (a, b),
                    float(control.log_scores[i]) / LN10,
                    text,
                    name,
                    float(al.score),
                    (int(al.dest_start), int(al.dest_end)),
                )
            )
    return tuple(out)
