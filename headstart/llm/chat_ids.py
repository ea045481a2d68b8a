"""Token ids of a chat in which every message's text is encoded as text.

A tokenizer matches its added tokens (`<|im_start|>`, `<|im_end|>`, `<tool_call>` ...) anywhere in the
string it is given, so a chat template rendered to text and tokenized in one go turns a message that
*contains* "<|im_end|>\\n<|im_start|>assistant" into real turn boundaries: a user (or a transcript, or a
tool result) could forge turns. Here only the template's own added tokens become control ids; the
same strings inside a message are encoded as the tokenizer encodes ordinary text.

A chat whose messages hold no added-token string renders exactly as `apply_chat_template(tokenize=True)`
does, so the token ids (and every KV cache computed from them) are unchanged for ordinary text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["encode_as_text", "render_chat_ids"]

# Private-use code points: a chat template or a message almost never holds one; a free one marks the
# added-token strings of the messages while the template renders.
_MARK_FIRST, _MARK_LAST = 0xE000, 0xF8FF


def render_chat_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool) -> list[int]:
    """Token ids of `messages` ([{"role": str, "content": str}, ...], checked by the caller) in
    `tokenizer`'s chat template, with message text always encoded as text (see the module docstring).
    ValueError when every private-use code point already appears in the messages or the template."""
    added = _added_vocab(tokenizer)
    if not any(token in message["content"] for message in messages for token in added):
        return _template_ids(tokenizer, messages, add_generation_prompt)
    mark = _free_mark(tokenizer, messages)
    by_length = sorted(added, key=len, reverse=True)
    token_index = {token: i for i, token in enumerate(by_length)}
    escape = re.compile("|".join(re.escape(token) for token in by_length))
    escaped = [{"role": m["role"], "content": escape.sub(lambda x: f"{mark}{token_index[x.group()]}{mark}", m["content"])}
               for m in messages]
    rendered = tokenizer.apply_chat_template(escaped, add_generation_prompt=add_generation_prompt, tokenize=False)
    unescape = re.compile(f"{mark}(\\d+){mark}")
    ids: list[int] = []
    # what remains of the added tokens after escaping is the template's own: split at them, as the tokenizer does
    for piece in re.split(f"({escape.pattern})", rendered):
        if piece in added:
            ids.append(added[piece])
        elif mark in piece:
            ids += encode_as_text(tokenizer, unescape.sub(lambda x: by_length[int(x.group(1))], piece))
        elif piece:
            ids += tokenizer(piece, add_special_tokens=False)["input_ids"]
    return [int(t) for t in ids]


def encode_as_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` with no added token matched: the tokenizer's normaliser, pre-tokenizer and
    model only, so "<|im_end|>" becomes the pieces of its characters. For text without added-token
    strings these are the ids `tokenizer(text, add_special_tokens=False)` gives."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a tokenizer without the Rust pipeline: its own switch (special tokens only)
        return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])
    normalized = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
    pieces = backend.pre_tokenizer.pre_tokenize_str(normalized) if backend.pre_tokenizer is not None \
        else [(normalized, (0, len(normalized)))]
    return [token.id for piece, _ in pieces for token in backend.model.tokenize(piece)]


def _template_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool) -> list[int]:
    rendered = tokenizer.apply_chat_template(list(messages), add_generation_prompt=add_generation_prompt, tokenize=True)
    if isinstance(rendered, Mapping) or hasattr(rendered, "input_ids"):
        rendered = rendered["input_ids"]
    return [int(t) for t in rendered]


def _added_vocab(tokenizer: Any) -> dict[str, int]:
    """Added-token string -> id (special or not: the tokenizer matches both inside text)."""
    return {token: int(i) for token, i in tokenizer.get_added_vocab().items() if token}


def _free_mark(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    taken = set(getattr(tokenizer, "chat_template", None) or "")
    for message in messages:
        taken.update(message["content"])
    for code in range(_MARK_FIRST, _MARK_LAST + 1):
        if chr(code) not in taken:
            return chr(code)
    raise ValueError("the messages use every private-use character; no mark is free to protect their text")
