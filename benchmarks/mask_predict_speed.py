"""Mask-predict against autoregressive decoding: tokens/s at batch 1 (OpenLTG Fig. 5, §6.1).

Times ``helpers.papers.openltg.mechanism.mask_predict`` for T in {1, 8} (LTD, DSWA with Eq. 7 windows, masked-only
updates, the prompt computed once with a KV cache, masks rendered once per decode, the LM head only at the masked
positions) and ``helpers.papers.openltg.mechanism.autoregressive_generate`` (KV cache, same nucleus sampler) with the
same model, for target lengths 128 and 256 (``--lengths``), all in one run (the settings take turns), and prints
the ratios. ``--recompute`` also times T = 8 with the prompt recomputed at every iteration, to show what the
cache saves. The workbook's bar (``report.SPEEDUP_GOAL``): at T = 8, mask-predict reaches >= 5x the AR tokens/s at
length >= 128.

Models (``--weights``):
- ``embedded``: the embedded SmolLM2-135M (its trained weights make the nucleus realistic: with random
  weights every distribution is flat and the top-p sort dominates);
- ``random``: a randomly initialised model of the same shape (no assets needed);
- ``--encoder``: a random RoBERTa-base-shaped encoder for mask-predict against a random GPT-2-small-shaped
  decoder for AR, the paper's pairing in size (RoBERTa 125M against BART 140M).

    python benchmarks/mask_predict_speed.py                 # embedded SmolLM2, both backends' timing on this device
    python benchmarks/mask_predict_speed.py --threads 1     # one CPU thread (stable timings on a busy machine)
    python benchmarks/mask_predict_speed.py --tiny          # a seconds-long check of the script itself
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, RobertaConfig, RobertaForMaskedLM

from helpers.masked_lm import EncoderMLM, MNTPDecoder
from helpers import models
from helpers.papers.openltg import experiment, mechanism, report
from helpers.device import get_device

VOCAB = 49152
SMOLLM2_135M = dict(vocab_size=VOCAB, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, max_position_embeddings=8192, tie_word_embeddings=True, rope_theta=100000.0)
TINY = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True)


def build(args, device):
    """``(backend, causal_model, description)``."""
    torch.manual_seed(0)
    if args.encoder:
        shape = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072) if not args.tiny \
            else dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        encoder = RobertaForMaskedLM(RobertaConfig(vocab_size=50265, max_position_embeddings=514, pad_token_id=1,
                                                   attn_implementation="sdpa", **shape)).eval().to(device)
        gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=shape["hidden_size"], n_layer=shape["num_hidden_layers"],
                                          n_head=shape["num_attention_heads"], vocab_size=50257,
                                          attn_implementation="sdpa")).eval().to(device)
        return EncoderMLM(encoder, None, mask_id=50264, pad_id=1), gpt2, "random RoBERTa-base shape vs random GPT-2 shape"
    if args.weights == "embedded" and not args.tiny:
        model, _ = models.load_model("embedded:smollm2-135m", dtype="float32", device=device, load_in_4bit=False)
        description = "embedded SmolLM2-135M (bidirectional for mask-predict, causal with KV cache for AR)"
    else:
        model = LlamaForCausalLM(LlamaConfig(**(TINY if args.tiny else SMOLLM2_135M), attn_implementation="sdpa"))
        model = model.eval().to(device)
        description = f"random {'tiny' if args.tiny else 'SmolLM2-135M-shaped'} Llama"
    mask_id = 79  # "_", the MNTP mask token in the SmolLM2 vocabulary; any id works for timing
    return MNTPDecoder(model, None, mask_id, pad_id=0), model, description


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--iterations", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1, help="timing inputs (sampling seeds); ratios are medians over them")
    parser.add_argument("--recompute", action="store_true", help="also time T=8 with the prompt recomputed each iteration")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--weights", choices=["embedded", "random"], default="embedded")
    parser.add_argument("--encoder", action="store_true", help="RoBERTa-base shape for mask-predict, GPT-2 shape for AR")
    parser.add_argument("--no-dswa", action="store_true", help="time without DSWA (one mask for all layers)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes and lengths: checks the script in seconds")
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tiny:
        args.lengths, args.prompt_tokens = [8, 16], 4
    device = torch.device(args.device) if args.device else get_device()
    backend, causal, description = build(args, device)
    prompt = torch.randint(100, 1000, (args.prompt_tokens,), generator=torch.Generator().manual_seed(0))
    config = mechanism.DecodeConfig(dswa=not args.no_dswa)
    started = time.perf_counter()
    extra = {"recomputed prompt": replace(config, cache_prompt=False)} if args.recompute else None
    rows = experiment.decoding_speed(backend, causal, prompt, args.lengths, args.iterations, config, repeats=args.repeats,
                            seeds=range(args.seeds), extra=extra)
    label = experiment.device_label(device)
    print(f"\n{description}; {label}; prompt {args.prompt_tokens} tokens; batch 1; LTD β={config.beta}, top-p "
          f"{config.top_p}, DSWA {'off' if args.no_dswa else f'on (S_fix={config.fixed_window})'}, masked-only updates, "
          f"prompt cached; best of {args.repeats}, median of {args.seeds} seed(s); measured in one run of "
          f"{time.perf_counter() - started:.0f} s\n")
    import pandas as pd

    table = pd.DataFrame(rows).groupby(["method", "iterations", "length"])["tokens_per_s"].median().unstack("length")
    print("tokens/s (batch 1):")
    print(table.round(1).to_string())
    ratios = experiment.speed_ratios(rows)
    print("\nmask-predict tokens/s ÷ AR tokens/s (same run):")
    print(ratios.round(2).to_string())
    if args.recompute:
        print("\nwith the prompt recomputed every iteration, ÷ AR:")
        print(experiment.speed_ratios(rows, method="recomputed prompt").round(2).to_string())
    print("\n" + report.describe_speed(ratios, label))


if __name__ == "__main__":
    main()
