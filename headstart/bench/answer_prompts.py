"""The candidate system prompts of `headstart bench answers`, by name (`--prompt NAME`), read from the
package data file bench/data/answer_prompts.toml: "current" is LLMConfig's default, "previous" the
default before the bench's choice; the others were written for the bench (their worked examples are
not bench items, checked by `answers.item_overlap`). Scores: docs/llm.md.

`PROMPTS` reads the file on first use (importing this module reads nothing); `load_prompts` reads it
anew.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from importlib import resources

from headstart.config import LLMConfig

__all__ = ["DATA_FILE", "PROMPTS", "load_prompts"]

DATA_FILE = "answer_prompts.toml"


def load_prompts(text: str | None = None) -> dict[str, str]:
    """The prompts by name, in the file's order: each TOML table [NAME] holds `text`, or `default = true`
    for LLMConfig's default system prompt. `text`: the TOML itself (default: the packaged file).

    Raises:
        ValueError: not TOML, or a table without exactly one of a non-empty `text` and `default = true`
            (the message names it).
    """
    if text is None:
        text = resources.files("headstart.bench").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{DATA_FILE}: not TOML: {exc}") from None
    prompts = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f"{DATA_FILE}: {name!r} is not a [table]")
        prompt, default = table.get("text"), table.get("default", False)
        if set(table) - {"text", "default"} or (prompt is None) == (default is not True):
            raise ValueError(f"{DATA_FILE} [{name}]: needs either `text` or `default = true`, got {sorted(table)}")
        if default is True:
            prompt = LLMConfig().system_prompt
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"{DATA_FILE} [{name}]: `text` must be a non-empty string")
        prompts[name] = prompt
    return prompts


class _Prompts(Mapping[str, str]):
    """`load_prompts()`, read on first use."""

    def __init__(self) -> None:
        self._prompts: dict[str, str] | None = None

    def _loaded(self) -> dict[str, str]:
        if self._prompts is None:
            self._prompts = load_prompts()
        return self._prompts

    def __getitem__(self, name: str) -> str:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


# `headstart bench answers --prompt NAME` (repeatable; or file:PATH)
PROMPTS: Mapping[str, str] = _Prompts()
