"""`headstart bench asr`: its flags, read into AsrBenchOptions (the bench: headstart/bench/asr.py)."""

from __future__ import annotations

import argparse

from headstart.cli.options import add_threads_argument, options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench asr` options to `parser`."""
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--input-dir", default=None, help="WAVs + transcripts.tsv (file, text, ...); default: bench data")
    parser.add_argument("--model", default=None, help="ASR model (preset, folder or hub id; default: ASRConfig.model)")
    parser.add_argument("--endpointing", choices=("semantic", "silence"), default="semantic",
                        help="semantic: EOU probability from the LLM adapts the silence; silence: fixed silence_s")
    parser.add_argument("--llm", default=None, help="LLM for the semantic EOU signal (default: the session's, LLMConfig.model)")
    from headstart.llm.precision import DTYPE_CHOICES, QUANTIZE_CHOICES

    parser.add_argument("--llm-quantize", "--quantize", dest="quantize", choices=QUANTIZE_CHOICES, default=None,
                        help="the EOU LLM's quantisation (default: LLMConfig.quantize, as the session loads it)")
    parser.add_argument("--llm-dtype", dest="llm_dtype", choices=DTYPE_CHOICES, default=None,
                        help="the EOU LLM's dtype (default: LLMConfig.dtype, as the session loads it)")
    parser.add_argument("--eou", choices=("head", "token"), default="head",
                        help="EOU signal: head = trained head on the LLM's last hidden state (llm/eou_head.py); "
                             "token = the LLM's raw end-of-turn token probability (llm/eou.py)")
    parser.add_argument("--eou-head", default=None, metavar="PATH",
                        help="EOU head file (.npz, `headstart llm train-eou --out`) instead of the cache's or the "
                             "packaged head for the LLM (--eou head only; its model must be the LLM's)")
    parser.add_argument("--eou-thresholds", choices=("head", "config"), default="head",
                        help="head: the eou_low/eou_high calibrated with the trained head (EOUHeadWeights.thresholds), "
                             "config: EndpointConfig's defaults")
    parser.add_argument("--acoustic-model", default=None,
                        help="acoustic end of turn fused with the text head (EndpointConfig.acoustic_model, e.g. "
                             "smart-turn-v3.2; headstart/voice/turn_fusion.py); default: the session's; "
                             "'none': the text head alone")
    parser.add_argument("--acoustic-mode", choices=("fusion", "veto"), default=None,
                        help="how the acoustic score is used (EndpointConfig.acoustic_mode): fusion with the text head, "
                             "or a veto on its ending at once; default: the session's")
    parser.add_argument("--acoustic-veto-below", type=float, default=None,
                        help="veto mode: an acoustic P(complete) below this vetoes (EndpointConfig.acoustic_veto_below)")
    parser.add_argument("--no-streaming", action="store_true",
                        help="ablation (ASRConfig.streaming=False): no partials, one pass per utterance at the speech end")
    parser.add_argument("--limit", type=int, default=None, help="only the first N recordings (quick runs)")
    parser.add_argument("--no-pauses", action="store_true", help="skip the pause set (no false cut-off rate)")
    parser.add_argument("--pauses-only", action="store_true", help="only the pause set (the false cut-off rate)")
    parser.add_argument("--timing", choices=("wall", "cpu"), default="wall",
                        help="cost of each ASR pass and EOU call: wall = wall time (the machine as it is, shared load "
                             "included); cpu = process CPU time, one job at a time (an otherwise idle core)")
    add_threads_argument(parser, "CTranslate2 threads (ThreadPlan.asr_threads)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pause lengths")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.asr import AsrBenchOptions, main

    return main(options_from_args(AsrBenchOptions, args))
