"""Sequence repetition (seed 003): repetition and pooling indices, padding between copies, App. A.3.1's middle
layers, early exit, first-sub-token labels, and the bad inputs the issue names."""
import dataclasses

import pytest
import torch

from helpers import masks as M
from helpers import models
from helpers import repetition as R

PAD = 2


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    return model.get_decoder().eval(), tokenizer


def padded_pair(side: str = "right"):
    """A 4-token row padded to the 7 tokens of its batch-mate, on the given side."""
    generator = torch.Generator().manual_seed(0)
    short, long = torch.randint(10, 2000, (4,), generator=generator), torch.randint(10, 2000, (7,), generator=generator)
    ids, mask = torch.full((2, 7), PAD), torch.zeros(2, 7, dtype=torch.long)
    where = slice(0, 4) if side == "right" else slice(3, 7)
    ids[0, where], mask[0, where] = short, 1
    ids[1], mask[1] = long, 1
    return ids, mask, short, where


# --------------------------------------------------------------------------- indices

@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("r", [0, 1, 2, 4])
def test_packed_repetition_puts_no_pad_between_copies_and_pools_the_last_copy(side, r):
    ids, mask, short, where = padded_pair(side)
    k = r + 1
    batch = R.repeat_batch(ids, mask, r, "packed")
    assert batch.input_ids.shape == (2, k * 7)
    # §2: s^k is the sequence k times; App. A.3.2 alternative: no pad tokens between the copies.
    assert batch.input_ids[0, :4 * k].tolist() == short.tolist() * k
    assert (batch.input_ids[0, 4 * k:] == PAD).all() and (batch.padding_mask[0, 4 * k:] == 0).all()
    # Position ids continue across the copies.
    assert batch.position_ids[0, :4 * k].tolist() == list(range(4 * k))
    assert batch.position_ids[1].tolist() == list(range(7 * k))
    # Pooling: each real position reads the last copy, whose ids are the original ids.
    real = torch.arange(7)[where]
    last = batch.last_copy[0, real]
    assert last.tolist() == [r * 4 + j for j in range(4)]
    assert batch.input_ids[0, last].tolist() == ids[0, real].tolist()
    assert batch.last_copy[1].tolist() == [r * 7 + j for j in range(7)]


def test_masked_repetition_repeats_pads_hides_them_and_skips_them_in_positions():
    ids, mask, _, _ = padded_pair("right")
    batch = R.repeat_batch(ids, mask, 2, "masked")
    assert batch.input_ids.tolist() == ids.repeat(1, 3).tolist()  # App. A.3.2: the padded tensor concatenated k times
    assert batch.padding_mask.tolist() == mask.repeat(1, 3).tolist()
    assert batch.position_ids[0, [0, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 17]].tolist() == list(range(12))
    assert batch.last_copy[0].tolist() == list(range(14, 21))


def test_unmasked_policy_is_the_public_implementation():
    ids, mask, _, _ = padded_pair("right")
    batch = R.repeat_batch(ids, mask, 1, "unmasked")
    assert batch.padding_mask.bool().all()
    assert batch.position_ids[0].tolist() == list(range(14))


# --------------------------------------------------------------------------- padding, on a decoder

@pytest.mark.parametrize("policy", ["packed", "masked"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("r", [1, 2])
def test_padding_between_copies_leaves_the_real_tokens_exactly_as_without_padding(tiny, policy, side, r):
    body, _ = tiny
    ids, mask, short, where = padded_pair(side)
    batched, _ = R.sr_features(body, ids, mask, R.Strategy("sr", r), policy)
    alone, _ = R.sr_features(body, short[None], None, R.Strategy("sr", r), policy)
    torch.testing.assert_close(batched[0, where], alone[0], atol=1e-5, rtol=1e-5)


def test_visible_pads_between_copies_change_a_row_with_its_batch_mates(tiny):
    body, _ = tiny
    ids, mask, short, where = padded_pair("right")
    batched, _ = R.sr_features(body, ids, mask, R.Strategy("sr", 1), "unmasked")
    alone, _ = R.sr_features(body, short[None], None, R.Strategy("sr", 1), "unmasked")
    assert (batched[0, where] - alone[0]).abs().max() > 1e-3


# --------------------------------------------------------------------------- §2: SR makes the last copy bidirectional

@torch.no_grad()
def moved_first_token(body, strategy, length=6):
    """How much the first token's embedding moves when the last token of the sentence changes."""
    ids = torch.randint(10, 2000, (1, length), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[0, -1] = 7
    before, _ = R.sr_features(body, ids, None, strategy)
    after, _ = R.sr_features(body, changed, None, strategy)
    return float((before[0, 0] - after[0, 0]).abs().max())


def test_repetition_lets_the_first_token_see_the_last_one(tiny):
    body, _ = tiny
    assert moved_first_token(body, R.Strategy("sr", 0)) == 0.0  # causal: no right context
    for r in (1, 2):
        assert moved_first_token(body, R.Strategy("sr", r)) > 1e-4  # block A_k1 is full (§2)
    assert moved_first_token(body, R.Strategy("full")) > 1e-4
    assert moved_first_token(body, R.Strategy("middle")) > 1e-4


# --------------------------------------------------------------------------- App. A.3.1 middle layers

@pytest.mark.parametrize("depth, lower, upper", [(28, 9, 18), (32, 10, 21), (31, 10, 20), (33, 11, 21)])
def test_middle_unmasking_follows_appendix_a31(depth, lower, upper):
    # N_u = floor(N/3)_even; lb = N/2 - 1 - N_u/2; ub = N/2 + N_u/2: 28 -> N_u = 8, 32 -> N_u = 10; for odd N the
    # bounds are half-integers (33: lb = 10.5, ub = 21.5), so layers 11..21, not N // 2's 10..21.
    assert M.middle_unmasked_layers(depth) == (lower, upper)
    layer_masks = R.strategy_masks(R.Strategy("middle"), depth)["layer_masks"]
    assert [mask is M.bidirectional for mask in layer_masks] == [lower <= i <= upper for i in range(depth)]
    assert all(mask is M.causal for i, mask in enumerate(layer_masks) if not lower <= i <= upper)
    assert R.strategy_masks(R.Strategy("sr", 3), depth) == {"mask": M.causal}
    assert R.strategy_masks(R.Strategy("full"), depth) == {"mask": M.bidirectional}


# --------------------------------------------------------------------------- §3.5 early exit

def test_middle_unmasking_matches_the_authors_float_bounds_at_every_depth():
    for depth in range(3, 65):  # the public code: mask_cutoff = (N / 3) // 2 * 2; unmask lb <= i <= ub in floats
        cutoff = (depth / 3) // 2 * 2
        lb, ub = depth / 2 - 1 - cutoff / 2, depth / 2 + cutoff / 2
        assert [lb <= i <= ub for i in range(depth)] == [m is M.bidirectional for m in M.middle_unmasking(depth)]


def test_exit_layers_are_the_papers_for_32_layers_and_scale_with_depth():
    assert R.exit_layers(32) == (9, 14, 19, 24)
    assert R.exit_layers(30) == (9, 13, 18, 23)  # 8, 12, 17, 22 of 30 layers kept (8, 13, 18, 23 of 32)
    assert all(2 <= layer < 4 for layer in R.exit_layers(4))
    assert R.scaled_exit_layer(19, 32) == 19 and R.scaled_exit_layer(19, 30) == 18


def test_early_exit_runs_the_layers_before_layer_l(tiny):
    # §3.5 "up to, but not including, layer L": exit@L reads the state after L - 1 layers, as the authors'
    # EARLY_EXIT_LAYERS=(8 13 18 23) do for L = 9, 14, 19, 24.
    body, _ = tiny
    ids = torch.randint(10, 2000, (1, 5), generator=torch.Generator().manual_seed(2))
    full = body(input_ids=ids, output_hidden_states=True, use_cache=False)
    for layer in (2, 3, 4):
        with R.early_exit(body, layer):
            assert len(models.decoder_layers(body)) == layer - 1 and body.config.num_hidden_layers == layer - 1
            cut, _ = R.sr_features(body, ids, None, R.Strategy("sr", 0))
        torch.testing.assert_close(cut[0], body.norm(full.hidden_states[layer - 1])[0], atol=1e-5, rtol=1e-5)
    assert len(models.decoder_layers(body)) == 4 and body.config.num_hidden_layers == 4  # restored
    with pytest.raises(ValueError, match="exit_layer=1"):
        R.check_exit_layer(1, 4)


# --------------------------------------------------------------------------- labels on first sub-tokens

def test_labels_sit_on_the_first_sub_token_of_each_word_only(tiny):
    _, tokenizer = tiny
    words = ["Elizabeth", "walked", "to", "Netherfield", ",", "Hertfordshire", "."]
    tags = ["B-PER", "O", "O", "B-LOC", "O", "B-LOC", "O"]
    ids, starts = R.encode_words(tokenizer, words)
    assert len(starts) == len(words) and starts == sorted(set(starts))
    for word, start, end in zip(words, starts, starts[1:] + [len(ids)]):
        assert tokenizer.decode(ids[start:end]).strip() == word  # the word's sub-tokens run from its start
    assert any(end - start > 1 for start, end in zip(starts, starts[1:]))  # some word really is split
    sentence = R.EncodedSentence(tuple(ids), tuple(starts), tuple(words), tuple(tags))
    labels = R.label_vocabulary([tags])
    short = R.EncodedSentence(tuple(ids[:2]), (0,), ("Elizabeth",), ("B-PER",))
    batch = R.collate([sentence, short], labels, PAD)
    row = batch["labels"][0]
    assert [labels[int(row[s])] for s in starts] == tags
    others = [i for i in range(len(ids)) if i not in starts]
    assert (row[others] == R.IGNORE_INDEX).all()
    assert (batch["labels"][1, 1:] == R.IGNORE_INDEX).all() and (batch["padding_mask"][1, 2:] == 0).all()


def test_truncation_drops_words_past_max_tokens(tiny):
    _, tokenizer = tiny
    ids, starts = R.encode_words(tokenizer, ["Netherfield"] * 10, max_tokens=8)
    assert len(ids) <= 8 and all(start < len(ids) for start in starts) and len(starts) < 10


def test_label_vocabulary_and_silver_types():
    assert R.label_vocabulary([["B-PER", "I-PER", "O"], ["B-LOC"]]) == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    assert R.conll_types(["B-PERSON", "I-PERSON", "B-DATE", "B-GPE", "B-NORP"]) == ("B-PER", "I-PER", "O", "B-LOC", "B-MISC")


# --------------------------------------------------------------------------- §2 block shares

def test_block_mass_shares_count_mass_in_full_blocks():
    n, r = 3, 2
    length = (r + 1) * n
    copies = torch.arange(length) // n
    on_diagonal = torch.zeros(1, 1, length, length)
    on_first_copy = torch.zeros(1, 1, length, length)
    for q in range(length):
        on_diagonal[0, 0, q, copies[q] * n] = 1.0
        on_first_copy[0, 0, q, q % n if copies[q] > 0 else 0] = 1.0
    assert float(R.block_mass_shares([on_diagonal], n, r)[0]) == 0.0
    assert float(R.block_mass_shares([on_first_copy], n, r)[0]) == pytest.approx(2 / 3)  # copies 2 and 3 of 3
    assert float(R.block_mass_shares([on_first_copy], n, r, last_copy=True)[0]) == 1.0


def test_block_shares_without_the_sink_drop_key_zero():
    # Half of every row on key 0 (the sink), the rest on the query itself (a diagonal block).
    n, r = 3, 1
    length = (r + 1) * n
    sink = torch.zeros(1, 1, length, length)
    for q in range(length):
        sink[0, 0, q, 0] += 0.5
        sink[0, 0, q, q] += 0.5
    # copy 1's queries put 0.5 in a full block (key 0); copy 0's put none: 0.25 overall, all of it the sink
    assert float(R.block_mass_shares([sink], n, r)[0]) == pytest.approx(0.25)
    assert float(R.block_mass_shares([sink], n, r, exclude_sink=True)[0]) == 0.0
    assert float(R.block_mass_shares([sink], n, r, last_copy=True)[0]) == pytest.approx(0.5)
    # a key-1 full-block share survives the exclusion: query 4 puts 0.25 on key 1 and 0.25 on key 0
    sink[0, 0, 4] = torch.tensor([0.25, 0.25, 0.0, 0.0, 0.5, 0.0])
    expected = (1 / 3) / 5  # query 4: 0.25 / 0.75; the other four kept queries (0 is dropped): 0
    assert float(R.block_mass_shares([sink], n, r, exclude_sink=True)[0]) == pytest.approx(expected)


def test_block_share_views_measure_a_real_model(tiny):
    body, _ = tiny
    model = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0,
                              attn_implementation="eager")[0]
    sentences = [torch.randint(10, 2000, (5,), generator=torch.Generator().manual_seed(s)) for s in range(3)]
    views = R.measure_block_share_views(model, sentences, [0, 1, 2], progress=False)
    assert set(views) == set(R.SHARE_VIEWS) and views["last copy"][1].shape == (3, model.config.num_hidden_layers)
    assert all(float(views[view][0].abs().max()) == 0.0 for view in R.SHARE_VIEWS)  # r = 0 has no full block
    table = R.block_share_views_table(views, resamples=50)
    assert list(table.index) == [1, 2] and table.loc[1, "analytic (k-1)/(k+1) of blocks"] == pytest.approx(1 / 3)
    assert "formula 0.33" in R.describe_block_share_views(table)


# --------------------------------------------------------------------------- bad inputs

def test_bad_inputs_raise_clear_errors(tiny):
    body, _ = tiny
    ids = torch.randint(10, 2000, (1, 700))
    with pytest.raises(ValueError, match="r=-1"):
        R.Strategy("sr", -1)
    with pytest.raises(ValueError, match="r=-2"):
        R.repeat_batch(ids, None, -2)
    with pytest.raises(ValueError, match="r=2 with kind='full'"):
        R.Strategy("full", 2)
    with pytest.raises(ValueError, match="exit_layer=6 is out of range for a model with 4 layers"):
        R.check_exit_layer(6, 4)
    with pytest.raises(ValueError, match="exit_layer=0"):
        R.Strategy("sr", 1, 0)
    with pytest.raises(ValueError, match="exit_layer=9"):
        with R.early_exit(body, 9):
            pass
    with pytest.raises(ValueError, match="max_position_embeddings=2048"):  # k x n = 3 x 700 = 2100
        R.sr_features(body, ids, None, R.Strategy("sr", 2))
    with pytest.raises(ValueError, match="policy='loose'"):
        R.repeat_batch(ids, None, 1, "loose")
    with pytest.raises(ValueError, match="r=-1"):
        dataclasses.replace(R.SETTINGS["cpu"], repeats=(0, -1))


# --------------------------------------------------------------------------- settings and training

def test_settings_cover_every_profile_and_the_paper_entry_holds_appendix_a4():
    assert set(R.SETTINGS) == {"smoke", "cpu", "gpu", "paper"}
    paper = R.SETTINGS["paper"]
    assert (paper.lora_r, paper.lora_alpha, paper.lora_dropout) == (16, 16, 0.1)
    assert (paper.lr, paper.weight_decay, paper.batch_size * paper.grad_accum) == (2e-4, 0.05, 32)
    assert paper.seeds == (5, 29, 42, 81, 123) and paper.max_tokens == 256 and paper.qlora
    assert paper.repeats == (0, 1, 2, 4, 8) and set(paper.baselines) == {"middle", "full"}
    assert paper.dataset == "conll2003" and R.SETTINGS["cpu"].dataset == "silver"


def toy_data(tokenizer):
    words = [("Elizabeth", "walked", "home"), ("Darcy", "rode", "to", "London"), ("Jane", "smiled")]
    tags = [("B-PER", "O", "O"), ("B-PER", "O", "O", "B-LOC"), ("B-PER", "O")]
    sentences = [R.TaggedSentence(w, t) for w, t in zip(words, tags)]
    encoded = R.encode_sentences(tokenizer, sentences, 32)
    return R.TaggingData("ner", R.label_vocabulary(tags), encoded, encoded[:2], encoded, PAD)


def test_training_moves_only_lora_and_the_head_and_finished_runs_are_read_back(tmp_path, tiny, monkeypatch):
    _, tokenizer = tiny
    settings = dataclasses.replace(R.SETTINGS["smoke"], steps=3, batch_size=2, lora_r=2, lora_alpha=2, lr=1e-2,
                                   eval_every=0)
    built = {}
    original = R.build_tagger

    def remember(*args, **kwargs):
        tagger, tok = original(*args, **kwargs)
        built["before"] = {name: p.detach().clone() for name, p in tagger.named_parameters()}
        built["tagger"] = tagger
        return tagger, tok

    monkeypatch.setattr(R, "build_tagger", remember)
    tagging = toy_data(tokenizer)
    result = R.train_tagger(tagging, R.Strategy("sr", 1), settings, model_name="tiny-random:llama", seed=0,
                            run_dir=tmp_path / "run", progress=False)
    after = {name: p.detach() for name, p in built["tagger"].named_parameters()}
    moved = {name for name, before in built["before"].items() if not torch.equal(before, after[name])}
    assert all("lora_" in name or name.startswith("head.") for name in moved)  # the decoder itself stays frozen
    assert any("lora_B" in name for name in moved) and {"head.weight", "head.bias"} <= moved
    built.clear()
    again = R.train_tagger(tagging, R.Strategy("sr", 1), settings, model_name="tiny-random:llama", seed=0,
                           run_dir=tmp_path / "run", progress=False)
    assert "tagger" not in built and again == result  # read back, not retrained
    reloaded = R.load_trained_tagger(result, settings)
    predicted = R.predict_tags(reloaded, tagging.test, tagging.labels, tagging.pad_id)
    assert R.tagging_f1(reloaded, tagging.test, tagging.labels, tagging.pad_id) == result["test_f1"]
    assert [len(p) for p in predicted] == [len(s.words) for s in tagging.test]


def test_summary_is_mean_and_ci_over_seeds_and_table1_picks_the_best_r():
    import pandas as pd

    from helpers import metrics

    rows = []
    validation = {("sr", 0): 0.5, ("sr", 1): 0.8, ("sr", 2): 0.7, ("middle", 0): 0.6, ("full", 0): 0.6}
    for seed, scores in enumerate([(0.50, 0.70, 0.74, 0.60, 0.65), (0.54, 0.72, 0.70, 0.62, 0.61)]):
        for (kind, r), score in zip([("sr", 0), ("sr", 1), ("sr", 2), ("middle", 0), ("full", 0)], scores):
            label = R.Strategy(kind, r).label
            rows.append({"task": "ner", "strategy": label, "kind": kind, "r": r, "exit_layer": None, "seed": seed,
                         "test_f1": score, "validation_f1": validation[kind, r]})
    summary = R.summarize(pd.DataFrame(rows))
    sr1 = summary[(summary.kind == "sr") & (summary.r == 1)].iloc[0]
    assert (sr1.f1, sr1.ci95) == pytest.approx(metrics.mean_ci95([70.0, 72.0]))
    # test means favour r = 2 (72.0 against 71.0), validation favours r = 1: the test split never picks
    assert R.best_sr_r(summary, "ner") == 1
    table = R.table1(summary)
    assert list(table.method) == ["SR (r=1)", "middle unmasking", "full unmasking"]
    one_seed = R.summarize(pd.DataFrame(rows[:5]))
    assert one_seed.ci95.isna().all() and R.f1_text(70.0, float("nan"), 1) == "70.0 ± n/a (1 seed)"
    assert table[R.PAPER_TABLE1_COLUMN].tolist() == pytest.approx([92.92, 92.16, 92.30], abs=0.01)


def test_one_seed_builds_one_tagger_and_another_seed_another():
    settings = dataclasses.replace(R.SETTINGS["smoke"], lora_r=2, lora_alpha=2)
    build = lambda seed: R.build_tagger("tiny-random:llama", 3, R.Strategy("sr", 1), settings, seed=seed,  # noqa: E731
                                        device="cpu")[0]
    trainable = lambda tagger: {name: p.detach().clone() for name, p in tagger.named_parameters()  # noqa: E731
                                if p.requires_grad}
    torch.manual_seed(123)  # whatever ran before must not matter
    first = trainable(build(5))
    torch.manual_seed(456)
    again, other = trainable(build(5)), trainable(build(6))
    assert any("lora_A" in name for name in first) and "head.weight" in first
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert all(not torch.equal(first[name], other[name]) for name in first if "lora_A" in name or name == "head.weight")


def test_the_head_reads_its_input_through_dropout_in_training_only(tiny):
    _, tokenizer = tiny
    settings = dataclasses.replace(R.SETTINGS["smoke"], lora_r=2, lora_alpha=2, classifier_dropout=0.5)
    tagger, _ = R.build_tagger("tiny-random:llama", 3, R.Strategy("sr", 0), settings, seed=0, device="cpu")
    assert tagger.dropout.p == 0.5 and R.SETTINGS["paper"].classifier_dropout == 0.1
    ids = torch.randint(10, 2000, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    tagger.eval()
    torch.testing.assert_close(tagger(ids, mask)["logits"], tagger(ids, mask)["logits"])
    tagger.train()
    assert not torch.equal(tagger(ids, mask)["logits"], tagger(ids, mask)["logits"])


def test_f1_comparison_pairs_seeds_and_sentences():
    import pandas as pd

    tags = [("B-NP", "I-NP", "O"), ("O", "B-NP"), ("B-NP", "O", "B-NP")]
    sentences = [R.EncodedSentence((1,) * len(t), tuple(range(len(t))), ("w",) * len(t), t) for t in tags]
    tagging = R.TaggingData("chunks", ("O", "B-NP", "I-NP"), sentences, sentences, sentences, PAD)
    perfect = [list(t) for t in tags]
    blind = [["O"] * len(t) for t in tags]
    rows = [{"task": "chunks", "kind": "sr", "r": r, "exit_layer": None, "seed": seed,
             "test_predictions": perfect if r == 1 else blind} for r in (0, 1) for seed in (5, 29)]
    found = R.f1_comparison(pd.DataFrame(rows), tagging, dict(kind="sr", r=1), dict(kind="sr", r=0), resamples=100)
    assert (found["value"], found["low"], found["high"]) == (100.0, 100.0, 100.0)
    assert found["seeds"] == 2 and found["sentences"] == 3
    alone = R.f1_comparison(pd.DataFrame(rows), tagging, dict(kind="sr", r=1), resamples=100)
    assert alone["value"] == 100.0
    with pytest.raises(ValueError, match="no seed has runs of both"):
        R.f1_comparison(pd.DataFrame(rows), tagging, dict(kind="sr", r=1), dict(kind="middle"))


def test_the_probe_scores_every_layer_of_the_frozen_decoder(tiny):
    body, tokenizer = tiny
    words = [("Elizabeth", "walked", "home"), ("the", "tall", "man", "rode"), ("Jane", "smiled")] * 4
    tags = [("B-NP", "O", "B-NP"), ("B-NP", "I-NP", "I-NP", "O"), ("B-NP", "O")] * 4
    encoded = R.encode_sentences(tokenizer, [R.TaggedSentence(w, t) for w, t in zip(words, tags)], 32)
    tagging = R.TaggingData("chunks", R.label_vocabulary(tags), encoded, encoded[:3], encoded[:6], PAD)
    settings = dataclasses.replace(R.SETTINGS["smoke"], probe_max_iter=50)
    features = R.layer_features(body, tagging.test, R.Strategy("sr", 1), PAD)
    assert features.shape == (body.config.num_hidden_layers + 1, sum(len(t) for t in tags[:6]), body.config.hidden_size)
    probe = R.probe_layers(body, tagging, [0, 1], settings, progress=False)
    assert set(probe) == {0, 1} and len(probe[0]) == body.config.num_hidden_layers + 1
    assert all(len(counts) == 6 for counts in probe[1])
    table = R.probe_table(probe, resamples=20)
    assert len(table) == 2 * (body.config.num_hidden_layers + 1) and (table.low <= table.f1).all()


def test_parallel_training_processes_give_the_results_of_one_process(tmp_path, tiny, monkeypatch):
    from helpers import paths

    _, tokenizer = tiny
    tagging = toy_data(tokenizer)
    base = dataclasses.replace(R.SETTINGS["smoke"], steps=2, batch_size=2, lora_r=2, lora_alpha=2, eval_every=1)
    found = {}
    for workers in (1, 2):
        monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / f"w{workers}")
        settings = dataclasses.replace(base, workers=workers, threads=1)
        table = R.run_experiments({"ner": tagging}, [R.Strategy("sr", 0), R.Strategy("sr", 1)], (0, 1), settings,
                                  model_name="tiny-random:llama", run_prefix="t", progress=False)
        found[workers] = table[["strategy", "seed", "validation_f1", "test_f1", "test_predictions"]].to_dict("records")
    assert found[1] == found[2] and len(found[1]) == 4
