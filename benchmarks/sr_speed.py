"""SR Table 2 (seed 003, §4.5): inference speedup of sequence repetition with early exit, for every r x exit layer.

Times SR forward passes (token embeddings of the last copy) of the embedded SmolLM2-135M over the same held-out
Austen sentences for r in {0, 1, 2, 4, 8} and exit layers at the paper's relative depths (9/14/19/24 of 32) plus
the full model. All configurations run in one process, interleaved round by round; each time is a median over
rounds. Prints speedups over the base (r = 0, all layers) beside the paper's Mistral-7B table.

    python benchmarks/sr_speed.py [--sentences 32] [--batch 16] [--rounds 5] [--threads 2] [--tiny]
"""
from __future__ import annotations

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded:smollm2-135m", help="a workbook model name or Hub id")
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--tiny", action="store_true", help="check the script on the tiny random model")
    args = parser.parse_args()

    import pandas as pd

    from helpers import data, models
    from helpers.papers.sequence_repetition import experiment_data, experiment_table2, mechanism, report

    if args.threads:
        torch.set_num_threads(args.threads)
    name = "tiny-random:llama" if args.tiny else args.model
    model, tokenizer = models.load_model(name, dtype="float32" if not torch.cuda.is_available() else "bfloat16")
    body = models.decoder_body(model)
    depth = models.num_layers(body)
    texts = [s.text for s in data.load_sentences("austen", "test", min_words=5) if len(s.text.split()) <= args.max_words]
    tagged = [experiment_data.TaggedSentence(tuple(t.split()), ("O",) * len(t.split())) for t in texts[:args.sentences]]
    sentences = experiment_data.encode_sentences(tokenizer, tagged, 256)
    ids, mask = experiment_table2.speed_inputs(sentences, args.sentences, tokenizer.pad_token_id)
    exits = list(mechanism.exit_layers(depth)) + [None]
    speedups, seconds, _ = experiment_table2.measure_speedups(body, ids, mask, repeats=(0, 1, 2, 4, 8), exits=exits,
                                                           batch_size=args.batch, trials=args.rounds)
    tokens = int(mask.sum())
    print(f"\n{name} ({depth} layers), {len(sentences)} sentences ({tokens} tokens, padded to {ids.shape[1]}), "
          f"batch {args.batch}, median of {args.rounds} rounds, torch threads {torch.get_num_threads()}, "
          f"device {next(body.parameters()).device}")
    print("\nseconds per pass over the sentences:")
    print(seconds.round(3).to_string())
    print("\nspeedup over r = 0 with all layers (ours):")
    print(speedups.round(2).to_string())
    paper = report.paper_speedups_table()
    ours_at_paper_exits = pd.DataFrame({r: [speedups.loc[mechanism.scaled_exit_layer(layer, depth), r]
                                            for layer in paper.index] for r in paper.columns}, index=paper.index)
    print("\nours at the paper's relative exits | paper (Mistral-7B, 32 layers):")
    side = pd.concat({"ours": ours_at_paper_exits.round(2), "paper": paper}, axis=1)
    print(side.to_string())
    ratio = (ours_at_paper_exits / paper).round(2)
    print("\nours / paper:")
    print(ratio.to_string())


if __name__ == "__main__":
    main()
