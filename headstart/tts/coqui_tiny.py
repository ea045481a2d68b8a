"""Build tiny coqui-tts models with random weights (for tests and the benchmark; their speech is noise).

Runs in the coqui venv by file path, like coqui_worker.py (stdlib + torch + TTS only):

    .venv-coqui/bin/python -I headstart/tts/coqui_tiny.py vits OUT_DIR
    .venv-coqui/bin/python -I headstart/tts/coqui_tiny.py xtts OUT_DIR

Each model is made from a config through coqui's own classes and saved the way coqui's checkpoints
are (`model.pth` holding {"model": state_dict, "config": ...} and `config.json`), so loading it runs
the same code path as a user's trained checkpoint. `xtts` also writes `vocab.json` (a character-level
tokenizer) and `speaker.wav` (1 s of noise to condition on). Prints one JSON line describing the files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def build_vits(out: str, sample_rate: int, seed: int) -> dict:
    import torch
    from TTS.tts.configs.shared_configs import CharactersConfig
    from TTS.tts.configs.vits_config import VitsConfig
    from TTS.tts.models.vits import Vits, VitsArgs

    torch.manual_seed(seed)
    args = VitsArgs(
        hidden_channels=16,
        hidden_channels_ffn_text_encoder=32,
        num_heads_text_encoder=2,
        num_layers_text_encoder=1,
        kernel_size_text_encoder=3,
        num_layers_flow=1,
        num_layers_posterior_encoder=2,
        upsample_rates_decoder=[8, 8, 2, 2],  # product = hop length 256
        upsample_initial_channel_decoder=32,
        upsample_kernel_sizes_decoder=[16, 16, 4, 4],
        resblock_kernel_sizes_decoder=[3],
        resblock_dilation_sizes_decoder=[[1, 3, 5]],
        use_sdp=False,
        init_discriminator=False,  # inference only: the discriminator is most of a VITS checkpoint
    )
    config = VitsConfig(
        model_args=args,
        use_phonemes=False,  # characters: no espeak phonemiser needed in the coqui venv
        text_cleaner="english_cleaners",
        characters=CharactersConfig(
            characters_class="TTS.tts.models.vits.VitsCharacters",
            pad="<PAD>",
            eos="<EOS>",
            bos="<BOS>",
            blank="<BLNK>",
            characters="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
            punctuations="!'(),-.:;? ",
            phonemes=None,
            is_unique=True,
            is_sorted=True,
        ),
        add_blank=True,
    )
    config.audio.sample_rate = sample_rate
    model = Vits(config)
    model_path = os.path.join(out, "model.pth")
    torch.save({"model": model.state_dict(), "config": config.to_dict()}, model_path)
    config.save_json(os.path.join(out, "config.json"))
    return {"kind": "vits", "model": model_path, "config": os.path.join(out, "config.json"), "sample_rate": sample_rate}


def _write_char_vocab(path: str) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import BPE

    specials = ["[STOP]", "[UNK]", "[SPACE]", "[START]", "[en]"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-:;\"()")
    vocab = {tok: i for i, tok in enumerate(specials + chars)}
    tok = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.add_special_tokens(specials)
    tok.save(path)


def build_xtts(out: str, seed: int) -> dict:
    import numpy as np
    import torch
    from TTS.tts.configs.xtts_config import XttsConfig
    from TTS.tts.models.xtts import Xtts, XttsArgs

    torch.manual_seed(seed)
    vocab_path = os.path.join(out, "vocab.json")
    _write_char_vocab(vocab_path)
    args = XttsArgs(
        gpt_layers=1,
        gpt_n_model_channels=64,
        gpt_n_heads=2,
        decoder_input_dim=64,  # the HiFi-GAN decoder reads the GPT's latents
        gpt_num_audio_tokens=258,
        gpt_start_audio_token=256,
        gpt_stop_audio_token=257,
        gpt_max_audio_tokens=12,  # random weights never emit the stop token: keep generation short
        gpt_max_text_tokens=200,
        tokenizer_file=vocab_path,
    )
    config = XttsConfig(model_args=args, languages=["en"])
    model = Xtts(config)
    model.tokenizer = __import__("TTS.tts.layers.xtts.tokenizer", fromlist=["VoiceBpeTokenizer"]).VoiceBpeTokenizer(
        vocab_file=vocab_path
    )
    model.init_models()
    model_path = os.path.join(out, "model.pth")
    torch.save({"model": model.state_dict(), "config": config.to_dict()}, model_path)
    config.save_json(os.path.join(out, "config.json"))
    wav_path = os.path.join(out, "speaker.wav")
    import wave

    rng = np.random.default_rng(seed)
    pcm = (rng.normal(0, 0.1, 22050).clip(-1, 1) * 32767).astype("<i2")
    with wave.open(wav_path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(pcm.tobytes())
    return {
        "kind": "xtts",
        "model": model_path,
        "config": os.path.join(out, "config.json"),
        "vocab": vocab_path,
        "speaker_wav": wav_path,
        "sample_rate": int(config.audio.output_sample_rate),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["vits", "xtts"])
    parser.add_argument("out", help="folder to write the model into (created)")
    parser.add_argument("--sample-rate", type=int, default=16_000, help="VITS output rate (Hz)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # coqui's prints must not mix with the JSON line
    info = build_vits(args.out, args.sample_rate, args.seed) if args.kind == "vits" else build_xtts(args.out, args.seed)
    real_stdout.write(json.dumps(info) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
