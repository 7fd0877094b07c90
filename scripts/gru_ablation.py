"""Notebook 06's GRU decoder with and without what §4.2 and the public decoder add, on the same cached features.

The notebook's GRU trains copies of the masked LM's embeddings and output head and is pre-trained as a language
model first (§4.2). This script trains the variant without both (frozen embeddings and head, no pre-training) with
the same settings otherwise, and prints a@1/10/50 on the whole test split for both, with the paired bootstrap
interval of the difference.

    WORKBOOK_PROFILE=cpu python scripts/gru_ablation.py
"""
from __future__ import annotations

import dataclasses

from helpers import masked_lm, profiles
from helpers.papers.emat import experiment, experiment_data, experiment_training


def main() -> None:
    cfg = profiles.current()
    settings = profiles.settings_for("emat")
    mlm = masked_lm.load_masked_lm(cfg, settings.masked_lm or "mntp", context_tokens=settings.context_tokens,
                                   progress=False)
    dataset = experiment_data.build_dataset(cfg.corpus, settings.data, mlm.tokenizer, mlm.name, progress=False)
    encoded = experiment_data.encode_splits(mlm, dataset)
    features = experiment_data.cached_features(mlm, dataset, encoded, settings.feature_batch_size, progress=False)
    variants = {"gru": settings.training,
                "gru_frozen": dataclasses.replace(settings.training, gru_train_embeddings=False, gru_pretrain_steps=0)}
    test = encoded["test"]
    results = {}
    for name, training in variants.items():
        gru, _, _ = experiment_training.train_gru(mlm, dataset, encoded, features, training, progress=False)
        completer = experiment.Completer(mlm, None, gru, None, settings,
                                         max_steps=experiment_training.max_generation_steps(encoded["train"]))
        ranked = completer.from_features("gru", features["test"], test.previous_tokens, max(settings.ks))
        results[name] = {"test": experiment.score_ranking(ranked, test.phrases, [len(ids) for ids in test.phrase_ids],
                                                          settings.ks, None)}
    intervals = experiment.accuracy_intervals(results, methods=list(results))
    for name, groups in intervals.items():
        print(name, {group: {k: f"{100 * v[0]:.1f} [{100 * v[1]:.1f}, {100 * v[2]:.1f}] n={v[3]}" for k, v in cells.items()}
                     for group, cells in groups.items()})
    for k in (1, 10, 50):
        value, low, high, count = experiment.paired_difference(results, "gru", "gru_frozen", k)
        print(f"a@{k}: public-style GRU minus frozen, no pre-training: {100 * value:+.1f} points "
              f"[{100 * low:+.1f}, {100 * high:+.1f}] (paired bootstrap, n = {count})")


if __name__ == "__main__":
    main()
