"""`headstart llm train-proposal | train-eou | train-eagle`: the trainers' flags, read into their option
records (the trainers: headstart/training/)."""

from __future__ import annotations

import argparse

from headstart.cli.options import add_threads_argument, options_from_args
from headstart.training.train_proposal import SHARD_CONVERSATIONS


def add_trainers(parser: argparse.ArgumentParser) -> None:
    """`llm train-proposal | train-eou | train-eagle` under `parser`."""
    trainers = parser.add_subparsers(dest="llm_command", required=True)
    tp = trainers.add_parser("train-proposal", help="distil an early-exit proposal head from the model's own replies")
    add_proposal_arguments(tp)
    tp.set_defaults(func=run_proposal_from_args)
    te = trainers.add_parser("train-eou", help="train the EOU head (end-of-utterance probe on the LLM's last hidden state)")
    add_eou_arguments(te)
    te.set_defaults(func=run_eou_from_args)
    tg = trainers.add_parser("train-eagle", help="train the EAGLE-style proposal network on an early exit layer")
    add_eagle_arguments(tg)
    tg.set_defaults(func=run_eagle_from_args)


# -- train-proposal ----------------------------------------------------------------------------------


def add_proposal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2-135m", help="preset name or prepared model folder")
    parser.add_argument("--exit-layer", type=int, default=None,
                        help="the head to save: hidden state after this decoder layer (default: n/4)")
    parser.add_argument("--report-layers", default="auto",
                        help="comma-separated exit layers to train and report (auto: n/6, n/4, n/3, n/2)")
    parser.add_argument("--kind", choices=["linear", "mlp"], default="linear")
    parser.add_argument("--rank", type=int, default=None, help="hidden width of the mlp head (default d)")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=40, help="reply length of the generated data")
    parser.add_argument("--synthetic", type=int, default=1000,
                        help="composed spoken-style conversations added to the ~150 hand-written training ones "
                             f"(~30 positions each; generated in cached shards of {SHARD_CONVERSATIONS})")
    parser.add_argument("--train-positions", default="all",
                        help="comma-separated training-set sizes in positions (e.g. 6000,25000,all): one head "
                             "per size and layer, a data-scaling table; the head saved is the last size's")
    parser.add_argument("--batch-size", type=int, default=64, help="conversations per batched generation")
    add_threads_argument(parser)
    parser.add_argument("--out", default=None, help="where to save the head (default: the headstart cache)")
    parser.add_argument("--no-save", action="store_true", help="report only; save no head")
    parser.add_argument("--quick", action="store_true",
                        help="no long multi-turn hand-written training prompts (the Lisbon chat's follow-ups)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_proposal_from_args(args: argparse.Namespace) -> int:
    from headstart.training.train_proposal import TrainProposalOptions, main

    return main(options_from_args(TrainProposalOptions, args))


# -- train-eou ---------------------------------------------------------------------------------------


def add_eou_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="LLM preset (or folder) the head is for")
    parser.add_argument("--sentences", default=None,
                        help="a text file of complete utterances, one per line (default: the packaged set)")
    parser.add_argument("--quantize", choices=("auto", "int8", "none"), default=None,
                        help="the LLM's quantisation while training (default: LLMConfig.quantize, as the session loads it; "
                             "int8 changes the hidden states a little)")
    parser.add_argument("--labels", choices=("all-cuts", "pause-points"), default="all-cuts",
                        help="negatives: every cut of a sentence (all-cuts, the shipped heads) or only cuts that read cut off "
                             "(pause-points, training/eou_data.py label_cuts; docs/listening.md compares them)")
    parser.add_argument("--synthetic", type=int, default=0,
                        help="short complete turns generated from templates (training/eou_data.py) added to the sentences (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic turns and of the splits (default 0)")
    parser.add_argument("--extra-rows", default=None, metavar="FILE",
                        help="extra labelled texts added as they stand (1 complete, 0 cut off): a JSON list of "
                             "{text, label[, split]} (rows whose split is not 'train' skipped) or a TSV of text<TAB>label "
                             "(training/eou_data.py load_extra_rows); bench overlaps are dropped as for the sentences")
    parser.add_argument("--max-cutoff", type=float, default=0.03,
                        help="calibrate eou_low/eou_high for at most this expected false cut-off rate (default 0.03)")
    parser.add_argument("--out", default=None, help="where to write the head (default: the cache, which wins over the packaged head)")
    parser.add_argument("--evaluate-bench", action="store_true",
                        help="also report AUC on the bench transcripts (complete vs cut), head vs raw token probability")


def run_eou_from_args(args: argparse.Namespace) -> int:
    from headstart.training.train_eou import TrainEOUOptions, main

    return main(options_from_args(TrainEOUOptions, args))


# -- train-eagle -------------------------------------------------------------------------------------


def add_eagle_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--exit-layer", type=int, default=None, help="default n/4")
    parser.add_argument("--report-layers", default="", help="more exit layers to train and report (comma-separated)")
    parser.add_argument("--synthetic", type=int, default=750, help="composed spoken-style conversations added")
    parser.add_argument("--train-positions", default="all", help="comma-separated sizes (a scaling table) or all")
    parser.add_argument("--steps", type=int, default=3, help="draft steps unrolled in training")
    parser.add_argument("--k", type=int, default=4, help="draft positions reported")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--intermediate-size", type=int, default=1024, help="the network's MLP width")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--feature-offset", type=int, choices=[0, 1], default=0,
                        help="0: feature of position i with token i+1 (EAGLE, free); 1: feature of position i+1 "
                             "(layers 1..L run on the newest token before the first draft)")
    parser.add_argument("--loss", choices=["ce", "kl", "mix"], default="ce",
                        help="ce: cross-entropy to the full model's greedy token; kl: distillation, KL(full model's "
                             "softmax over V' || the network's); mix: their mean")
    parser.add_argument("--loss-positions", choices=["all", "reply"], default="all",
                        help="all: every slot after the system prompt; reply: the reply slots only (those drafted)")
    parser.add_argument("--batch-size", type=int, default=32, help="conversations per batched generation")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--llm-quantize", dest="quantize", choices=["int8", "none"], default="int8",
                        help="the model the data comes from (default int8: the runtime default)")
    add_threads_argument(parser)
    parser.add_argument("--out", default=None, help="where to save (default: the headstart cache)")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--collect-only", action="store_true", help="collect (and cache) the data, train nothing")
    parser.add_argument("--system-prompt", default=None,
                        help="the system prompt of the training conversations (default: LLMConfig's; the network "
                             "drafts best after the prompt it was trained with)")
    parser.add_argument("--json", action="store_true")


def run_eagle_from_args(args: argparse.Namespace) -> int:
    from headstart.training.train_eagle import TrainEagleOptions, main

    return main(options_from_args(TrainEagleOptions, args))
