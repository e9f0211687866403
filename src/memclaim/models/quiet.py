"""The libraries' own progress bars and warnings, turned into memclaim's progress events or off.

transformers draws tqdm bars on stderr while it loads weights ("Loading weights") and while it
de-quantizes a GGUF file, and logs warnings (generation flags, tokenizer notes) that say nothing
about memclaim's numbers. None of it belongs in memclaim's output, on the command line or in a
notebook:

* :func:`library_bars` sends those bars to a :class:`memclaim.progress.Reporter` instead (so a
  slow load or conversion shows memclaim's own progress, with a count and an estimate), through
  transformers' public ``set_tqdm_hook`` for the loading bars and, for the GGUF de-quantization
  bar (created by ``tqdm.auto`` directly, which that hook does not see), by replacing the name
  ``tqdm`` in ``transformers.modeling_gguf_pytorch_utils`` for the duration of the block;
* :func:`quiet_libraries` turns the rest off for the duration of a public call: transformers'
  and huggingface_hub's bars and logging below errors, and the warnings those libraries raise.

No library has a switch for "report your bars to my callback" (tqdm's own ``tqdm_class``
arguments are not passed down by from_pretrained), hence the small tqdm-shaped adapter here.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from ..progress import ProgressCallback, Reporter

__all__ = ["ReporterBar", "library_bars", "quiet_libraries", "quiet_library_bars"]

# libraries whose warnings are theirs to give, not memclaim's output (tqdm: 'IProgress not found' in a
# notebook without ipywidgets, where memclaim's bar falls back to text on its own)
_QUIET_MODULES = r"(transformers|huggingface_hub|tokenizers|accelerate|safetensors|gguf|tqdm)(\.|$)"


class ReporterBar:
    """A tqdm-shaped object that reports to a :class:`~memclaim.progress.Reporter`: iterating it
    (or calling :meth:`update`) advances the count; :meth:`close` (or the end of iteration) ends
    the operation. Only what transformers calls on its bars is implemented.

    >>> seen = []
    >>> bar = ReporterBar(seen.append, [10, 20, 30], stage="load", label="loading weights", unit="tensors")
    >>> [x for x in bar], [(e.done, e.total, e.finished) for e in seen][-2:]
    ([10, 20, 30], [(3, 3, False), (3, 3, True)])
    """

    def __init__(
        self,
        progress: ProgressCallback | None,
        iterable=None,
        *,
        stage: str,
        label: str,
        unit: str = "tensors",
        total: int | None = None,
        **_ignored: Any,
    ):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total = total
        self.reporter = Reporter(progress, stage=stage, label=label, total=total, unit=unit)
        self.n = 0

    def __iter__(self):
        try:
            for x in self.iterable:
                yield x
                self.update(1)
        finally:
            self.close()

    def __len__(self) -> int:
        return int(self.total or 0)

    def update(self, n: int = 1) -> None:
        self.n += int(n)
        self.reporter.advance(int(n))

    def close(self) -> None:
        self.reporter.close()

    def set_description(self, *a, **k) -> None:  # noqa: D102 - tqdm's interface, nothing to show
        return None

    set_postfix = set_description_str = set_postfix_str = refresh = clear = set_description

    def __enter__(self) -> ReporterBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def library_bars(
    progress: ProgressCallback | None, *, stage: str, label: str, unit: str = "tensors"
) -> Iterator[None]:
    """Inside the block, transformers' loading and GGUF bars report to ``progress`` as operation
    ``stage``/``label`` (None: they are silent). transformers is imported here (the caller is
    about to use it anyway).

    >>> with library_bars(None, stage="load", label="loading weights"):
    ...     pass
    """
    from transformers.utils import logging as hf_logging

    def hook(factory, args, kwargs):
        iterable = args[0] if args else kwargs.get("iterable")
        return ReporterBar(
            progress, iterable, stage=stage, label=label, unit=unit, total=kwargs.get("total")
        )

    def gguf_bar(iterable=None, *args, **kwargs):
        return ReporterBar(
            progress, iterable, stage=stage, label=label, unit=unit, total=kwargs.get("total")
        )

    set_hook = getattr(hf_logging, "set_tqdm_hook", None)
    previous = set_hook(hook) if set_hook is not None else None
    gguf_mod = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    if gguf_mod is None:
        try:
            import transformers.modeling_gguf_pytorch_utils as gguf_mod  # noqa: F811 - needs the gguf package
        except ImportError:
            gguf_mod = None
    old_tqdm = getattr(gguf_mod, "tqdm", None) if gguf_mod is not None else None
    if old_tqdm is not None:
        gguf_mod.tqdm = gguf_bar
    # the whole block is the operation (from_pretrained spends seconds before its loop: reading the
    # config and a GGUF file's metadata, building the model); transformers' bar, under the same
    # stage and label, gives it a count and closes it
    whole = Reporter(progress, stage=stage, label=label, total=None, unit=unit)
    try:
        yield
    finally:
        whole.close()
        if set_hook is not None:
            set_hook(previous)
        if old_tqdm is not None:
            gguf_mod.tqdm = old_tqdm


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Inside the block: transformers' and huggingface_hub's own progress bars off, their logging
    below errors silent, and the warnings of transformers, huggingface_hub, tokenizers,
    accelerate, safetensors and gguf ignored; the previous settings come back afterwards. Nothing
    is imported for it: a library imported inside the block reads the environment settings, and
    its progress bars then stay off in this process (huggingface_hub reads that setting once).

    >>> with quiet_libraries():
    ...     os.environ["HF_HUB_DISABLE_PROGRESS_BARS"]
    '1'
    """
    env = {
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    }
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    undo = []
    loaded_before = {m for m in ("transformers", "huggingface_hub") if m in sys.modules}
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        undo.append(
            lambda: (hf_logging.set_verbosity(level), bars and hf_logging.enable_progress_bar())
        )
    if "huggingface_hub" in sys.modules:
        from huggingface_hub import utils as hub_utils

        was_off = hub_utils.are_progress_bars_disabled()
        hub_utils.disable_progress_bars()
        undo.append(lambda: None if was_off else hub_utils.enable_progress_bars())
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=_QUIET_MODULES)
            yield
    finally:
        for (
            k,
            v,
        ) in (
            saved_env.items()
        ):  # first: huggingface_hub refuses to enable bars while its variable is set
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        with (
            warnings.catch_warnings()
        ):  # "cannot enable progress bars" when the environment keeps them off
            warnings.filterwarnings("ignore", module=_QUIET_MODULES)
            for u in reversed(undo):
                u()
        # transformers first imported inside the block read its verbosity there: give it its default
        # back (its bars stay off: huggingface_hub reads that setting once, at import, and refuses
        # to turn them on again while it holds)
        if "transformers" in sys.modules and "transformers" not in loaded_before:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_warning()


def quiet_library_bars() -> None:
    """Turn off transformers' and huggingface_hub's own progress bars for the rest of the process
    (what the command line does before a command whose output is its summary; inside a call of
    the API :func:`quiet_libraries` does it, and undoes it). Their APIs: the
    HF_HUB_DISABLE_PROGRESS_BARS setting read when they are imported, and
    ``transformers.utils.logging.disable_progress_bar`` / ``huggingface_hub.utils
    .disable_progress_bars`` when they already are. Nothing is imported for it.

    >>> from memclaim.models.quiet import quiet_library_bars
    >>> quiet_library_bars()  # doctest: +SKIP  (changes this process's environment)
    >>> os.environ["HF_HUB_DISABLE_PROGRESS_BARS"]  # doctest: +SKIP
    '1'
    """
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
