"""Driving a real `Listener` over recorded audio, for the listener, VAD and ASR-engine tests."""

from __future__ import annotations

import asyncio

import numpy as np

from headstart.audio import AudioFrame
from headstart.voice.listener import Listener

SR = 16000


async def run_listener(listener: Listener, audio: np.ndarray, frame_s=0.02, rate=SR, wait_asr=True, convert=None,
                       timeout_s: float = 10.0, record=None):
    """Push `audio` in frames (each converted by `convert`), collect all events (each as `record(event)`
    when given: what the listener says at the moment the event comes out).

    wait_asr=True lets any ASR pass finish after each frame (an ASR much faster than real time);
    False pushes everything without yielding to the loop (`--fast`: the ASR falls far behind).
    `timeout_s`: how long the events may take to drain after the end of input."""
    events = []

    async def consume():
        async for event in listener:
            events.append(event if record is None else record(event))

    consumer = asyncio.create_task(consume())
    step = int(round(frame_s * rate))
    for start in range(0, audio.shape[0], step):
        frame = audio[start : start + step]
        await listener.push(AudioFrame(convert(frame) if convert else frame, rate))
        if wait_asr:
            while listener._task is not None:
                await listener._task
            await asyncio.sleep(0)
    await listener.end_input()
    await asyncio.wait_for(consumer, timeout_s)
    return events
