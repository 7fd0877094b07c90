"""EMAT top-k over the extended matrix against the bare masked-LM forward and the single-token path, per sentence.

All paths run the same frozen masked LM (``helpers.masked_lm``; the cpu profile's MNTP SmolLM2) on the same
masked sentences, batch 1:
- bare forward: the contextual embedding at the mask, nothing else;
- single-token path: forward, the masked LM's own output matrix, top-k (Figure 1 (1));
- EMAT: forward, the output matrix extended by one row per phrase, top-k (Figure 1 (2), §4.1), for our phrase
  vocabulary and for a paper-sized one (93K random new rows, §3; ``experiment.paper_sized_emat``, which notebook 06
  times too), where the extra matrix product is no longer small.

The paths are timed interleaved (A, B, C, ... per sentence) in one process, so load on the machine hits them alike;
the script prints medians and the ratios to the bare forward and to the single-token path. The GRU decoder is
timed with trained heads in notebook 06 (``helpers.papers.emat.experiment.measure_latency``), not here.

    python benchmarks/emat_speed.py [--sentences 100] [--k 10] [--tiny]

``--tiny`` uses the tiny random Llama (checks the script itself); the default is the cpu profile's
SmolLM2-135M with notebook 02's MNTP adapter (trained briefly here if it is missing).
"""
from __future__ import annotations

import argparse

import torch


def masked_sentences(count: int) -> list[str]:
    """Held-out Austen sentences with their fourth word masked."""
    from helpers import data
    from helpers.papers.emat import experiment_data

    sentences = []
    for sentence in data.load_sentences("austen", "validation", limit=4 * count):
        words = experiment_data.clean_sentence(sentence.text).split()
        if len(words) >= 6:
            sentences.append(" ".join(words[:3] + [experiment_data.MASK_MARKER] + words[4:]))
        if len(sentences) == count:
            break
    return sentences


def main() -> None:
    from helpers import masked_lm, metrics, profiles
    from helpers.papers.emat import experiment, experiment_data, mechanism, report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="tiny random Llama (smoke check of the script)")
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = profiles.get("smoke" if args.tiny else "cpu")
    settings = profiles.settings_for("emat", cfg)
    mlm = masked_lm.load_masked_lm(cfg, settings.masked_lm or "mntp", context_tokens=settings.context_tokens)
    sentences = masked_sentences(args.sentences)
    try:
        vocabulary = experiment_data.build_dataset(cfg.corpus, settings.data, mlm.tokenizer, cfg.model_name,
                                                   progress=False).vocabulary
    except Exception as error:  # no spaCy/corpus: a synthetic vocabulary of two-word phrases
        print(f"(no cached vocabulary: {error}; using synthetic phrases)")
        vocabulary = [f"{a} {b}" for a in ("old", "young", "dear", "poor") for b in ("house", "friend", "sister", "letter")]
    ours = mechanism.build_emat(mlm, vocabulary).eval()
    paper_sized = experiment.paper_sized_emat(mlm, report.PAPER_VOCABULARY["phrases"])

    @torch.no_grad()
    def single_token(sentence):
        features, _ = mlm.features([sentence])
        return mechanism.rank_candidates(mlm.token_logits(features).softmax(-1), mlm.token_strings, args.k)

    @torch.no_grad()
    def emat(sentence, decoder=ours):
        features, _ = mlm.features([sentence])
        return decoder.complete(features, args.k)

    forward = lambda sentence: mlm.features([sentence])  # noqa: E731
    print(f"model {mlm.name}; {len(sentences)} sentences, batch 1, k = {args.k}, torch threads {torch.get_num_threads()}")
    jobs = {"bare forward": forward, "single-token path": single_token,
            f"EMAT ({len(ours.phrases)} new rows)": emat,
            f"EMAT ({len(paper_sized.phrases):,} new rows)": lambda s: emat(s, paper_sized)}
    for label, best in (("median of 2 rounds", False), ("best of 3 rounds", True)):
        times = metrics.interleaved_timings(jobs, sentences, rounds=2 if not best else 3, best=best)
        print(f"[{label}]")
        for name, value in times.items():
            print(f"  {name:<26} {value:8.2f} ms   {value / times['bare forward']:6.3f}x forward   "
                  f"{value / times['single-token path']:6.3f}x single-token path")


if __name__ == "__main__":
    main()
