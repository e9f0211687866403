"""`memclaim dp` (bounds, plot, baseline, account), the summary rows and the demo section."""

from __future__ import annotations

import io
import json
import math
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from memclaim.cli.main import cli, main
from memclaim.cli.privacy_demo import privacy_section
from memclaim.errors import DomainError
from memclaim.models.base import SyntheticLM
from memclaim.privacy import tradeoff as T
from memclaim.privacy.baseline import certify_baseline
from memclaim.privacy.demo import run_demo_section
from memclaim.privacy.summary import bounds_summary


def _invoke(args):
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return res


def _rows(out: dict) -> dict:
    return {r["name"]: r for r in out["rows"]}


# --------------------------------------------------------------------------- bounds
def test_bounds_json_pure_add_remove():
    res = _invoke(
        [
            "dp",
            "bounds",
            "--epsilon",
            "1",
            "--list-size",
            "4",
            "--risk",
            "0.1",
            "--baseline",
            "0.355",
            "--neighbors",
            "add-remove",
            "--json",
        ]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rows = _rows(out)
    assert out["neighbors"] == "add-remove"
    assert rows["H* (bits), m = 4"]["value"] == pytest.approx(6.764623, abs=1e-6)
    assert rows["|mem_LOO| cap"]["value"] == pytest.approx(math.tanh(0.5))
    assert rows["|mem_RO| cap"]["value"] == pytest.approx(1 - math.exp(-1))  # via f^(2)
    assert rows["Ext bound 1 - f(kappa), kappa = 0.355"]["value"] == pytest.approx(0.7627, abs=1e-4)
    assert rows["baseline certified safe (kappa <= alpha*)"]["value"] == "no"
    for r in out["rows"]:  # every number names its relation and functional
        assert r["relation"] in ("add/remove", "replace-one")
        assert r["functional"] in ("RO", "LOO", "COND", "Ext", "-")


def test_bounds_table_names_relation_and_functional():
    res = _invoke(["dp", "bounds", "--epsilon", "1", "--neighbors", "replace-one", "--copies", "2"])
    assert res.exit_code == 0, res.output
    assert "replace-one" in res.output and "RO" in res.output and "not implied" in res.output
    assert "0.632121" in res.output and "0.761594" in res.output  # eta*_2(1) vs tanh(1)
    assert "[pure eps-DP, replace-one]" in res.output  # markup is escaped, not eaten


def test_bounds_gdp_and_audit():
    res = _invoke(
        [
            "dp",
            "bounds",
            "--mu",
            "1",
            "--epsilon",
            "1",
            "--neighbors",
            "add-remove",
            "--list-size",
            "1",
            "--risk",
            "0.1",
            "--baseline",
            "0.001,0.002",
            "--successes",
            "10",
            "--trials",
            "20",
            "--json",
        ]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["baseline_interval"] == [0.001, 0.002]
    assert out["audit"]["kappa_hi"] == 0.002 and out["audit"]["refuted"] is True
    assert _rows(out)["delta(eps) of mu-GDP at eps = 1"]["value"] == pytest.approx(
        T.gdp_delta(mu=1, epsilon=1)
    )


@pytest.mark.parametrize(
    "args,match",
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "1", "--delta", "1.0"], "delta"),
        (["--epsilon", "1", "--delta", "0.2", "--risk", "0.1"], "no entropy condition helps"),
        (["--epsilon", "1", "--baseline", "1.5"], "kappa"),
        (["--mu", "1", "--delta", "0.1"], "not both"),
        (["--epsilon", "1", "--successes", "3"], "together"),
    ],
)
def test_bounds_bad_input_exits_2_with_the_value(args, match, capsys):
    rc = main(["dp", "bounds", "--neighbors", "replace-one", *args])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and match in err


def test_bounds_requires_the_relation():
    res = CliRunner().invoke(cli, ["dp", "bounds", "--epsilon", "1"])
    assert res.exit_code == 2 and "--neighbors" in res.output


# --------------------------------------------------------------------------- plot
def test_plot_writes_three_figures_as_png_and_pdf(tmp_path):
    res = _invoke(["dp", "plot", "--out", str(tmp_path), "--neighbors", "add-remove"])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "fig2_advantage.pdf",
        "fig2_advantage.png",
        "fig3_staircase.pdf",
        "fig3_staircase.png",
        "fig4_boundary.pdf",
        "fig4_boundary.png",
    ]
    for p in tmp_path.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    for p in tmp_path.glob("*.pdf"):
        assert p.read_bytes().startswith(b"%PDF")


# --------------------------------------------------------------------------- baseline
class _Tok:
    def encode(self, text):
        return [ord(c) % 7 for c in text]

    def decode(self, ids):
        return "".join("abcdefg"[i] for i in ids)


def test_baseline_command_with_a_synthetic_prior(monkeypatch):
    import memclaim.models as models

    lm = SyntheticLM(vocab_size=7, seed=21)
    loaded = SimpleNamespace(lm=lm, tokenizer=_Tok(), sot_ids=[0])
    monkeypatch.setattr(models, "load_model", lambda spec, **kw: loaded)
    res = _invoke(
        [
            "dp",
            "baseline",
            "fake-prior",
            "--prefix",
            "hi",
            "--secret-length",
            "3",
            "--list-size",
            "4",
            "--temperature",
            "0.8",
            "--json",
        ]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    direct = certify_baseline(
        SyntheticLM(vocab_size=7, seed=21),
        [0] + _Tok().encode("hi"),
        secret_length=3,
        m=4,
        temperature=0.8,
    )
    assert out["closed"] is True and out["prefix_ids"] == [0] + _Tok().encode("hi")
    assert out["kappa_lo"] == pytest.approx(direct.kappa_lo, rel=1e-15)
    table = _invoke(
        [
            "dp",
            "baseline",
            "fake-prior",
            "--prefix",
            "hi",
            "--secret-length",
            "3",
            "--list-size",
            "4",
        ]
    )
    assert table.exit_code == 0 and "closed (exact top-m)" in table.output and "yes" in table.output


# --------------------------------------------------------------------------- account
def test_account_command():
    res = _invoke(
        [
            "dp",
            "account",
            "--noise-multiplier",
            "2",
            "--sampling-rate",
            "1",
            "--steps",
            "1",
            "--delta",
            "1e-5",
            "--json",
        ]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["neighbors"] == "add-remove" and 0 < out["epsilon"] < 3


# --------------------------------------------------------------------------- summary and demo
def test_summary_rows_carry_meaning():
    s = bounds_summary(
        T.pure(1.0, neighbors="replace"),
        copies=3,
        m=4,
        tau=0.1,
        kappa=0.01,
        truncation=10,
        omega=0.001,
        n=1000,
    )
    assert s.value("eta*_3(eps) staircase") == pytest.approx(1 - 2 * math.exp(-1) / (math.e + 1))
    assert s.value("log-loss truncated at M = 10") == pytest.approx(10 * math.tanh(0.5))
    one = bounds_summary(T.pure(1.0, neighbors="replace"), m=4, tau=0.1, kappa=0.01)
    assert one.value("replace-one converse bracket, upper end") == pytest.approx(
        math.exp(-0.5) * 0.1
    )
    with pytest.raises(KeyError):  # no converse (hence no bracket) is proved for k copies
        s.value("replace-one converse bracket, upper end")
    assert s.value("|mem_LOO| cap") is None
    with pytest.raises(DomainError, match="omega"):
        bounds_summary(T.pure(1.0, neighbors="replace"), omega=0.1)


def test_demo_section_builtin_and_custom():
    buf = io.StringIO()
    out = privacy_section(console=Console(file=buf, width=140))
    assert out["illustrative"] and out["neighbors"] == "add-remove"
    assert [c["epsilon"] for c in out["caps"]] == [0.5, 1.0, 2.0, 4.0]
    by_name = {c["name"]: c for c in out["canaries"]}
    ten = {r["epsilon"]: r for r in by_name["uniform 10-bit canary"]["by_epsilon"]}
    assert ten[1.0]["above_h_star"] and not ten[4.0]["above_h_star"]  # H* = 6.76 vs 11.09 bits
    zipf = {r["epsilon"]: r for r in by_name["Zipf-prior canary ([MX] §8.1)"]["by_epsilon"]}
    assert (
        zipf[1.0]["ext_bound"] == pytest.approx(0.7627, abs=1e-4) and not zipf[1.0]["above_h_star"]
    )
    text = buf.getvalue()
    assert "below H*" in text and "above H*" in text and "add/remove" in text
    json.dumps(out)  # JSON-ready
    assert run_demo_section() == out  # the library computes the same numbers and prints nothing

    mine = privacy_section(
        canaries=[{"name": "c1", "min_entropy_bits": 20.0, "m": 1, "tau": 0.05}],
        console=Console(file=io.StringIO()),
    )
    assert not mine["illustrative"] and all(
        r["above_h_star"] for r in mine["canaries"][0]["by_epsilon"]
    )
    with pytest.raises(DomainError, match="min_entropy_bits"):
        privacy_section(canaries=[{"m": 1, "tau": 0.1}], console=Console(file=io.StringIO()))
