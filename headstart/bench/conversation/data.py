"""The user turns `headstart bench conversation` sends: the packaged real recordings (or `--input-dir`),
everyday questions spoken by a TTS voice (labelled synthetic), and the mid-sentence pause set.

Every turn carries its true speech bounds: the bench data's index for the packaged recordings, Silero
for an `--input-dir` (as `headstart bench asr` does), and the synthesiser's own output for the
synthetic questions (first and last sample above -40 dBFS).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from headstart.bench.conversation.client import SR, UserTurn

# Packaged recordings asked first (requests and questions a user might say; then the rest in index order).
PREFERRED = ("goforward", "vm-changeto", "librivox-0880", "tt-somethingwrong", "cards_005", "demo-nomatch",
             "ss-noservice", "librivox-0930")
EVERYDAY_QUESTIONS = (
    "What's a good name for a black cat?",
    "How long should I boil an egg?",
    "Can you suggest something quick for dinner tonight?",
    "Why is the sky blue?",
    "What should I pack for a weekend in the mountains?",
    "How do I say thank you in Spanish?",
    "Tell me a fun fact about octopuses.",
    "What time zone is Tokyo in?",
)
# The tools scenario: requests local tools serve (a timer, the time, arithmetic, a list), each paired
# with an everyday question for the LLM, both spoken by the same voice.
TOOL_REQUESTS = (
    "Set a timer for ten minutes.",
    "What time is it?",
    "What is seventeen times twenty three?",
    "Add milk to my shopping list.",
    "Set a five minute pasta timer.",
    "What's the time in Tokyo?",
    "What's fifteen percent of eighty?",
    "What's on my shopping list?",
)
LEAD_S = 0.5  # room noise before a synthetic question
SPEECH_DBFS = -40.0


def load_user_turns(input_dir: str | None, limit: int | None) -> list[UserTurn]:
    """The recordings as UserTurns, preferred ones first (packaged set) or in transcripts.tsv order.

    Raises:
        FileNotFoundError, ValueError: as `headstart.bench.asr.load_items` (missing index or file, bad header).
    """
    from headstart.bench.asr import load_items

    items = load_items(input_dir)
    if input_dir is None:
        rank = {name: i for i, name in enumerate(PREFERRED)}
        items = sorted(items, key=lambda it: rank.get(it.name, len(rank)))
    if limit:
        items = items[:limit]
    return [UserTurn(it.name, it.audio, it.speech_start_s, it.speech_end_s, it.text) for it in items]


def room_rms(turn: UserTurn) -> float:
    """RMS of the recording's leading non-speech (at least -70 dBFS): the level of the noise sent
    between and after the recordings."""
    lead = turn.audio[: max(int(turn.speech_start_s * SR) - 800, 0)]
    rms = float(np.sqrt(np.mean(lead.astype(np.float64) ** 2))) if lead.size >= 800 else 0.0
    return max(rms, 10 ** (-70 / 20))


def synthetic_turns(synthesizer: Any, questions: tuple[str, ...] | list[str], noise_rms: float,
                    seed: int = 0, prefix: str = "synthetic", tool_request: bool = False) -> list[UserTurn]:
    """Speak each question with `synthesizer` (a headstart.tts Synthesizer), resample to 16 kHz, put
    `LEAD_S` of room noise before it and room noise under it; speech bounds from the clean audio. The
    turns are named `prefix`-1, -2, ... and carry `tool_request`.

    Raises:
        ValueError: the synthesiser produced no audible speech for a question.
    """
    from headstart.audio import resample

    rng = np.random.default_rng(seed)
    out = []
    for n, text in enumerate(questions):
        parts = [np.asarray(a, dtype=np.float32) for a in synthesizer.synthesize(text)]
        speech = resample(np.concatenate(parts), synthesizer.sample_rate, SR) if parts else np.zeros(0, np.float32)
        loud = np.nonzero(np.abs(speech) >= 10 ** (SPEECH_DBFS / 20))[0]
        if loud.size == 0:
            raise ValueError(f"the synthesiser produced no speech for {text!r}")
        lead = int(LEAD_S * SR)
        audio = np.concatenate([np.zeros(lead, np.float32), speech])
        audio = audio + (rng.standard_normal(audio.shape[0]) * noise_rms).astype(np.float32)
        out.append(UserTurn(f"{prefix}-{n + 1}", audio.astype(np.float32), (lead + loud[0]) / SR,
                            (lead + loud[-1] + 1) / SR, text, synthetic=True, tool_request=tool_request))
    return out


def tool_scenario_turns(synthesizer: Any, items: int, noise_rms: float, seed: int = 0) -> list[UserTurn]:
    """The tools scenario's turns: `items` tool requests (TOOL_REQUESTS in turn) and as many everyday
    questions (EVERYDAY_QUESTIONS), alternating (tool, plain, tool, ...), all spoken by `synthesizer`
    so that the two kinds differ only in who answers: named tool-N and plain-N."""
    if items <= 0:
        return []
    def pick(pool: tuple[str, ...]) -> list[str]:
        return [pool[i % len(pool)] for i in range(items)]

    tools = synthetic_turns(synthesizer, pick(TOOL_REQUESTS), noise_rms, seed, prefix="tool", tool_request=True)
    plain = synthetic_turns(synthesizer, pick(EVERYDAY_QUESTIONS), noise_rms, seed + 1, prefix="plain")
    return interleave(tools, plain)


def interleave(real: list[UserTurn], synthetic: list[UserTurn]) -> list[UserTurn]:
    """real, synthetic, real, synthetic, ... then the rest of the longer list."""
    out = []
    for i in range(max(len(real), len(synthetic))):
        out += [t[i] for t in (real, synthetic) if i < len(t)]
    return out


def pause_turns(turns: list[UserTurn], asr: Any, count: int, seed: int) -> list[UserTurn]:
    """The pause set of `headstart bench asr` (reusing its builder: a 0.6-1.5 s pause at the word gap
    nearest the middle, filled with room noise or digital zero) as UserTurns: at most `count`, one per
    recording first (kinds alternating: noise, zero, noise, ...), then the other kind of each; real
    recordings of four words or more only (`asr` gives the word times).
    """
    from headstart.bench.asr import Item, pause_set

    if count <= 0:
        return []
    eligible = [t for t in turns if not t.synthetic and len(t.text.replace("...", " ").split()) >= 4]
    items = [Item(t.name, t.text, t.audio, t.speech_end_s, t.speech_start_s) for t in eligible[:count]]
    built = pause_set(items, asr, seed)
    names = list(dict.fromkeys(p.item.name for p in built))
    first = [p for p in built if p.kind == ("noise" if names.index(p.item.name) % 2 == 0 else "zero")]
    taken = {id(p) for p in first}
    chosen = (first + [p for p in built if id(p) not in taken])[:count]
    out = []
    for p in chosen:
        pause_s = p.pause_end_s - p.pause_start_s
        end_s = p.item.speech_end_s + pause_s
        out.append(UserTurn(f"{p.item.name}+pause{pause_s:.1f}s-{p.kind}", p.audio, p.item.speech_start_s, end_s,
                            p.item.text, pause=(p.pause_start_s, p.pause_end_s)))
    return out
