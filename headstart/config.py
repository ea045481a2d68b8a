"""Frozen per-component configs. They are built only at the entry points (CLI, server, tests) and
passed down; components never read the environment or global state themselves."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ThreadPlan:
    """Explicit thread counts for the three compute libraries sharing the CPU.

    The default gives each of ASR, LLM and TTS one thread, so they overlap on two cores; more torch
    threads make matmuls erratic when other work shares the cores (docs/llm.md has the measurement).
    """

    torch_threads: int = 1
    asr_threads: int = 1
    tts_threads: int = 1


@dataclass(frozen=True, slots=True)
class VADConfig:
    """Silero VAD with hysteresis. Durations in seconds, thresholds are speech probabilities."""

    engine: str = "silero"  # "silero" or "webrtc"
    start_threshold: float = 0.5
    stop_threshold: float = 0.35
    min_speech_s: float = 0.15
    min_silence_s: float = 0.25
    speech_pad_s: float = 0.1
    # while the agent's reply plays (VAD.bargein_armed), a speech run also starts speech once it has
    # lasted this long from a window at or above bargein_start_threshold: a barge-in pauses the reply
    # sooner; None: only min_speech_s
    bargein_min_speech_s: float | None = 0.064
    bargein_start_threshold: float = 0.5
    webrtc_mode: int = 3  # 0..3, only for engine="webrtc"
    webrtc_frame_ms: int = 30  # 10, 20 or 30, only for engine="webrtc"


@dataclass(frozen=True, slots=True)
class ASRConfig:
    """Streaming ASR settings (Moonshine base by default; whisper through faster-whisper)."""

    # preset name, local folder or hub id. Moonshine base: chosen with `headstart bench asr`, both engines
    # in one run (lower WER, sooner partials, half the CPU; docs/listening.md); whisper-tiny.en is a preset
    model: str = "moonshine-base"
    # False (ablation, a naive pipeline): no partial passes and no partial transcripts; one Whisper pass
    # over the whole utterance once the VAD reports the end of speech
    streaming: bool = True
    compute_type: str = "int8"
    beam_size: int = 1
    language: str | None = "en"
    # re-transcribe the growing utterance at most this often (None: the engine's, `ListeningDefaults` in
    # voice/asr.py: 0.4 s whisper, 0.2 s Moonshine)
    min_new_audio_s: float | None = None
    # past this much buffered audio the partial interval grows in proportion to the buffer (for engines
    # whose pass cost grows with the audio; pauses still start a pass). None: the engine's (whisper: inf,
    # never; Moonshine: 2 s)
    partial_long_s: float | None = None
    agreement_n: int | None = None  # LocalAgreement-n (None: the engine's, whisper 2, Moonshine 3)
    no_speech_threshold: float = 0.6  # drop a segment above this no-speech probability ...
    log_prob_threshold: float = -1.0  # ... if its average token log-probability is also below this
    compression_ratio_threshold: float = 2.4  # drop a segment that compresses better (repetition loop)
    # FinalTranscript text: False = committed words + the final pass' words beyond them (never
    # contradicts a partial); True = the final pass' own full hypothesis (more accurate: early words
    # committed from short audio can be wrong; the session must then roll back what it prefilled)
    # None: the engine's (whisper False, Moonshine True)
    final_redecode: bool | None = None
    device: str = "cpu"
    # Whisper's encoder over a shorter window than its 30 s (the audio + 2 s, at least this long, at
    # most 30 s; None: always 30 s). CTranslate2 accepts the shorter input; the encoder is most of a
    # call's cost. 10 s: the streaming WER of 8, 10 and 12 s windows and where 8 s loops are in
    # docs/listening.md; shorter windows make tiny.en loop more
    encoder_window_s: float | None = 10.0
    # final pass early: once the VAD has heard this much silence after speech (before it confirms the
    # end, VADConfig.min_silence_s), a pass starts if the ASR is free, so the pass that hears the
    # whole utterance is under way when the end is confirmed (None: off, final passes start at the end)
    early_final_s: float | None = 0.06
    # a pass that heard the utterance up to its padded speech end minus this is its final (no extra
    # pass): the padding (VADConfig.speech_pad_s) plus the VAD's lag behind the true end of speech;
    # the measurements that chose it are in docs/listening.md ("final_slack_s")
    # None: the engine's (whisper 0.15 s, Moonshine 0.05 s: it loses the last word on audio cut at the end)
    final_slack_s: float | None = None
    # long utterances: once this much audio is buffered, the buffer is trimmed at the last committed
    # sentence end and the committed text becomes the prompt (cost stays flat)
    trim_after_s: float = 12.0


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """When the user's turn is over: silence after the VAD's (padded) speech end, in seconds.

    Without a semantic signal the turn ends `silence_s` after the speech. With one (an
    `eou_probability` for the current text, see headstart/llm/eou.py) the silence needed adapts:
    `min_silence_s` when the probability is at or above `eou_high` (the text reads complete),
    `max_silence_s` at or below `eou_low` (cut off mid-sentence), interpolated on a log scale between.
    """

    # False (ablation): the turn ends a fixed `silence_s` after the speech; EOU probabilities are
    # ignored (the Listener then does not call its EOU scorer at all)
    semantic: bool = True
    silence_s: float = 0.5  # no eou_probability known (or semantic=False)
    min_silence_s: float = 0.0  # text reads complete (the VAD already waited min_silence_s - speech_pad_s)
    # text reads cut off: outlasts a 1.5 s mid-sentence pause plus the VAD's min_speech_s to confirm
    # the speech that follows (and the word gap before the pause)
    max_silence_s: float = 2.0
    # which EOU signal the session computes (and which thresholds below apply): "head", a trained
    # logistic head on the LLM's last hidden state (headstart/llm/eou_head.py, a calibrated
    # probability), or "token", the LLM's raw end-of-turn token probability (headstart/llm/eou.py)
    eou_scorer: str = "head"
    # thresholds for the head's probability (trained class-balanced: 0.5 is the even odds). Each
    # trained head carries its own, calibrated on out-of-fold scores (EOUHeadWeights.thresholds), which
    # cut off far fewer pauses than these generic ones (docs/listening.md)
    eou_low: float = 0.15
    eou_high: float = 0.75
    # "trained": a session with the trained head uses the head's own calibrated thresholds in place of
    # eou_low/eou_high (EOUHeadWeights.thresholds; a head without them keeps these); "config": these
    head_thresholds: str = "trained"
    # thresholds for the raw end-of-turn token probability on text without trailing punctuation, set
    # between what complete and cut-in-half sentences score (docs/listening.md "token thresholds")
    token_eou_low: float = 1e-7
    token_eou_high: float = 1e-4
    # "speech" with no recognised word for this long (claps, breathing, noise the VAD let through)
    # counts as silence from the last word's end
    max_wordless_s: float = 2.0
    max_turn_s: float = 30.0  # backstop: a turn is cut here even during speech
    # acoustic end of turn (headstart/voice/turn_fusion.py): None = off, the text head alone decides; a
    # model (preset "smart-turn-v3.2" or an .onnx file) hears the turn's audio once per pause, at
    # `acoustic_after_s` of silence (it is only trustworthy then), and the endpointer decides from that,
    # the text head's probability and the recogniser's trailing-off marks together
    # (off by default: at the current ASR settings it ends complete turns sooner but cuts more pauses
    # than the text head alone in the same `headstart bench asr` run, docs/listening.md)
    acoustic_model: str | None = None
    acoustic_after_s: float = 0.2
    # how the acoustic score is used: "fusion" (above: turn_fusion.FITTED decides from both) or "veto"
    # (the text head decides as without it, but a text reading complete is not ended at once when the
    # pause sounds unfinished: acoustic P(complete) < acoustic_veto_below waits max_silence_s)
    acoustic_mode: str = "fusion"
    acoustic_veto_below: float = 0.05  # chosen on the Asterisk prompts' rows, docs/listening.md


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """The reply model and its decoding settings."""

    model: str = "qwen2.5-coder-0.5b"  # preset name, local folder or hub id
    max_new_tokens: int = 60
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    # "auto": float32 on CPU, whatever bf16 support it reports (with quantize "auto", the int8 path: the
    # fastest and the exact one on every CPU measured, docs/llm.md "Precision"); bfloat16 on a GPU.
    # "bfloat16" on CPU only when asked for: its multi-token forwards differ from one-token steps, so the
    # load-time self-test (llm/exactness.py) then turns speculative decoding off.
    dtype: str = "auto"
    device: str = "cpu"
    # "int8": dynamic int8 Linear layers after loading (llm/int8.py: int8 weights per channel, activations
    # per token, so multi-token forwards stay bit-identical to one-token steps), fewer bytes per decoded
    # token on CPU; needs dtype "float32" (or "auto" resolving to it). None or "none": off. "auto": int8
    # where the model resolves to float32 on a CPU with the int8 kernels (AVX2 or AVX-512), else off
    # (CUDA, bf16, an older CPU: plain float32 with a message). llm/precision.py; figures in docs/llm.md.
    quantize: str | None = "auto"
    # Chosen with `headstart bench answers` ("canned-examples" there; scores and candidates in docs/llm.md).
    # The quoted replies and examples are not bench items; a small model copies unquoted instructions.
    system_prompt: str = (
        "You are headstart, a friendly voice assistant, and your replies are spoken aloud. Answer in one "
        "short, plain sentence, the answer first, with no lists. You can only talk: you cannot control "
        "devices, call, message, play music, order, set timers, or know the time or weather; when asked "
        "to, say \"Sorry, I can't do that, I can only talk.\" If the user's words are cut off or make no "
        "sense, do not repeat them; say \"Sorry, could you say that again?\" Greetings, thanks and goodbyes "
        "get a short friendly reply.\n"
        "Examples:\n"
        "User: \"Book me a table for two tonight.\" You: \"Sorry, I can't do that, I can only talk.\"\n"
        "User: \"Could you check the, er\" You: \"Sorry, could you say that again?\"\n"
        "User: \"Lamp seven over the, banana.\" You: \"Sorry, could you say that again?\"\n"
        "User: \"Nice to meet you!\" You: \"Nice to meet you too!\"\n"
        "User: \"How do I stop hiccups?\" You: \"Hold your breath for about ten seconds, or sip cold water "
        "slowly.\""
    )
    stop: tuple[str, ...] = field(default_factory=tuple)
    # Spoken answers: after this many tokens the reply ends at the next sentence end (None: off);
    # max_new_tokens stays the hard limit.
    soft_max_tokens: int | None = 40
    # Speculative decoding of every reply (exact: the same tokens as plain greedy): "none",
    # "prompt_lookup" (drafts copied from the conversation; replies often repeat the user's words) or
    # "draft_model" (draft_model names the drafter, a model with the same tokenizer; its own prompt is
    # not primed while the user speaks yet). It switches itself off below break-even (the speedups
    # per drafter: docs/llm.md).
    speculative: str = "prompt_lookup"
    draft_model: str | None = None
    # The drafter's own quantisation ("int8", None, or "auto": int8 where the drafter runs in float32 on
    # CPU). Drafts are only proposals (the target verifies every token), so a lossy, cheaper drafter
    # keeps the output exact and moves the break-even (docs/llm.md).
    draft_quantize: str | None = "auto"
    speculate_k: int = 4
    # Bounded history for long sessions (llm/history.py): the completed turns kept in the prompt, in
    # tokens; older whole turns are dropped between turns (down to 75 %), the system prompt and the turn
    # in progress always stay. "auto": what fits the model's context besides the reply, the system prompt
    # and the turn in progress (`history_budget`); None: keep everything (a prompt past the context fails).
    max_history_tokens: int | str | None = "auto"
    # What a long session keeps of the turns past that budget (llm/memory.py): "summary" compacts them
    # into short notes written by this LLM (greedy, frozen once written, while the assistant is idle;
    # with a remote LLM, the window); "window" drops whole old turns (llm/history.py TurnWindow); "off"
    # keeps everything, as max_history_tokens None does. Chosen with `headstart bench memory`: at half the
    # history's tokens the 0.5b answered 9 of 20 probes with summaries, 10 with the whole history, 3 with
    # the window (docs/llm.md "Long conversations").
    memory: str = "summary"


@dataclass(frozen=True, slots=True)
class TTSConfig:
    """The synthesiser and the chunker that feeds it."""

    # "hibari" (the bundled 24 kHz voice), "piper-joe", "espeak", "coqui", or a path to a Piper .onnx voice;
    # why hibari is the default: docs/speaking.md ("The default voice")
    engine: str = "hibari"
    # the first chunk: at the first comma (etc.) once it has this many words ("Sure," | "here is ...") ...
    first_chunk_min_words: int = 1
    # ... or after this many words with no comma yet, moved past dangling words (0: wait for one).
    # Piper's time to first audio grows with the chunk: see docs/speaking.md for the measurements
    first_chunk_max_words: int = 5
    # after the first chunk, a chunk also ends at a comma (etc.) once it has 6 words, until the reply's
    # chunks hold this many words (0: whole sentences after the first chunk): a short opener ("Sure!")
    # then does not wait for a long second sentence to be generated (a gap in playback)
    clause_chunks_until_words: int = 12
    max_chunk_chars: int = 200
    length_scale: float | None = None  # Piper phoneme duration scale (< 1 speaks faster); None: voice default
    espeak_voice: str = "en-us"
    output_rate_hz: int | None = None  # resample frames to this rate (soxr); None: the engine's own rate
    # False (ablation, a naive pipeline): no early first clause; every chunk is a whole sentence (or line)
    first_clause: bool = True
    hibari_voice: str = "heart"  # only voices already on disk ("heart" is in the wheel); never downloads
    coqui_model: str | None = None  # engine "coqui": checkpoint path (.pth; XTTS: the file or its folder)
    coqui_config: str | None = None  # its config.json; None: next to the checkpoint
    coqui_python: str | None = None  # coqui venv interpreter; None: $HEADSTART_COQUI_PYTHON or .venv-coqui
    coqui_speaker: str | None = None  # multi-speaker VITS: speaker name
    coqui_speaker_wav: str | None = None  # XTTS: recording of the voice to clone
    coqui_language: str = "en"  # XTTS language code


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """The session's head start (headstart/session/preemption.py): incremental prefill from partial
    transcripts and a preemptive reply, held until the end of turn confirms it.

    A held reply starts when the user has stopped speaking (a pause the VAD hears, with
    `preempt_on_pause`; its speech end; or the final transcript) and the text reads complete: its EOU probability is at least `preempt_eou_threshold`
    when an EOU signal is known, else it ends with sentence punctuation (the simple rule).
    """

    head_start: bool = True  # master switch. False: no incremental prefill, no preemptive reply (ablations)
    incremental_prefill: bool = True  # partial transcripts prefill the KV cache (needs head_start)
    preemptive: bool = True  # a held reply may start before the end of turn (needs head_start)
    preempt_min_words: int = 2  # shorter texts get no held reply
    # a pause the VAD hears but has not yet confirmed as the speech's end (its min_silence_s still
    # running) may start the held reply once it lasts preempt_pause_s; speech that goes on drops it.
    # False: the held reply waits for the VAD's speech end
    preempt_on_pause: bool = True
    preempt_pause_s: float = 0.064
    # EOU probability from which a held reply starts once the user is silent. None: a quarter of the way
    # (log scale) from the endpointer's low to its high threshold for the scorer in use, so it follows
    # that scale and work starts while the endpointer still waits (a miss costs only LLM time; how many
    # complete and cut texts reach it: docs/server.md).
    preempt_eou_threshold: float | None = None
    # the default for the trained head (a calibrated probability) when preempt_eou_threshold is None. Its
    # end-of-turn thresholds sit near 0.8 (few cut-offs), but a held reply should start well before the
    # endpointer is sure: it lies between what the qwen2.5-coder-0.5b head gives complete and cut texts
    # (docs/server.md)
    preempt_head_threshold: float | None = 0.1
    # the end-of-utterance signal the session computes (Components.eou_model) for endpointing and the
    # head start: "auto" (EndpointConfig.eou_scorer, falling back from "head" to "token" when this LLM
    # has no trained head), "head", "token" (alias "llm": the chat model's end-of-turn token) or "none"
    # (punctuation rule for the head start, fixed silence for the endpointer)
    eou: str = "auto"
    # a final transcript whose recogniser confidence (mean word probability) is under this gets "Sorry,
    # could you say that again?" (headstart/session/ask_back.py) instead of an answer to words the user
    # may not have said; None: always answer. Chosen on clean and garbled turns: docs/listening.md
    ask_back_below: float | None = 0.70
    # local tools (headstart/tools/, docs/tools.md): a final transcript a tool serves ("What time is
    # it?", "Set a timer for ten minutes") gets its spoken answer instead of the LLM's; any other goes to
    # the LLM as before. False (`--no-tools`): every reply is the LLM's
    tools: bool = True
    # a held tool reply voices the answer its tool will most likely give (computed without acting) so its
    # audio is ready at the end of turn like a held LLM reply's; False: voiced only after the tool ran
    tool_prevoice: bool = True


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Everything one voice session needs."""

    threads: ThreadPlan = field(default_factory=ThreadPlan)
    vad: VADConfig = field(default_factory=VADConfig)
    asr: ASRConfig = field(default_factory=ASRConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    tts: TTSConfig = field(default_factory=TTSConfig)
    session: SessionConfig = field(default_factory=SessionConfig)
