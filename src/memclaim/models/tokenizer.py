"""The tokenizer of a model folder: a fast HF tokenizer with the one encoding memclaim uses (no
special tokens, with character offsets), chat templates rendered in transformers' sandbox.

Split out of :mod:`memclaim.models.loader` (issue 26), which re-exports these names.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError, ModelLoadError


class HFTokenizer:
    """A fast HF tokenizer with the one encoding memclaim uses: no special tokens, with offsets."""

    def __init__(self, tok):
        if not getattr(tok, "is_fast", False):
            raise ModelLoadError(
                f"tokenizer {type(tok).__name__} is not a fast tokenizer (no offsets)",
                hint="save the model with a tokenizer.json (fast tokenizer)",
            )
        self.tok = tok

    def encode_with_offsets(self, text: str):
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def pre_token_starts(self, text: str) -> list[int] | None:
        """The characters of ``text`` where the tokenizer's pre-tokenizer starts a piece (no token
        crosses one), or None where it cannot say: no pre-tokenizer, or a normalizer (which may
        move characters before the pre-tokenizer sees them)."""
        backend = getattr(self.tok, "backend_tokenizer", None)
        if backend is None or backend.normalizer is not None or backend.pre_tokenizer is None:
            return None
        return [s for _, (s, _) in backend.pre_tokenizer.pre_tokenize_str(text)]

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids) -> str:
        return self.tok.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def convert_ids_to_tokens(self, ids):
        return self.tok.convert_ids_to_tokens(list(ids))

    def token_id(self, token: str) -> int | None:
        tid = self.tok.convert_tokens_to_ids(token)
        unk = self.tok.unk_token_id
        if tid is None or (tid == unk and token != self.tok.unk_token):
            return None
        return int(tid)

    def auto_prefix_ids(self) -> list[int]:
        """The ids the tokenizer itself puts before a text (e.g. Gemma's <bos>)."""
        probe = "memclaim probe"
        with_special = list(self.tok(probe, add_special_tokens=True)["input_ids"])
        plain = list(self.tok(probe, add_special_tokens=False)["input_ids"])
        for i in range(len(with_special)):
            if with_special[i : i + len(plain)] == plain:
                return with_special[:i]
        return []

    def render_chat(self, user_text: str) -> str:
        """The chat template rendered as text: ``user_text`` as the one user turn, then the
        assistant's turn opened (``add_generation_prompt=True``), so that text appended to it is
        the start of the assistant's reply. Tokenize it with :meth:`encode_with_offsets` (special
        tokens written in the template are recognized), as transformers' own
        ``apply_chat_template(tokenize=True)`` does (``add_special_tokens=False``)."""
        if not getattr(self.tok, "chat_template", None):
            raise InputError(
                "this model's tokenizer has no chat template",
                hint="use --prompt-template instead of --chat-template",
            )
        import jinja2

        try:
            text = self.tok.apply_chat_template(
                [{"role": "user", "content": user_text}], add_generation_prompt=True, tokenize=False
            )
        except (
            jinja2.TemplateError
        ) as exc:  # SecurityError (the sandbox refused), raise_exception, syntax
            what = (
                "the sandbox refused it"
                if isinstance(exc, jinja2.exceptions.SecurityError)
                else "it failed"
            )
            raise ModelLoadError(
                f"this model's chat template cannot be rendered: {what}: {type(exc).__name__}: "
                f"{str(exc)[:200]}",
                hint="use --prompt-template instead of --chat-template, or fix the chat_template of "
                "the model's tokenizer_config.json (chat_template.jinja)",
            ) from None
        if not isinstance(text, str):
            raise ModelLoadError(
                f"the chat template rendered {type(text).__name__}, not text",
                hint="use a tokenizer whose chat template renders one conversation to a string",
            )
        return text

    def apply_chat_template(self, user_text: str) -> list[int]:
        """The ids of :meth:`render_chat` (what generate() is given for a chat prompt)."""
        return self.encode(self.render_chat(user_text))


def _load_tokenizer(path: Path, *, trust_remote_code: bool = False) -> HFTokenizer:
    from transformers import AutoTokenizer

    # a folder's own code (only run when trusted) may raise anything
    errors = Exception if trust_remote_code else (OSError, ValueError, KeyError, TypeError)
    try:
        tok = AutoTokenizer.from_pretrained(
            str(path), local_files_only=True, trust_remote_code=trust_remote_code
        )
    except errors as exc:
        raise ModelLoadError(
            f"cannot load the tokenizer in {str(path)!r}: {exc}",
            hint="check tokenizer.json and tokenizer_config.json (save them with "
            "tokenizer.save_pretrained)",
        ) from None
    return HFTokenizer(tok)
