"""Issue 15 items 5, 6 and 8 (schema): what every kind of report folder holds and how it reads.

- report.json validates against the published, versioned JSON Schema (jsonschema);
- every figure is a file beside the report: NAME.png at 200 dpi and NAME.pdf, both referenced
  by report.md and report.html;
- no Python repr (None, True/False, [...], {...}) in report.md or report.html;
- a null result is never drawn in the success style;
- report.html loads in headless Chromium without a console message and shows its headline.

The unit tier covers the kinds that need no model; the integration tier adds those written after
scoring (population, census, audit, the audit table) on the tiny committed model.
"""

from __future__ import annotations

import html as _html
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import report_kinds

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.fixture(scope="module")
def unit_reports(tmp_path_factory):
    return report_kinds.build_unit(tmp_path_factory.mktemp("unit-reports"))


@pytest.fixture(scope="module")
def all_reports(tmp_path_factory):
    return report_kinds.build_all(tmp_path_factory.mktemp("all-reports"))


# --------------------------------------------------------------------------- checks
def check_schema(folder: Path):
    from memclaim.report.schema import validate_report

    validate_report(json.loads((folder / "report.json").read_text(encoding="utf-8")))


def check_figure_files(folder: Path):
    from PIL import Image

    md = (folder / "report.md").read_text(encoding="utf-8")
    page = (folder / "report.html").read_text(encoding="utf-8")
    stems = re.findall(r'<figure id="([^"]+)">', page)
    for stem in stems:
        png, pdf = folder / f"{stem}.png", folder / f"{stem}.pdf"
        assert png.is_file() and pdf.is_file(), stem
        img = Image.open(io.BytesIO(png.read_bytes()))
        assert abs(img.info["dpi"][0] - 200) < 1, (stem, img.info.get("dpi"))
        assert pdf.read_bytes().startswith(b"%PDF")
        assert f"({stem}.png)" in md and f"({stem}.pdf)" in md and f'href="{stem}.pdf"' in page
    return stems


REPR = re.compile(r"(?<![\w-])(None|True|False)(?![\w-])|\['|'\]|\{'|': ")


def check_no_repr(folder: Path):
    for name in ("report.md", "report.html"):
        text = (folder / name).read_text(encoding="utf-8")
        if name == "report.html":
            text = re.sub(r"<style>.*?</style>|<[^>]+>", " ", text, flags=re.S)
            text = _html.unescape(text)
        hits = [m.group() for m in REPR.finditer(text)]
        assert not hits, (folder.name, name, hits[:5])


def check_null_style(folder: Path):
    """The headline's style matches the result: a claim only where something was claimed."""
    d = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    page = (folder / "report.html").read_text(encoding="utf-8")
    m = re.search(r'<div class="callout (\w+)"', page)
    first = m.group(1) if m else None  # the audit table's page opens with its table, no headline
    r = d["results"]
    if d["command"] in ("test", "population"):
        t = r["population"][r["population"]["primary"]]
        want = ("claim" if t["n_claimed"] else "null") if t["claim_possible"] else "warn"
        assert first == want, (folder, first, want)
    elif d["command"] == "census":
        want = "claim" if r["census"][0]["coverage"] > 0 else "null"
        assert first == want
    else:  # budgets, DP bounds and audits compute quantities; they claim nothing
        assert first != "claim", (d["command"], first)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def check_in_chromium(folder: Path, tmp: Path, *, screenshot: Path | None = None) -> str:
    """Load report.html in headless Chromium: no console message (the pages run no script, so any
    message is an error: a broken image, bad markup reported by the engine); the DOM holds the
    headline. Returns the rendered DOM."""
    exe = chromium()
    if exe is None:
        if shutil.which("apt-get") is None:
            pytest.skip(
                "Chromium is not installed and apt is unavailable here (.ci/run installs Debian's chromium)"
            )
        pytest.fail(
            "Chromium is missing: install it with `apt-get install -y chromium` (.ci/run does)"
        )
    url = (folder / "report.html").resolve().as_uri()
    prof = tmp / f"profile-{folder.name}"
    args = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={prof}"]
    r = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert not console, console[:5]
    if screenshot is not None:
        s = subprocess.run(
            args
            + ["--window-size=1280,1600", "--hide-scrollbars", f"--screenshot={screenshot}", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert s.returncode == 0 and screenshot.stat().st_size > 10_000, s.stderr[-2000:]
    dom = r.stdout
    d = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert "<h1>" in dom
    head = re.search(r'<div class="callout[^"]*"[^>]*>(.*?)</div>', dom, re.S)
    text = _html.unescape(re.sub(r"<[^>]+>", "", head.group(1))) if head else ""
    headline = (
        d["results"].get("headline")
        or (d["results"].get("headlines") or [None])[0]
        or d["results"].get("statement")
    )
    title = re.search(r"<h1>(.*?)</h1>", dom, re.S).group(1).strip()
    assert title and title == re.search(r"<title>(.*?)</title>", dom, re.S).group(1).strip()
    if headline:  # the headline recorded in report.json is the one the page shows first
        from memclaim.report.core import visible

        assert " ".join(visible(headline).split()) in " ".join(text.split()), (
            text[:200],
            headline[:200],
        )
    want = HEADLINE_SHOWS[d["command"]]
    assert want in text, (d["command"], text[:200])
    return dom


# what the first callout of each kind's page says (where report.json records no headline string)
HEADLINE_SHOWS = {
    "test": "At target FPR",
    "population": "At target FPR",
    "census": "characters are covered",
    "budget": "A sequence with per-query probability",
    "dp bounds": "Guarantee:",
    "audit": "membership attacks on",
    "audit table": "",
    "acr": "are extracted (ACR > 1)",
}


# --------------------------------------------------------------------------- unit tier
KINDS_UNIT = ["test", "test-null", "budget", "dp bounds", "acr"]


@pytest.mark.parametrize("kind", KINDS_UNIT)
def test_unit_reports(unit_reports, kind):
    folder = unit_reports[kind]
    check_schema(folder)
    stems = check_figure_files(folder)
    if kind == "test":
        assert set(stems) == {"alpha-sweep", "budget", "scores"}
    check_no_repr(folder)
    check_null_style(folder)


def test_null_result_is_not_in_the_success_style(unit_reports):
    page = (unit_reports["test-null"] / "report.html").read_text(encoding="utf-8")
    assert '<div class="callout null"' in page and '<div class="callout claim"' not in page
    assert "**No claim:**" in (unit_reports["test-null"] / "report.md").read_text(encoding="utf-8")


def test_schema_rejects_a_broken_report(unit_reports):
    from memclaim.errors import InputError
    from memclaim.report.schema import validate_report

    d = json.loads((unit_reports["test"] / "report.json").read_text(encoding="utf-8"))
    validate_report(d)
    bad = json.loads(json.dumps(d))
    bad["results"]["population"]["full"]["alpha_n"] = 1.5
    del bad["statements"]
    with pytest.raises(InputError, match="alpha_n.*|statements"):
        validate_report(bad)
    bad = dict(d, schema_version="9.9")
    with pytest.raises(InputError, match="9.9"):
        validate_report(bad)


def test_schema_is_published_and_versioned():
    from memclaim.report import core
    from memclaim.report.schema import load_schema, schema_name

    s = load_schema()
    assert schema_name() == f"report-{core.SCHEMA_VERSION}.schema.json"
    assert s["properties"]["schema_version"] == {"const": core.SCHEMA_VERSION}
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(s)


@pytest.mark.parametrize("kind", ["test", "test-null", "dp bounds", "acr"])
def test_html_in_chromium_unit(unit_reports, kind, tmp_path):
    check_in_chromium(unit_reports[kind], tmp_path)


# --------------------------------------------------------------------------- integration tier
KINDS_ALL = ["population", "census", "audit", "audit table"]


@pytest.mark.integration
@pytest.mark.parametrize("kind", KINDS_ALL)
def test_scored_reports(all_reports, kind, tmp_path):
    folder = all_reports[kind]
    check_schema(folder)
    stems = check_figure_files(folder)
    assert stems, kind  # every scored report has at least one figure
    check_no_repr(folder)
    check_null_style(folder)
    shots = os.environ.get("MEMCLAIM_SCREENSHOTS")  # a folder: keep a screenshot of each page there
    shot = Path(shots) / f"{kind.replace(' ', '-')}.png" if shots else None
    check_in_chromium(folder, tmp_path, screenshot=shot)
