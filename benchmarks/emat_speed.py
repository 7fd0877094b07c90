"""EMAT top-k over the extended matrix against a plain masked-LM forward, per sentence (issue 7: ≤ 1.1×).

Both paths run the same frozen MNTP masked LM on the same masked sentences, batch 1:
- plain MLM: forward, the masked LM's own output matrix, top-k (single-token completion, Figure 1 (1));
- EMAT: forward, the output matrix extended by one row per phrase, top-k (Figure 1 (2), §4.1).

The two are timed interleaved (A, B, A, B, ...) in one process, so load on the machine hits both alike;
the script prints medians and their ratio, for our phrase vocabulary and for a paper-sized one (93K
phrases, §3). The GRU decoder's beam search is timed too, for Table 3's EMAT/RNN inference-time ratio.

    python benchmarks/emat_speed.py [--sentences 40] [--k 10] [--tiny]

``--tiny`` uses the tiny random Llama (checks the script itself); the default is the cpu profile's
SmolLM2-135M with notebook 02's MNTP adapter (trained briefly here if it is missing).
"""
from __future__ import annotations

import argparse

import torch


def masked_sentences(count: int) -> list[str]:
    """Held-out Austen sentences with their fourth word masked."""
    from helpers import data, mtc

    sentences = []
    for sentence in data.load_sentences("austen", "validation", limit=4 * count):
        words = mtc.clean_sentence(sentence.text).split()
        if len(words) >= 6:
            sentences.append(" ".join(words[:3] + [mtc.MASK_MARKER] + words[4:]))
        if len(sentences) == count:
            break
    return sentences


def main() -> None:
    from helpers import metrics, mtc, profiles

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="tiny random Llama (smoke check of the script)")
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = profiles.get("smoke" if args.tiny else "cpu")
    settings = mtc.SETTINGS[cfg.name]
    mlm = mtc.load_masked_lm(cfg, settings)
    sentences = masked_sentences(args.sentences)
    try:
        vocabulary = mtc.build_dataset(cfg.corpus, settings, mlm.tokenizer, cfg.model_name, progress=False).vocabulary
    except Exception as error:  # no spaCy/corpus: a synthetic vocabulary of two-word phrases
        print(f"(no cached vocabulary: {error}; using synthetic phrases)")
        vocabulary = [f"{a} {b}" for a in ("old", "young", "dear", "poor") for b in ("house", "friend", "sister", "letter")]
    ours = mtc.build_emat(mlm, vocabulary).eval()
    hidden = mlm.hidden_size
    paper_sized = mtc.ExtendedMatrixDecoder(mlm.output_matrix, torch.randn(93_000, hidden) * 0.02, mlm.token_strings,
                                            [f"phrase {i}" for i in range(93_000)]).to(mlm.device).eval()
    gru = mtc.build_gru(mlm, settings).eval()

    @torch.no_grad()
    def plain(sentence):
        features, _ = mlm.features([sentence])
        return mtc.rank_candidates(mlm.token_logits(features).softmax(-1), mlm.token_strings, args.k)

    @torch.no_grad()
    def emat(sentence, decoder=ours):
        features, _ = mlm.features([sentence])
        return decoder.complete(features, args.k)

    @torch.no_grad()
    def beam(sentence):
        features, previous = mlm.features([sentence])
        return gru.complete(features, previous, mlm.tokenizer, args.k, settings.beam_size, max_steps=5)

    forward = lambda sentence: mlm.features([sentence])  # noqa: E731
    print(f"model {cfg.model_name}; {len(sentences)} sentences x 2 rounds, batch 1, k = {args.k}, "
          f"torch threads {torch.get_num_threads()}")
    jobs = {"forward": forward, "plain MLM top-k": plain, f"EMAT top-k ({len(ours.phrases)} new rows)": emat,
            "EMAT top-k (93,000 new rows)": lambda s: emat(s, paper_sized)}
    medians = metrics.interleaved_timings(jobs, sentences, rounds=2, best=False)
    names = list(jobs)
    print(f"  {'':<34} {'median':>8} {'best':>8} ms / sentence")
    bests = metrics.interleaved_timings(jobs, sentences, rounds=3, best=True)
    for name in names:
        print(f"  {name:<34} {medians[name]:8.2f} {bests[name]:8.2f}")
    for label, times in (("median", medians), ("best", bests)):
        print(f"[{label}] EMAT ({len(ours.phrases)} rows) / plain MLM: {times[names[2]] / times[names[1]]:.3f}x (goal <= 1.1x); "
              f"EMAT (93,000 rows) / plain MLM: {times[names[3]] / times[names[1]]:.3f}x; "
              f"plain MLM top-k / bare forward: {times[names[1]] / times[names[0]]:.3f}x")
    gru_times = metrics.interleaved_timings({"EMAT": emat, "GRU beam": beam}, sentences[: max(4, len(sentences) // 4)],
                                           rounds=1, best=False)
    print(f"GRU beam search (beam {settings.beam_size}, <= 5 steps) / EMAT: {gru_times['GRU beam'] / gru_times['EMAT']:.2f}x "
          f"({gru_times['GRU beam']:.1f} vs {gru_times['EMAT']:.1f} ms; paper on a T4: 44 / 15 = 2.9x)")


if __name__ == "__main__":
    main()
