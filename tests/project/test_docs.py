"""The documentation (issue 15 item 8): the mkdocs site builds with ``--strict``; its CLI and API
references are generated from ``--help`` and the docstrings (never files in docs/); every command
of the getting-started tutorial runs as written on tests/data and gives the numbers the page
quotes; CITATION.cff is valid Citation File Format 1.2.0 and names the software and both papers;
CHANGELOG.md keeps the marked section for the renamed options.

Code blocks of a page run unless the line before the block is ``<!-- not run: REASON -->``:
``bash`` blocks through bash (``memclaim`` and ``python`` are this interpreter's, the checkout's
code first on the path), ``python`` blocks through this interpreter, in order, in one fresh folder
per page where ``tests/data`` is this checkout's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import ROOT

DOCS = ROOT / "docs"


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _require(module: str):
    """The module, or a skip naming the extra; in CI (CI set) a missing docs extra is a failure."""
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed in CI: .ci/run must install the docs extra")
        pytest.skip(f"{module} is not installed (pip install -e '.[docs]')")


# ------------------------------------------------------------------------------ code blocks
FENCE = re.compile(
    r"^(?P<skip><!-- not run: (?P<why>[^>]*?) -->\n)?```(?P<lang>bash|python)\n(?P<code>.*?)^```",
    flags=re.M | re.S,
)


def code_blocks(page: str) -> list[tuple[str, str, str | None]]:
    """[(language, code, reason not run or None)] of the bash/python blocks of docs/PAGE, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(m["lang"], m["code"], m["why"]) for m in FENCE.finditer(text)]


def run_page(page: str, cwd: Path, *, timeout: int = 1200) -> list[str]:
    """Run every block of docs/PAGE that is not marked not-run, in order, in ``cwd``; their outputs."""
    (cwd / "tests").mkdir(parents=True)
    (cwd / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    outs = []
    for lang, code, why in code_blocks(page):
        if why is not None:
            continue
        argv = (
            ["bash", "-euo", "pipefail", "-c", code]
            if lang == "bash"
            else [sys.executable, "-c", code]
        )
        r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, (
            f"{page}: this {lang} block failed (exit {r.returncode}):\n{code}\n"
            f"--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}"
        )
        outs.append(r.stdout)
    return outs


def test_every_block_that_is_not_run_says_why_and_the_tutorial_runs_all_of_its_commands():
    for page in ("getting-started.md", "inputs.md", "index.md"):
        for _lang, code, why in code_blocks(page):
            assert why is None or why.strip(), (page, code)
    blocks = code_blocks("getting-started.md")
    assert [why for _, _, why in blocks] == [None] * len(blocks)  # the tutorial skips nothing
    commands = " ".join(code for lang, code, _ in blocks if lang == "bash")
    for cmd in (
        "memclaim census",
        "memclaim population",
        "memclaim test",
        "memclaim budget",
        "memclaim dp bounds",
        "memclaim audit",
    ):
        assert cmd in commands, cmd


def _dicts(obj):
    """Every dict inside a JSON value (depth first)."""
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _dicts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _dicts(v)


@pytest.mark.real
def test_the_tutorial_runs_as_written_and_gives_the_numbers_it_quotes(tmp_path):
    """Every block of docs/getting-started.md, in order, on tests/data and SmolLM2 (about 3 minutes
    of CPU on 2 cores); then the numbers its prose quotes, read from the reports."""
    outs = run_page("getting-started.md", tmp_path)
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    t = tmp_path / "tutorial"

    census = json.loads((t / "census" / "report.json").read_text())["results"]["census"][0]
    assert (census["n_windows"], census["n_windows_above"], census["log10_tau"]) == (39, 33, -37)
    assert census["threshold"]["n_control_windows"] == 40
    assert f"{100 * census['coverage']:.1f}%" == "42.2%" and "42.2%" in text

    pop = json.loads((t / "population" / "report.json").read_text())["results"]["population"][
        "full"
    ]
    assert (pop["k"], pop["alpha_n_exact"], pop["n_claimed"], pop["n_candidates"]) == (
        6,
        "6/121",
        19,
        120,
    )
    assert (
        f"{100 * pop['calibrated_rate']['lower']:.2f}%" == "4.85%"
        and pop["calibrated_rate"]["lower"] > 0
    )
    assert f"{pop['threshold_log10_prob']:.2f}" == "-18.77"

    topk = json.loads((t / "population-top-k" / "report.json").read_text())["results"]["population"]
    topk = topk[topk["primary"]]
    assert topk["atom"]["n_at_or_below_atom"] == 118 and "118 of the 120 controls" in text
    assert (
        topk["n_claimed"] == 6
        and topk["calibrated_rate"]["lower"] < 0 < topk["calibrated_rate"]["upper"]
    )
    assert topk["threshold_log10_prob"] in (float("-inf"), "-inf")  # tau = p = 0, the atom
    for quoted in (
        f"{100 * topk['calibrated_rate']['lower']:.1f}%",
        f"{100 * topk['calibrated_rate']['upper']:.2f}%",
    ):
        assert quoted.replace("-", "−") in text, quoted

    budget_out = next(o for o in outs if "independent queries" in o)
    assert "1.764e+19" in budget_out and "1.764e+19" in text
    dp_out = next(o for o in outs if "eta(f)" in o)
    for value in ("0.462117", "0.632121", "0.761594", "8.20732"):
        assert value in dp_out
    sgd = next(
        o for o in outs if "DP-SGD" in o and "eta(f)" in o
    )  # the certified accuracy the page quotes
    assert "[0.240697, 0.240702]" in sgd and "0.240702" in text and "0.240697" in text
    audit = json.loads((t / "audit" / "report.json").read_text())
    loss = [
        d for d in _dicts(audit) if d.get("attack") == "loss" and isinstance(d.get("auc"), dict)
    ]
    assert loss, "the audit report has no loss attack"
    auc = loss[0]["auc"]
    assert auc["low"] > 0.5, auc  # the page: its AUC interval lies above 0.5
    quoted = f"AUC {auc['auc']:.2f} with the interval [{auc['low']:.2f}, {auc['high']:.2f}]"
    assert quoted == "AUC 0.63 with the interval [0.56, 0.70]" and quoted in " ".join(text.split())
    assert (t / "census" / "report.html").is_file() and (t / "population" / "report.html").is_file()
    assert any("At target FPR alpha = 1/20" in o for o in outs)  # the Python block's headline


@pytest.mark.integration
def test_the_inputs_page_runs_as_written(tmp_path):
    pytest.importorskip("datasets", reason="the 'datasets' extra is not installed")
    outs = run_page("inputs.md", tmp_path)
    assert (tmp_path / "verses-ds" / "state.json").is_file()
    run = json.loads(next((tmp_path / "runs" / "verses" / "runs").glob("*/run.json")).read_text())
    assert "verses-ds" in json.dumps(run)
    assert outs[-1].strip().startswith("[")  # the Python block prints the two log q


@pytest.mark.integration
def test_the_attacks_page_runs_as_written(tmp_path):
    """docs/attacks.md (issue 26 item 4): its two examples run as written on the tiny GPT, the
    attack it registers is measured like a built-in one, and both print an AUC with its interval."""
    blocks = code_blocks("attacks.md")
    assert [lang for lang, _, why in blocks if why is None] == ["python", "python"]
    # the second block continues the first (one interpreter, as a reader pastes them)
    code = "\n".join(c for _, c, why in blocks if why is None)
    (tmp_path / "tests").mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    worst, top1 = r.stdout.strip().splitlines()
    assert re.fullmatch(
        r"worst-token: AUC [01]\.\d{3} \[\S+, \S+\] on (\d+) members and \1 controls", worst
    ), worst
    assert re.fullmatch(r"top-1 rate: AUC [01]\.\d{3} \[\S+, \S+\]", top1), top1


# ------------------------------------------------------------------------------ the references
def test_no_reference_page_is_a_file_in_docs():
    for page in ("cli.md", "api.md"):
        assert not (DOCS / page).exists(), (
            f"docs/{page} must be generated at build time, not committed"
        )


def test_cli_reference_is_every_commands_help_verbatim():
    from click.testing import CliRunner

    from memclaim.cli.main import SUBCOMMANDS, cli

    ref = _load_tool("mkdocs_reference")
    items = ref.commands()
    names = [n for n, _, _ in items]
    assert {n.split()[1] for n in names[1:]} == set(SUBCOMMANDS)
    assert {"memclaim dp bounds", "memclaim audit run", "memclaim train tiny"} <= set(names)
    page = ref.cli_markdown()
    runner = CliRunner()
    for name in ("memclaim", "memclaim score", "memclaim population", "memclaim dp bounds"):
        r = runner.invoke(
            cli, name.split()[1:] + ["--help"], terminal_width=ref.WIDTH, prog_name="memclaim"
        )
        assert r.exit_code == 0, r.output
        expected = dict((n, h) for n, _, h in items)[name]
        assert r.output.rstrip() == expected.rstrip(), name
        assert (
            f"## {name} {{#{name.replace(' ', '-')}}}\n\n```text\n{expected.rstrip()}\n```" in page
        )


def test_api_reference_documents_every_public_name():
    import memclaim

    ref = _load_tool("mkdocs_reference")
    page = ref.api_markdown()
    for name in memclaim.__all__:
        if name == "__version__":
            continue
        module = dict(ref.api_names())[name]
        assert f"\n::: {module}.{name}\n" in page, name
        assert f"[`mc.{name}`](#memclaim.{name})" in page, name  # anchored under its public name
        assert f"[](){{#memclaim.{name}}}" in page and f"heading: memclaim.{name}" in page, name
    assert "::: memclaim.errors" in page and "::: memclaim.progress" in page


def test_docstrings_become_markdown():
    pytest.importorskip("griffe", reason="the docs extra is not installed")
    tool = _load_tool("griffe_docstrings")
    doc = (
        "Read it with :func:`memclaim.text.io.read_passages` (a :class:`~memclaim.text.io.Record` each)::\n\n"
        "    code\n\n>>> f(1)\n[(0, 3, False)]\n>>> g(\n...     2)\n'x'\n\nAfter.\n"
    )
    md = tool.markdown_docstring(doc)
    assert (
        "`memclaim.text.io.read_passages`" in md
        and "(a `Record` each):\n" in md
        and ":func:" not in md
    )
    assert "```pycon\n>>> f(1)\n[(0, 3, False)]\n>>> g(\n...     2)\n'x'\n```\n\nAfter." in md
    assert tool.markdown_docstring(md) == md  # a second pass changes nothing


def test_mkdocs_build_strict(tmp_path):
    """The site builds with --strict (any warning fails: a broken link or anchor, a page not in the
    nav, a docstring mkdocstrings cannot render)."""
    _require("mkdocs")
    _require("material")
    _require("mkdocstrings_handlers")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    site = tmp_path / "site"
    for page in (
        "index",
        "getting-started",
        "claims",
        "inputs",
        "store",
        "distributed",
        "prompts",
        "cli",
        "api",
        "changelog",
        "citing",
    ):
        assert (site / f"{page}.html").is_file(), page
    cli = (site / "cli.html").read_text(encoding="utf-8")
    assert "memclaim census" in cli and "--stride" in cli
    api = (site / "api.html").read_text(encoding="utf-8")
    assert (
        'id="memclaim.api._score.score"' in api
        and "Score texts under an extraction procedure" in api
    )
    # issue 28: each name under its public name, its parameters as a table, search from disk
    assert 'id="memclaim.census"' in api and 'href="#memclaim.census"' in api
    census = api.split('id="memclaim.census"', 1)[1][:60000]
    assert "<th>parameter</th>" in census and "<code>stride</code>" in census
    assert (
        site / "search" / "search_index.js"
    ).is_file()  # Material's offline plugin: search on file://
    assert (
        "&gt;&gt;&gt;" in api
        and "<blockquote>" not in api.split('id="memclaim.api._score.score"', 1)[1][:20000]
    )
    changelog = (site / "changelog.html").read_text(encoding="utf-8")
    assert "Renamed options" in changelog


# ------------------------------------------------------------------------------ CITATION.cff, CHANGELOG
def test_citation_cff_is_valid_cff_1_2_0_for_the_software_and_both_papers():
    yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (the test extra)")
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema is not installed (the test extra)"
    )
    from memclaim import __version__

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    schema = json.loads(
        (ROOT / "tests" / "data" / "fixtures" / "cff-1.2.0.schema.json").read_text()
    )
    jsonschema.validate(cff, schema, format_checker=jsonschema.FormatChecker())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert str(cff["version"]) == __version__
    refs = {r["title"]: r for r in cff["references"]}
    em = refs["Extractable Memorization From First Principles"]
    mx = refs[
        "Memorization Is Not Extraction: Tight Differential-Privacy Bounds and Audit Blind Spots"
    ]
    assert em["url"].endswith("2607.12649") and mx["url"].endswith("2608.27782")
    assert [a["family-names"] for a in mx["authors"]] == ["Che", "Xu", "Yuan"]
    assert len(em["authors"]) == 9 and em["authors"][0]["family-names"] == "Cooper"
    citing = (DOCS / "citing.md").read_text(encoding="utf-8")
    for title, r in refs.items():  # the BibTeX on the site says the same
        assert title in citing and r["url"] in citing


def test_citation_schema_check_rejects_what_cff_forbids():
    """The schema check can fail: a missing title, an unknown key and a bad cff-version are refused."""
    yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (the test extra)")
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema is not installed (the test extra)"
    )
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    schema = json.loads(
        (ROOT / "tests" / "data" / "fixtures" / "cff-1.2.0.schema.json").read_text()
    )
    for broken in (
        {k: v for k, v in cff.items() if k != "title"},
        {**cff, "doi_of_the_tool": "x"},
        {**cff, "cff-version": "1.2"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


def test_changelog_keeps_the_marked_section_for_renamed_options():
    """The renames are released as the version memclaim says it is (and the docs name: 0.2)."""
    from memclaim import __version__

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M), (
        __version__
    )
    released = text.split(f"## [{__version__}]", 1)[1].split("\n## [", 1)[0]
    section = released.split("### Renamed options", 1)[1].split("\n### ", 1)[0]
    assert "RENAMES-PLACEHOLDER" in section or re.search(r"`--[a-z-]+`.*->|→", section), (
        "the renamed-options section lost both its placeholder and its renames"
    )
    assert "## [0.1.0]" in text
