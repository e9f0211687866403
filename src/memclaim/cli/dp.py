"""`memclaim dp`: what a differential-privacy guarantee does and does not say ([MX] §3-5, App. F.2).

Thin: parse, call :mod:`memclaim.api` (dp_bounds, dp_plots, dp_baseline, dp_account), print. Every printed number names its neighbouring
relation and, for memorization caps, the counterfactual functional (RO, LOO, COND).
"""

from __future__ import annotations

import math
import sys

import click

from .. import api
from ..api import DomainError, dumps
from .common import placement_kwargs, placement_options, print_json, trust_remote_code_option
from .options import NEIGHBORS, Group

# one spelling per relation on every command ("replace" before 0.2: still read, with a note)
NEIGHBOR_CHOICE = click.Choice(NEIGHBORS)


def _console(err: bool = False):
    from rich.console import Console

    # the terminal's width (80 columns when not a terminal, unless COLUMNS says otherwise): the
    # bounds table adapts to it (bounds_table), every other table wraps its cells at spaces
    return Console(stderr=err, highlight=False)


WIDE = 140  # columns from which the bounds table shows reference and note in columns of their own


def bounds_table(rows, width: int, title: str = "", *, brackets: bool = False):
    """The bounds table for a console ``width`` columns wide: (table, footnotes). Wide: quantity,
    value, [exact value within,] relation, functional, reference, note. Narrow (below
    :data:`WIDE`): quantity, value (with its certified bracket on a second line when ``brackets``),
    relation and functional in one column, and a footnote number; each footnote holds a row's
    reference and note, printed below the table (rows with the same text share a number). Words
    are never cut: every column is wide enough for its longest word, and wraps at spaces.
    ``brackets``: a DP-SGD curve's rows carry the certified accuracy [optimistic, pessimistic]
    (issue 24), shown beside every value."""
    from rich.table import Table

    def bracket(r) -> str:
        b = r.bracket
        return "" if b is None else f"[{_fmt(b[0])}, {_fmt(b[1])}]"

    table = Table(title=_e(title) if title else None, title_justify="left")
    if width >= WIDE:
        cols = (
            ("quantity", "value")
            + (("exact value within",) if brackets else ())
            + ("relation", "functional", "reference", "note")
        )
        for col in cols:
            table.add_column(col, overflow="fold")
        for r in rows:
            cells = [r.name, _fmt(r.value)] + ([bracket(r)] if brackets else [])
            table.add_row(*(_e(x) for x in (*cells, r.relation, r.functional, r.reference, r.note)))
        return table, []
    notes: dict[str, int] = {}
    table.add_column("quantity", ratio=3, overflow="fold")
    table.add_column("value (exact within)" if brackets else "value", no_wrap=True)
    table.add_column("relation, functional", ratio=1, overflow="fold")
    table.add_column("note", no_wrap=True)
    for r in rows:
        text = r.reference + (f": {r.note}" if r.note else "")
        k = notes.setdefault(text, len(notes) + 1)
        value = _fmt(r.value) + (f"\n{bracket(r)}" if brackets and r.bracket is not None else "")
        table.add_row(_e(r.name), _e(value), _e(f"{r.relation}, {r.functional}"), f"[{k}]")
    return table, [f"[{k}] {text}" for text, k in notes.items()]


def _e(text) -> str:
    """Escape rich markup: '[MX] Thm. 4.1' and '[add/remove]' are text, not styles."""
    from rich.markup import escape

    return escape(str(text))


def _fmt(v) -> str:
    if v is None:
        return "not implied"
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v != 0 and (abs(v) < 1e-4 or abs(v) >= 1e6):
            return f"{v:.6e}"
        return f"{v:.6g}"
    return str(v)


@click.group(name="dp", cls=Group)
def command():
    """Differential-privacy bounds on memorization and extraction ([MX] §3-5, App. F.2).

    \b
    Examples:
      memclaim dp bounds --epsilon 1 --neighbors replace-one --copies 2
      memclaim dp bounds --epsilon 1 --list-size 4 --risk 0.1 --baseline 0.355 --neighbors add-remove
      memclaim dp bounds --epsilon 4 --delta 1e-5 --list-size 1 --risk 0.1 --baseline 0.001 \\
          --successes 12 --trials 40 --neighbors add-remove --json
      memclaim dp bounds --noise-multiplier 1.1 --sampling-rate 0.01 --steps 3000 --neighbors add-remove
      memclaim dp plot --out figs --neighbors add-remove
      memclaim dp baseline toy --prefix "My PIN is" --secret-length 2 --list-size 1
      memclaim dp account --noise-multiplier 1.1 --sampling-rate 0.01 --steps 3000 --delta 1e-5
    """


@command.command(
    "bounds",
    short_help="Every memorization cap and extraction quantity for a guarantee.",
    default_group="Inputs",
    groups=dict.fromkeys(
        (
            "m",
            "tau",
            "baseline",
            "truncation",
            "omega",
            "n",
            "frequency",
            "successes",
            "trials",
            "confidence",
            "independence",
        ),
        "Claim",
    ),
)
@click.option(
    "--epsilon", type=float, default=None, help="epsilon of the guarantee (pure, or with --delta)."
)
@click.option(
    "--delta",
    type=float,
    default=None,
    help="delta of an (epsilon, delta) guarantee, in [0, 1); with DP-SGD settings, the delta of the "
    "(epsilon, delta) route shown beside the curve [default 1e-5].",
)
@click.option(
    "--mu", type=float, default=None, help="mu of a Gaussian-DP guarantee (instead of --delta)."
)
@click.option(
    "--noise-multiplier",
    "sigma",
    type=float,
    default=None,
    help="DP-SGD: noise multiplier sigma (with --sampling-rate and --steps); every row then comes from "
    "the trade-off curve of the composed mechanism (privacy-loss distribution).",
)
@click.option(
    "--sampling-rate", "q", type=float, default=None, help="DP-SGD: Poisson sampling rate q."
)
@click.option("--steps", type=int, default=None, help="DP-SGD: number of steps T.")
@click.option(
    "--pld-grid",
    type=float,
    default=None,
    help="DP-SGD: the PLD's value discretization, used as given [default: 1e-4, halved (at most twice) "
    "while the certified accuracy of eta is worse than 0.5%]; coarser is faster and looser.",
)
@click.option(
    "--neighbors",
    type=NEIGHBOR_CHOICE,
    required=True,
    help="relation the guarantee was proved for: replace-one or add-remove.",
)
@click.option(
    "--copies",
    type=int,
    default=1,
    show_default=True,
    help="k: copies of the target (duplication); memorization caps and every extraction quantity then "
    "use the k-fold group curve ([MX] Cor. 4.3), sufficient conditions only.",
)
@click.option(
    "--list-size",
    "m",
    type=int,
    default=None,
    help="m: candidate-list budget of the extraction protocol.",
)
@click.option(
    "--risk", "tau", type=float, default=None, help="tau: target extraction risk level in (0, 1)."
)
@click.option(
    "--baseline",
    "baseline",
    type=str,
    default=None,
    help="kappa_pi(m) of the canary: a number, or a certified interval 'LO,HI'.",
)
@click.option(
    "--truncation", type=float, default=None, help="M: log-loss truncated at M (truncation price)."
)
@click.option(
    "--in-support-mass",
    "omega",
    type=float,
    default=None,
    help="omega: target's corpus mass (Remark B.7).",
)
@click.option(
    "--dataset-size", "n", type=int, default=None, help="n: dataset size (Remark B.7, Prop. A.2)."
)
@click.option(
    "--frequency",
    type=float,
    default=None,
    help="p: target frequency for the COND conversion (Prop. A.2).",
)
@click.option("--successes", type=int, default=None, help="audit: extraction successes observed.")
@click.option("--trials", type=int, default=None, help="audit: extraction trials.")
@click.option(
    "--confidence",
    type=float,
    default=0.95,
    show_default=True,
    help="audit: confidence of the lower bound.",
)
@click.option(
    "--independence",
    type=click.Choice(["separate-runs", "one-run"]),
    default="separate-runs",
    show_default=True,
    help="audit: how the trials are independent.",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table.")
def bounds(
    epsilon,
    delta,
    mu,
    sigma,
    q,
    steps,
    pld_grid,
    neighbors,
    copies,
    m,
    tau,
    baseline,
    truncation,
    omega,
    n,
    frequency,
    successes,
    trials,
    confidence,
    independence,
    as_json,
):
    """Every memorization cap and extraction-boundary quantity for one guarantee.

    The guarantee is --epsilon [--delta], --mu, or a DP-SGD run (--noise-multiplier,
    --sampling-rate, --steps): then every row comes from the certified trade-off curve of the
    composed subsampled Gaussian (dp_accounting's privacy-loss distribution, pessimistic) and
    names its grid, and the (epsilon, delta) route follows, marked as the looser one.

    \b
    Examples:
      memclaim dp bounds --epsilon 1 --neighbors replace-one --copies 2
      memclaim dp bounds --mu 1 --epsilon 1 --list-size 4 --risk 0.1 --neighbors add-remove --json
      memclaim dp bounds --noise-multiplier 1.1 --sampling-rate 0.01 --steps 3000 --neighbors add-remove
    """
    res = api.dp_bounds(
        neighbors=neighbors,
        epsilon=epsilon,
        delta=delta,
        mu=mu,
        noise_multiplier=sigma,
        sampling_rate=q,
        steps=steps,
        pld_grid=pld_grid,
        copies=copies,
        list_size=m,
        risk=tau,
        baseline=baseline,
        truncation=truncation,
        in_support_mass=omega,
        dataset_size=n,
        frequency=frequency,
        successes=successes,
        trials=trials,
        confidence=confidence,
        independence=independence,
    )
    if as_json:
        click.echo(dumps(res.to_dict(), indent=2))
        return
    summary, kap, audit = res.summary, res.baseline_interval, res.audit
    from rich.table import Table

    con = _console()
    title = summary.guarantee
    if summary.mechanism is not None:
        mech = summary.mechanism
        title += (
            f"; {mech['grid']}; curve checks (convex, nonincreasing, f <= 1 - alpha): "
            f"{'passed' if mech['check']['valid'] else 'FAILED'}; computed in {mech['seconds']:.2g} s"
        )
    if copies > 1:
        title += (
            f"; target planted {copies} times: extraction rows use the {copies}-fold group curve "
            "([MX] Cor. 4.3), sufficient conditions only"
        )
    con.print(_e(title))
    brackets = summary.mechanism is not None
    table, notes = bounds_table(summary.rows, con.width, brackets=brackets)
    con.print(table)
    for line in notes:
        con.print(_e(line))
    if res.guarantee_note is not None:
        con.print(_e(f"note: {res.guarantee_note}"))
    if brackets:
        con.print(
            _e(
                "rows without a tag come from the DP-SGD trade-off curve (never above the true curve); 'exact "
                "value within' is the certified accuracy: the same quantity from an optimistic curve (never "
                "below the true one) is the other end; rows tagged [(eps, delta) route, looser] convert the "
                "same PLD to (eps, delta) first."
            )
        )
    if kap is not None and kap[0] != kap[1]:
        con.print(
            f"baseline is a certified interval [{kap[0]:.6g}, {kap[1]:.6g}]; bounds use the upper end."
        )
    if audit is not None:
        t = Table(title=_e("audit soundness ([MX] Cor. 5.3)"), title_justify="left")
        t.add_column("quantity")
        t.add_column("value", overflow="fold")
        for name, val in [
            ("claimed guarantee", audit.claimed),
            ("relation", audit.neighbors),
            ("list size m", audit.m),
            ("baseline kappa [lo, hi]", f"[{audit.kappa_lo:.6g}, {audit.kappa_hi:.6g}]"),
            ("successes / trials", f"{audit.successes} / {audit.trials}"),
            (
                f"success lower bound ({audit.confidence:.0%}, Clopper-Pearson)",
                _fmt(audit.success_lower),
            ),
            (
                "bound 1 - f(kappa_hi)"
                if audit.copies == 1
                else f"bound 1 - f^({audit.copies})(kappa_hi), {audit.copies} copies",
                _fmt(audit.bound),
            ),
            ("p-value (binomial, H0: rate <= bound)", _fmt(audit.p_value)),
            ("refuted", "yes" if audit.refuted else "no"),
            ("Cor. 5.3 condition kappa_hi <= alpha*(s)", "met" if audit.informative else "not met"),
            ("all-success trials needed to refute", _fmt(audit.min_trials_to_refute)),
            ("independence", f"{audit.independence}: {audit.assumption}"),
            ("verdict", audit.verdict),
        ]:
            t.add_row(_e(name), _e(val))
        con.print(t)


@command.command(
    "plot",
    short_help="Draw [MX] Figs. 2-4 (advantage curves, staircase, boundary) as PNG.",
    default_group="Inputs",
    groups=dict.fromkeys(("copies", "max_copies", "tau", "m", "beps"), "Claim"),
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Folder for the PNG files.",
)
@click.option(
    "--neighbors", type=NEIGHBOR_CHOICE, required=True, help="relation the guarantee is for."
)
@click.option(
    "--epsilon",
    type=float,
    default=1.0,
    show_default=True,
    help="epsilon of the curves in Figs. 2-3.",
)
@click.option(
    "--delta",
    type=float,
    default=0.1,
    show_default=True,
    help="delta of the approximate-DP curve in Fig. 2.",
)
@click.option(
    "--mu",
    type=float,
    default=1.0,
    show_default=True,
    help="mu of the Gaussian-DP curve in Fig. 2.",
)
@click.option(
    "--copies", type=int, default=4, show_default=True, help="k of the cobweb orbit in Fig. 3."
)
@click.option(
    "--max-copies",
    type=int,
    default=8,
    show_default=True,
    help="Largest k of the staircase in Fig. 3.",
)
@click.option(
    "--risk",
    "tau",
    type=float,
    default=0.1,
    show_default=True,
    help="tau: extraction risk level (Fig. 4).",
)
@click.option(
    "--list-size",
    "m",
    type=int,
    default=1,
    show_default=True,
    help="m: candidate-list budget (Fig. 4).",
)
@click.option(
    "--boundary-epsilon",
    "beps",
    type=float,
    multiple=True,
    default=(1.0, 3.0),
    show_default=True,
    help="epsilons drawn in Fig. 4 (repeat the option).",
)
@click.option(
    "--noise-multiplier",
    "sigma",
    type=float,
    default=None,
    help="DP-SGD (with --sampling-rate, --steps): also draw fig5_dpsgd.png, the run's trade-off curve "
    "beside its (epsilon, delta) envelope.",
)
@click.option(
    "--sampling-rate", "q", type=float, default=None, help="DP-SGD: Poisson sampling rate q."
)
@click.option("--steps", type=int, default=None, help="DP-SGD: number of steps T.")
@click.option(
    "--dpsgd-delta",
    type=float,
    default=1e-5,
    show_default=True,
    help="DP-SGD: delta of the (epsilon, delta) envelope drawn beside the curve.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the files written as JSON.")
def plot(
    out_dir,
    neighbors,
    epsilon,
    delta,
    mu,
    copies,
    max_copies,
    tau,
    m,
    beps,
    sigma,
    q,
    steps,
    dpsgd_delta,
    as_json,
):
    """Draw [MX] Fig. 2 (advantage curves), Fig. 3 (staircase) and Fig. 4 (boundary vs baseline);
    with DP-SGD settings also the run's trade-off curve against its (epsilon, delta) envelope.

    \b
    Examples:
      memclaim dp plot --out figs --neighbors add-remove --epsilon 1
      memclaim dp plot --out figs --neighbors add-remove --noise-multiplier 1.1 --sampling-rate 0.01 --steps 3000
    """
    paths = api.dp_plots(
        out_dir,
        neighbors=neighbors,
        epsilon=epsilon,
        delta=delta,
        mu=mu,
        copies=copies,
        max_copies=max_copies,
        risk=tau,
        list_size=m,
        boundary_epsilons=tuple(beps),
        noise_multiplier=sigma,
        sampling_rate=q,
        steps=steps,
        dpsgd_delta=dpsgd_delta,
    )
    if as_json:
        print_json({"files": [str(p) for p in paths], "neighbors": neighbors})
        return
    for p in paths:
        click.echo(str(p))


@command.command(
    "baseline",
    short_help="Certify the prior baseline kappa_pi(m) of a canary (App. F.2).",
    default_group="Inputs",
    groups={"temperature": "Procedure"},
)
@click.argument("model", required=False)
@click.option(
    "--prefix", default=None, help="the canary's public prefix c (text; required with MODEL)."
)
@click.option(
    "--secret-length",
    "L",
    type=int,
    default=None,
    help="L: secret length in tokens (required with MODEL).",
)
@click.option(
    "--list-size", "m", type=int, required=True, help="m: the extraction protocol's list size."
)
@click.option(
    "--corpus-samples",
    "corpus_samples",
    type=click.Path(dir_okay=False),
    default=None,
    help="instead of MODEL: a JSONL file of per-draw top-m masses of pi(.|S^-), one line per draw of "
    'the corpus remainder ({"kappa": x} or {"kappa_lo": a, "kappa_hi": b}, e.g. the --json '
    "output of this command run on each draw's prior); certifies kappa-bar of [MX] Prop. C.2(b) "
    "at 95% confidence.",
)
@click.option(
    "--temperature",
    type=float,
    default=1.0,
    show_default=True,
    help="temperature the canaries were sampled at.",
)
@click.option(
    "--max-nodes", type=int, default=100_000, show_default=True, help="budget of vocabulary rows."
)
@click.option(
    "--time-limit",
    type=float,
    default=None,
    help="seconds; the interval stays certified if cut short.",
)
@click.option(
    "--batch-size", type=int, default=64, show_default=True, help="Prefixes per forward pass."
)
@trust_remote_code_option
@placement_options
@click.option("--json", "as_json", is_flag=True, help="Print the interval as JSON.")
def baseline(
    model,
    prefix,
    L,
    m,
    corpus_samples,
    temperature,
    max_nodes,
    time_limit,
    batch_size,
    trust_remote_code,
    as_json,
):
    """Certify kappa_pi(m), the top-m prior mass of length-L continuations ([MX] App. F.2).

    MODEL must be the PRIOR: the base model before any canary was planted (on the audited model
    kappa would absorb the leak). The result is an interval [kappa_lo, kappa_hi] that is valid
    whenever the search stops and closes to a point when it finishes.

    With --corpus-samples FILE instead of MODEL: the corpus-conditional baseline kappa-bar =
    E_{S^-}[sup_{|L|<=m} pi(L | S^-)] of [MX] Prop. C.2(b), from per-draw values for independent
    draws of the rest of the training set; Ext <= 1 - f(upper) then holds at 95% confidence.

    \b
    Examples:
      memclaim dp baseline smollm2 --prefix "The access code is" --secret-length 2 --list-size 1 \\
          --max-nodes 64      # a budget: the interval stays certified when the search stops early
    """
    if corpus_samples is not None:
        if model is not None or prefix is not None or L is not None:
            raise DomainError(
                "--corpus-samples replaces MODEL, --prefix and --secret-length",
                hint="give either MODEL with --prefix/--secret-length, or --corpus-samples FILE",
            )
        res = api.dp_corpus_baseline(corpus_samples, list_size=m)
        if as_json:
            click.echo(dumps(res, indent=2))
            return
        _print_rows(
            f"corpus-conditional baseline kappa-bar ([MX] Prop. C.2(b)), {res.n_samples} draws of S^-",
            [
                ("kappa-bar upper (one-sided, 95%)", f"{res.upper:.6g}"),
                (
                    "kappa-bar interval (two-sided, 95%)",
                    f"[{res.lower:.6g}, {res.upper_two_sided:.6g}]",
                ),
                ("per-draw mean [lo, hi]", f"[{res.mean_lo:.6g}, {res.mean_hi:.6g}]"),
                ("per-draw range", f"[{res.sample_min:.6g}, {res.sample_max:.6g}]"),
                ("list size m / bound", f"{res.m} / {res.method}"),
            ]
            + [("assumption", x) for x in res.assumptions],
        )
        return
    if model is None or prefix is None or L is None:
        raise DomainError(
            "MODEL, --prefix and --secret-length are required (or --corpus-samples FILE)",
            hint='e.g. memclaim dp baseline smollm2 --prefix "My PIN is" --secret-length 4 --list-size 1',
        )
    # float32 (the certified interval is about the model's float32 probabilities) on the device asked for
    loaded = api.load_model(
        model, trust_remote_code=trust_remote_code, dtype="float32", **placement_kwargs()
    )
    con = _console(err=True)
    progress = None
    if not as_json and sys.stderr.isatty():
        status = con.status("searching")
        status.start()

        def progress(event):  # noqa: F811 - a closure over the status line (memclaim.progress events)
            if "kappa_lo" in event.extra:
                status.update(
                    f"nodes {event.done}  kappa in [{event.extra['kappa_lo']:.4g}, "
                    f"{event.extra['kappa_hi']:.4g}]"
                )

    try:
        res = api.dp_baseline(
            loaded,
            prefix,
            secret_length=L,
            list_size=m,
            temperature=temperature,
            max_nodes=max_nodes,
            time_limit=time_limit,
            batch_size=batch_size,
            progress=progress,
        )
    finally:
        if progress is not None:
            status.stop()
    if as_json:
        click.echo(dumps(res, indent=2))
        return
    print_baseline(res, tokenizer=getattr(loaded, "tokenizer", None))


def _print_rows(title: str, rows) -> None:
    from rich.table import Table

    t = Table(title=_e(title), title_justify="left")
    t.add_column("quantity")
    t.add_column("value", overflow="fold")
    for name, val in rows:
        t.add_row(_e(name), _e(val))
    _console().print(t)


def print_baseline(res, *, tokenizer=None, console=None) -> None:
    """Rich table for a :class:`memclaim.privacy.baseline.BaselineResult`."""
    from rich.table import Table

    con = console or _console()
    t = Table(
        title=_e(f"certified baseline kappa_pi(m) ([MX] App. F.2), prior = {res.model}"),
        title_justify="left",
    )
    t.add_column("quantity")
    t.add_column("value", overflow="fold")
    log10 = 1.0 / math.log(10.0)
    rows = [
        ("kappa [lo, hi]", f"[{res.kappa_lo:.6g}, {res.kappa_hi:.6g}]"),
        (
            "log10 kappa [lo, hi]",
            f"[{res.log_kappa_lo * log10:.4f}, {res.log_kappa_hi * log10:.4f}]",
        ),
        ("closed (exact top-m)", "yes" if res.closed else f"no ({res.stop_reason})"),
        ("list size m / secret length L", f"{res.m} / {res.secret_length}"),
        ("policy", res.policy),
        ("nodes expanded", str(res.nodes_expanded)),
    ]
    if res.min_entropy_bits is not None:
        lo, hi = res.min_entropy_bits
        rows.append(("min-entropy H_inf (bits) [lo, hi]", f"[{lo:.4f}, {hi:.4f}]"))
    for name, val in rows:
        t.add_row(_e(name), _e(val))
    con.print(t)
    if res.top:
        tt = Table(title="found top continuations", title_justify="left")
        tt.add_column("#")
        tt.add_column("tokens")
        tt.add_column("text")
        tt.add_column("log10 p")
        for i, (toks, lp) in enumerate(res.top, 1):
            text = ""
            if tokenizer is not None and hasattr(tokenizer, "decode"):
                try:
                    text = tokenizer.decode(list(toks))
                except Exception:  # display only; a tokenizer without decode for these ids is fine
                    text = ""
            tt.add_row(str(i), " ".join(map(str, toks)), _e(repr(text)), f"{lp * log10:.4f}")
        con.print(tt)


@command.command(
    "account",
    short_help="epsilon of DP-SGD via dp_accounting (PLD or RDP).",
    default_group="Inputs",
    groups={"accountant": "Procedure", "pld_grid": "Procedure", "copies": "Claim"},
)
@click.option(
    "--noise-multiplier", type=float, required=True, help="DP-SGD: noise multiplier sigma."
)
@click.option("--sampling-rate", type=float, required=True, help="Poisson sampling probability q.")
@click.option("--steps", type=int, required=True, help="DP-SGD: number of steps T.")
@click.option("--delta", type=float, required=True, help="delta at which epsilon is reported.")
@click.option(
    "--accountant",
    type=click.Choice(["pld", "rdp"]),
    default="pld",
    show_default=True,
    help="dp_accounting's privacy-loss-distribution (tight) or Renyi (looser) accountant.",
)
@click.option(
    "--neighbors",
    type=NEIGHBOR_CHOICE,
    default="add-remove",
    show_default=True,
    help="relation the guarantee is for: replace-one or add-remove.",
)
@click.option(
    "--copies",
    type=int,
    default=1,
    show_default=True,
    help="also give the caps for a record planted k times (group curves from the curve).",
)
@click.option(
    "--pld-grid", type=float, default=None, help="the PLD's value discretization [default 1e-4]."
)
@click.option("--json", "as_json", is_flag=True, help="Print epsilon and the caps as JSON.")
def account(
    noise_multiplier, sampling_rate, steps, delta, accountant, neighbors, copies, pld_grid, as_json
):
    """epsilon of DP-SGD (Poisson-subsampled Gaussian) via dp_accounting's PLD or RDP accountant,
    and what the run's trade-off curve (from its privacy-loss distribution) caps: the advantage
    eta(f), the LOO and RO memorization caps, beside the looser (epsilon, delta) route.

    \b
    Example:
      memclaim dp account --noise-multiplier 1.1 --sampling-rate 0.01 --steps 3000 --delta 1e-5
    """
    acc = api.dp_account(
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        delta=delta,
        accountant=accountant,
        neighbors=neighbors,
        copies=copies,
        pld_grid=pld_grid,
    )
    if as_json:
        click.echo(dumps(acc.to_dict(), indent=2))
        return
    res, caps = acc.accounting, acc.caps
    click.echo(
        f"epsilon = {res.epsilon:.6g} at delta = {res.delta:g} [{neighbors}, {accountant.upper()} accountant; "
        f"sigma = {res.noise_multiplier:g}, q = {res.sampling_rate:g}, steps = {res.steps}]"
    )
    route = caps["epsilon_delta_route"]
    click.echo(
        f"advantage eta from the trade-off curve = {caps['eta']:.6g} [{caps['neighbors']}] (exact value within "
        f"[{caps['eta_optimistic']:.6g}, {caps['eta']:.6g}]); via (epsilon, delta): "
        f"{route['eta']:.6g} (looser, x{caps['eta_ratio_route_over_curve']:.3g})"
    )
    for row in caps["caps"]:
        k = row["copies"]
        cap = ", ".join(
            f"|mem_{fn}| <= {_fmt(row[fn])}"
            + (
                f" (exact within [{_fmt(row[fn + '_optimistic'])}, {_fmt(row[fn])}])"
                if row.get(fn + "_optimistic") is not None
                else ""
            )
            for fn in ("LOO", "RO")
        )
        click.echo(f"  {k} cop{'y' if k == 1 else 'ies'}: {cap}  (from the curve)")
    click.echo(f"  curve: {caps['source']}")
