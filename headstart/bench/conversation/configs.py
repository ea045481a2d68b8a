"""The named configurations `headstart bench conversation` compares, as switches on a PipelineConfig.

`baseline` is the plain sequential pipeline people build first: a fixed 0.8 s of silence ends the turn,
the whole utterance is transcribed once at the end (no partials), no incremental prefill, no
preemptive reply, plain decoding (no speculative drafts), and whole sentences go to the synthesiser. `headstart` is the defaults. Each
`no-*` ablation switches one feature of headstart off.

A switch is a config field; a configuration whose required switch does not exist in this checkout is
reported as unavailable (never run with the feature silently left on).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from headstart.config import PipelineConfig

BASELINE_SILENCE_S = 0.8  # silence after the last voiced audio that ends the baseline's turn


@dataclass(frozen=True, slots=True)
class Switch:
    """`section.field = value` on a PipelineConfig; `required`: without the field the configuration
    cannot be built faithfully."""

    section: str
    field: str
    value: object
    required: bool = True

    @property
    def path(self) -> str:
        return f"{self.section}.{self.field}"


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    description: str
    switches: tuple[Switch, ...]


def _baseline_switches(base: PipelineConfig) -> tuple[Switch, ...]:
    # The endpointer's silence counts from the VAD's padded speech end (headstart/voice/endpoint.py).
    silence_s = round(max(BASELINE_SILENCE_S - base.vad.speech_pad_s, 0.0), 3)
    return (
        Switch("asr", "streaming", False),
        Switch("endpoint", "semantic", False),
        Switch("endpoint", "silence_s", silence_s),
        Switch("session", "head_start", False),
        Switch("session", "incremental_prefill", False, required=False),  # head_start=False covers it
        Switch("session", "preemptive", False, required=False),
        Switch("session", "eou", "none", required=False),  # no end-of-utterance model at all
        Switch("tts", "first_clause", False),
        Switch("llm", "speculative", "none", required=False),  # plain decoding
    )


def variants(base: PipelineConfig | None = None) -> dict[str, Variant]:
    """All named configurations, in report order."""
    base = base or PipelineConfig()
    return {v.name: v for v in (
        Variant("baseline", f"fixed {BASELINE_SILENCE_S:g} s silence, whole-utterance ASR, no head start, "
                "whole sentences to TTS", _baseline_switches(base)),
        Variant("headstart", "defaults: streaming ASR, incremental prefill, semantic endpointing, "
                "preemptive reply, early first clause", ()),
        Variant("no-streaming-asr", "headstart without partial transcripts (one ASR pass at the end)",
                (Switch("asr", "streaming", False),)),
        Variant("no-incremental-prefill", "headstart without prefilling the KV cache from partials",
                (Switch("session", "incremental_prefill", False),)),
        Variant("no-semantic-endpointing", "headstart with a fixed silence instead of the EOU probability",
                (Switch("endpoint", "semantic", False),)),
        Variant("no-preemptive", "headstart without the held preemptive reply",
                (Switch("session", "preemptive", False),)),
        Variant("no-pause-preempt", "headstart with the held reply waiting for the VAD's speech end "
                "(not started on the unconfirmed pause before it)",
                (Switch("session", "preempt_on_pause", False),)),
        Variant("no-first-clause", "headstart with whole sentences to TTS (no early first clause)",
                (Switch("tts", "first_clause", False),)),
        Variant("no-tool-prevoice", "headstart with a held tool reply voiced only after its tool ran (the tools "
                "scenario)", (Switch("session", "tool_prevoice", False),)),
        Variant("whisper-asr", "headstart with whisper-tiny.en as the ASR (its own streaming settings)",
                (Switch("asr", "model", "whisper-tiny.en"),)),
    )}


DEFAULT_CONFIGS = ("baseline", "headstart", "no-streaming-asr", "no-incremental-prefill",
                   "no-semantic-endpointing", "no-preemptive", "no-pause-preempt", "no-first-clause")


def missing_switches(variant: Variant, base: PipelineConfig | None = None) -> list[str]:
    """The required switches of `variant` that this checkout's config does not have."""
    base = base or PipelineConfig()
    return [s.path for s in variant.switches
            if s.required and s.field not in {f.name for f in dataclasses.fields(getattr(base, s.section))}]


def apply(variant: Variant, base: PipelineConfig) -> PipelineConfig:
    """`base` with the variant's switches set (optional switches this checkout lacks are skipped).

    Raises:
        ValueError: a required switch is missing (see `missing_switches`).
    """
    missing = missing_switches(variant, base)
    if missing:
        raise ValueError(f"configuration {variant.name!r} needs {', '.join(missing)}, not in this checkout")
    config = base
    for s in variant.switches:
        section = getattr(config, s.section)
        if s.field not in {f.name for f in dataclasses.fields(section)}:
            continue
        config = dataclasses.replace(config, **{s.section: dataclasses.replace(section, **{s.field: s.value})})
    return config


def effective(config: PipelineConfig) -> dict:
    """The settings that differ between configurations, for the JSON line."""
    out = {}
    for section in ("asr", "endpoint", "session", "tts", "llm"):
        obj = getattr(config, section)
        names = {"asr": ("model", "streaming"), "endpoint": ("semantic", "silence_s"),
                 "session": ("head_start", "incremental_prefill", "preemptive", "preempt_on_pause", "eou",
                             "tool_prevoice"),
                 "tts": ("engine", "first_clause"), "llm": ("speculative",)}[section]
        for name in names:
            if hasattr(obj, name):
                out[f"{section}.{name}"] = getattr(obj, name)
    out["llm.model"] = config.llm.model
    out["llm.max_new_tokens"] = config.llm.max_new_tokens
    return out
