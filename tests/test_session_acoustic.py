"""The session's wiring of the acoustic end-of-turn model (Components.acoustic_eou): the listener gets a
scorer only when there is a model, and it runs on the model's own thread (not the ASR's or LLM's)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import numpy as np
from fakes import ScriptedListener
from test_session_switches import FakeEngine

from headstart.session.components import Components
from headstart.config import EndpointConfig, PipelineConfig


class RecordingTurnModel:
    def __init__(self) -> None:
        self.threads: list[str] = []

    def completion_probability(self, samples: np.ndarray) -> float:
        self.threads.append(threading.current_thread().name)
        return 0.9


def listener_scorers(model) -> tuple:
    """The (eou_scorer, acoustic_scorer) a Session hands its listener, with `model` as
    `Components.acoustic_eou` and the fusion configured."""
    from headstart.session.session import Session

    config = replace(PipelineConfig(), endpoint=EndpointConfig(acoustic_model="smart-turn-v3.2"))
    components = Components(config=config, asr=None, llm=FakeEngine(), tts=None, acoustic_eou=model)
    given: list[tuple] = []
    Session(components, eou_scorer=None, listener=lambda *scorers: given.append(scorers) or ScriptedListener([]))
    return given[0], components


def test_the_listener_scores_audio_on_the_models_own_thread():
    model = RecordingTurnModel()
    (eou, acoustic), components = listener_scorers(model)
    try:
        assert eou is None and acoustic is not None
        p = asyncio.run(acoustic(np.zeros(1600, np.float32)))
        assert p == 0.9 and model.threads and model.threads[0].startswith("turn")
    finally:
        components.close()


def test_without_a_model_the_listener_has_no_acoustic_scorer():
    (_, acoustic), components = listener_scorers(None)
    try:
        assert acoustic is None
    finally:
        components.close()
