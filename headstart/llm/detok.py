"""Incremental detokenization: token ids in, printable text deltas out, with stop strings.

The algorithm is the prefix-offset / read-offset one of text-generation-inference and vLLM: each new
token is decoded together with a few tokens before it (from `prefix_offset`), and only the text past
what those earlier tokens decode to (up to `read_offset`) is new. Decoding with context keeps the
spaces that SentencePiece-style decoders strip from the start of a sequence; holding the text while
it ends in U+FFFD keeps a character whose UTF-8 bytes span several tokens until it is complete.

Stop strings: text that could be the start of a stop string is held back until it either completes
the stop string (then the reply ends just before it) or stops matching (then it is released).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["IncrementalDetokenizer"]

_REPLACEMENT_CHAR = "\ufffd"


class IncrementalDetokenizer:
    """Turns a stream of token ids into text deltas.

    Without stop strings, the deltas of `push` and `flush` joined equal
    `tokenizer.decode(all_ids, skip_special_tokens=skip_special_tokens)`. With them, they equal that
    text cut just before the earliest stop string, which is never emitted, nor is anything after it.
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str] = (), skip_special_tokens: bool = True) -> None:
        """`stop`: stop strings (ValueError for an empty one or a non-string)."""
        if isinstance(stop, str):
            stop = (stop,)
        for s in stop:
            if not isinstance(s, str) or not s:
                raise ValueError(f"stop strings must be non-empty str, got {s!r}")
        self.tokenizer = tokenizer
        self.stop = tuple(stop)
        self.skip_special_tokens = skip_special_tokens
        self.token_ids: list[int] = []
        self.text = ""  # everything emitted so far
        self.stopped = False
        self.stop_string: str | None = None  # the stop string that ended the text
        self._prefix_offset = 0
        self._read_offset = 0
        self._held = ""  # decoded text not emitted yet: it may begin a stop string

    def push(self, token_id: int) -> str:
        """Add one token; returns the newly printable text (often "" while a character or a possible
        stop string is incomplete). RuntimeError after a stop string ended the text."""
        if self.stopped:
            raise RuntimeError(f"the text already ended at the stop string {self.stop_string!r}")
        self.token_ids.append(int(token_id))
        return self._emit(self._decode_new(final=False), final=False)

    def flush(self) -> str:
        """End of the token stream: returns whatever was still held back (an incomplete character is
        then emitted as the tokenizer decodes it, a partial stop string as plain text)."""
        if self.stopped:
            return ""
        return self._emit(self._decode_new(final=True), final=True)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=self.skip_special_tokens, clean_up_tokenization_spaces=False
        )

    def _decode_new(self, final: bool) -> str:
        ids = self.token_ids
        if self._read_offset == len(ids):
            return ""
        prefix_text = self._decode(ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(ids[self._prefix_offset :])
        if len(new_text) > len(prefix_text) and (final or not new_text.endswith(_REPLACEMENT_CHAR)):
            self._prefix_offset = self._read_offset
            self._read_offset = len(ids)
            return new_text[len(prefix_text) :]
        return ""

    def _emit(self, new_text: str, final: bool) -> str:
        buf = self._held + new_text
        self._held = ""
        if self.stop:
            hit = self._find_stop(buf)
            if hit is not None:
                position, stop_string = hit
                self.stopped = True
                self.stop_string = stop_string
                buf = buf[:position]
            elif not final:
                keep = self._partial_stop_len(buf)
                if keep:
                    buf, self._held = buf[:-keep], buf[-keep:]
        self.text += buf
        return buf

    def _find_stop(self, text: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for s in self.stop:
            position = text.find(s)
            if position != -1 and (best is None or position < best[0]):
                best = (position, s)
        return best

    def _partial_stop_len(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        longest = min(len(text), max(len(s) for s in self.stop) - 1)
        for k in range(longest, 0, -1):
            suffix = text[-k:]
            if any(s.startswith(suffix) for s in self.stop):
                return k
        return 0
