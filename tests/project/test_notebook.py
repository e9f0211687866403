"""The README's Python workflow as a Jupyter notebook (issue 28 item 4), executed by nbclient in a
real kernel: it runs as written, every result shows a short plain-text repr and an HTML view
(the report's claim box and key table), and nothing of transformers' own bars or warnings reaches
the notebook.

Needs nbclient, nbformat and ipykernel (the ``test`` extra); CI installs them (in CI a missing one
fails the test instead of skipping it). The kernel is this interpreter, with this checkout's
``src`` first on its path.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from _paths import ROOT

pytestmark = pytest.mark.integration


def _require(module: str):
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed in CI: the test extra must install it")
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")


def readme_python() -> str:
    """The README's Python block (the workflow of "From Python"), verbatim."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    assert len(blocks) == 1, "the README has one Python workflow"
    return blocks[0]


CHECKS = """
import memclaim as mc
from memclaim.models.loader import LoadedModel
for r in (model, pop, runs[0], mc.test(*runs, alpha="0.1"), mc.budget(p=2.5e-5, n=100_000),
          mc.dp_bounds(epsilon=1.0, neighbors="add-remove", list_size=4, risk=0.1)):
    text = repr(r)
    assert len(text) <= 240 and "\\n" not in text, (type(r).__name__, len(text), text[:300])
    html = r._repr_html_()
    assert "<table>" in html, type(r).__name__
    if not isinstance(r, LoadedModel):
        assert html.startswith('<div class="memclaim-result">') and "callout" in html, type(r).__name__
print("checked")
"""


def test_the_readme_workflow_runs_in_a_notebook(tmp_path):
    nbformat = _require("nbformat")
    nbclient = _require("nbclient")
    _require("ipykernel")
    from nbformat.v4 import new_code_cell, new_notebook

    cells = [
        new_code_cell(f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r})"),
        new_code_cell(readme_python()),
        new_code_cell("pop"),
        new_code_cell("model"),
        new_code_cell("mc.test(*runs, alpha='0.1')"),
        new_code_cell(CHECKS),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    (tmp_path / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    client.execute()
    nbformat.validate(nb)

    def outputs(i, kind):
        return [o for o in nb.cells[i].outputs if o.get("output_type") == kind]

    for i in (2, 3, 4):  # pop, model, a TestResult: a short text and an HTML view each
        shown = outputs(i, "execute_result")
        assert shown, nb.cells[i].source
        data = shown[0]["data"]
        assert "text/html" in data and "<table>" in data["text/html"], nb.cells[i].source
        assert len(data["text/plain"]) <= 240, data["text/plain"]
    assert "claimed" in outputs(2, "execute_result")[0]["data"]["text/html"]
    assert any("checked" in o.get("text", "") for o in outputs(5, "stream"))
    every = "".join(
        o.get("text", "") for c in nb.cells for o in c.outputs if o.get("output_type") == "stream"
    )
    assert "Loading weights" not in every, every[-3000:]
    assert "Warning" not in every, every[-3000:]
    printed = "".join(o.get("text", "") for o in outputs(1, "stream"))
    assert "under decoding policy full" in printed and "log10_q" in printed, printed[-2000:]
    assert (tmp_path / "reports" / "toy" / "report.html").is_file()
    assert sys.executable  # the kernel is this interpreter (nbclient's python3 kernel)
