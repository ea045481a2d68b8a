"""headstart/cli/options.py: the flags demo, serve, mic and the benches share, and the PipelineConfig they build."""

from __future__ import annotations

import pytest


def test_build_config_takes_the_coqui_checkpoint():
    import argparse

    from headstart.config import TTSConfig
    from headstart.cli.options import build_config
    from headstart.cli.demo import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = build_config(parser.parse_args(["--tts", "coqui", "--coqui-model", "/models/xtts"]))
    assert config.tts.engine == "coqui" and config.tts.coqui_model == "/models/xtts"
    assert build_config(parser.parse_args([])).tts.coqui_model == TTSConfig().coqui_model


def test_demo_option_reaches_the_llm_config():
    import argparse

    from headstart.cli.options import build_config
    from headstart.cli.demo import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert build_config(parser.parse_args([])).llm.quantize == "auto"
    assert build_config(parser.parse_args(["--llm-quantize", "int8"])).llm.quantize == "int8"
    assert build_config(parser.parse_args(["--llm-quantize", "none"])).llm.quantize == "none"
    assert build_config(parser.parse_args([])).llm.dtype == "auto"
    assert build_config(parser.parse_args(["--llm-dtype", "bfloat16"])).llm.dtype == "bfloat16"
    with pytest.raises(SystemExit):
        parser.parse_args(["--llm-quantize", "int4"])


@pytest.mark.parametrize("module", ["serve", "mic"])
def test_serve_and_mic_take_the_option_too(module):
    import argparse
    import importlib

    from headstart.cli.options import build_config

    parser = argparse.ArgumentParser()
    importlib.import_module(f"headstart.cli.{module}").add_arguments(parser)
    assert build_config(parser.parse_args(["--llm-quantize", "none"])).llm.quantize == "none"
    assert build_config(parser.parse_args([])).llm.dtype == "auto"
    assert build_config(parser.parse_args(["--llm-dtype", "bfloat16"])).llm.dtype == "bfloat16"
    assert build_config(parser.parse_args([])).llm.quantize == "auto"


def test_serve_takes_the_drain_limit():
    import argparse

    from headstart.cli.serve import add_arguments, server_config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert server_config_from_args(parser.parse_args([])).drain_s == 10.0
    assert server_config_from_args(parser.parse_args(["--drain-s", "2.5"])).drain_s == 2.5
    assert server_config_from_args(parser.parse_args(["--drain-s", "0"])).drain_s == 0.0
    for bad in ("-1", "nan", "inf"):
        assert "--drain-s" in server_config_from_args(parser.parse_args(["--drain-s", bad]))


@pytest.mark.parametrize("module", ["demo", "serve", "mic"])
def test_the_memory_setting_reaches_the_llm_config_beside_the_history_budget(module):
    import argparse
    import importlib

    from headstart.cli.options import build_config

    parser = argparse.ArgumentParser()
    importlib.import_module(f"headstart.cli.{module}").add_arguments(parser)
    assert build_config(parser.parse_args([])).llm.memory == "summary"
    config = build_config(parser.parse_args(["--memory", "window", "--max-history-tokens", "400"])).llm
    assert (config.memory, config.max_history_tokens) == ("window", 400)
    assert build_config(parser.parse_args(["--memory", "off"])).llm.memory == "off"
    with pytest.raises(SystemExit):
        parser.parse_args(["--memory", "everything"])
