"""Bad inputs at the public entry points: each gives a ValueError that names the argument (and its value).

One row per probe: wrong type, wrong range, empty, NaN/inf, wrong shape, wrong device. Rows cover every case
that has bitten before (beta=inf, temperature 0, forward_with_mask past the model's positions, all-padding batches,
float and bool spans, token_accuracy on mismatched lengths, load_model(""), top_p=True, an empty corpus,
seqeval_f1 on non-IOB2 tags, string arguments compared with numbers, whole_number(inf)). The tiny random
Llama keeps it fast.
"""
import functools
import math

import pytest
import torch

from helpers import attention, checks, data, masks, metrics, models, objectives, profiles
from helpers import adapters, mntp_adapter, training
from helpers.papers import openltg
from helpers.papers import sequence_repetition as repetition
from helpers.papers.emat import experiment_data as emat_data, mechanism as emat_mechanism
from helpers.masked_lm import MNTPDecoder
from helpers.papers.diffusion import mechanism as diffusion
from helpers.papers.lecture import figures as lecture_figures

INF, NAN = float("inf"), float("nan")


@functools.lru_cache(maxsize=1)
def tiny():
    return models.load_model(profiles.TINY_RANDOM_MODEL, device="cpu", dtype="float32", seed=0)


def model():
    return tiny()[0]


def tokenizer():
    return tiny()[1]


def ids(length=8, batch=1):
    return torch.randint(10, 1000, (batch, length), generator=torch.Generator().manual_seed(0))


def logits(rows=2, vocab=50):
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0))


def decoder():
    return MNTPDecoder(model(), tokenizer(), 5)


def generator():
    return torch.Generator().manual_seed(0)


def make_batch(**overrides):
    arguments = dict(objective="mntp", input_ids=ids(8, 2), padding_mask=torch.ones(2, 8, dtype=torch.long), mask_id=5,
                     vocab_size=2000, special_ids=[0, 1, 2], generator=generator())
    arguments.update(overrides)
    return objectives.make_batch(arguments.pop("objective"), arguments.pop("input_ids"), arguments.pop("padding_mask"),
                                 **arguments)


PROBES = [
    # checks
    ("whole_number inf", lambda: checks.whole_number(INF, "steps"), "steps", "inf"),
    ("whole_number -inf", lambda: checks.whole_number(-INF, "steps"), "steps", "-inf"),
    ("whole_number nan", lambda: checks.whole_number(NAN, "steps"), "steps", "nan"),
    ("whole_number string", lambda: checks.whole_number("3", "steps"), "steps", "'3'"),
    ("real_number string", lambda: checks.real_number("0.5", "ratio", low=0), "ratio", "'0.5'"),
    # models
    ("load_model empty name", lambda: models.load_model(""), "name", "''"),
    ("load_model whitespace name", lambda: models.load_model("  "), "name", None),
    ("load_model non-string name", lambda: models.load_model(5), "name", "5"),
    ("load_model unknown tiny", lambda: models.load_model("tiny-random:gpt"), "name", None),
    ("load_model bad dtype", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float99"), "dtype", None),
    ("load_model bad attention", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, attn_implementation="flash"),
     "attn_implementation", None),
    ("load_model bad device string", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, device="gpu0"), "device",
     "'gpu0'"),
    ("load_model cuda without cuda", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, device="cuda"), "device",
     None),
    ("load_model negative seed", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, seed=-1), "seed", "-1"),
    ("load_model string seed", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, seed="a"), "seed", "'a'"),
    ("load_model 4-bit string", lambda: models.load_model(profiles.TINY_RANDOM_MODEL, load_in_4bit="no"),
     "load_in_4bit", None),
    ("load_tokenizer empty", lambda: models.load_tokenizer(""), "name", "''"),
    ("tiny_random_config zero vocab", lambda: models.tiny_random_config(0), "vocab_size", "0"),
    # profiles
    ("profiles.get unknown", lambda: profiles.get("gpu2"), "profile", "'gpu2'"),
    ("settings_for unknown", lambda: profiles.settings_for("nope"), "paper", "'nope'"),
    ("parse_profile_name unknown", lambda: profiles.parse_profile_name("fast"), "WORKBOOK_PROFILE", "'fast'"),
    # data
    ("load_paragraphs unknown corpus", lambda: data.load_paragraphs("shakespeare"), "corpus", "'shakespeare'"),
    ("load_paragraphs unknown split", lambda: data.load_paragraphs("austen", "dev"), "split", "'dev'"),
    ("load_paragraphs zero limit", lambda: data.load_paragraphs("austen", "train", limit=0), "limit", "0"),
    ("load_paragraphs float limit", lambda: data.load_paragraphs("austen", "train", limit=2.5), "limit", "2.5"),
    ("load_sentences negative min_words", lambda: data.load_sentences("austen", "train", min_words=-1), "min_words",
     None),
    ("paragraphs_from_lines empty corpus", lambda: data.paragraphs_from_lines("Emma", []), "lines", None),
    ("paragraphs_from_lines only headings", lambda: data.paragraphs_from_lines("Emma", ["CHAPTER I", ""]), "lines",
     None),
    ("paragraphs_from_lines a string", lambda: data.paragraphs_from_lines("Emma", "CHAPTER I\nText"), "lines", None),
    ("split_paragraphs empty", lambda: data.split_paragraphs([]), "paragraphs", None),
    ("token_blocks no texts", lambda: data.token_blocks(tokenizer(), [], 16), "texts", None),
    ("token_blocks zero length", lambda: data.token_blocks(tokenizer(), ["a b c"], 0), "block_length", "0"),
    ("token_blocks too little text", lambda: data.token_blocks(tokenizer(), ["Hi."], 64), "texts", None),
    ("token_blocks bad max_blocks", lambda: data.token_blocks(tokenizer(), ["a b"], 4, max_blocks=0), "max_blocks",
     "0"),
    ("token_ids a string", lambda: data.token_ids(tokenizer(), "one text", 8), "texts", None),
    ("split_sentences non-string", lambda: data.split_sentences(5), "text", "5"),
    ("silver_labels empty", lambda: data.silver_labels([]), "texts", None),
    # masks
    ("magnet float span", lambda: masks.magnet([(0.5, 3)]), "spans[0]", "0.5"),
    ("magnet bool span", lambda: masks.magnet([(True, 3)]), "spans[0]", "True"),
    ("magnet string span", lambda: masks.magnet([("1", 3)]), "spans[0]", None),
    ("magnet one number", lambda: masks.magnet([(1,)]), "spans[0]", None),
    ("magnet not a pair", lambda: masks.magnet([5]), "spans[0]", "5"),
    ("magnet inf span", lambda: masks.magnet([(1, INF)]), "spans[0]", "inf"),
    ("sliding_window zero", lambda: masks.sliding_window(0), "window", "0"),
    ("sliding_window nan", lambda: masks.sliding_window(NAN), "window", "nan"),
    ("dswa_window_schedule string alpha", lambda: masks.dswa_window_schedule(4, 64, alpha_min="0.1"), "alpha_min",
     "'0.1'"),
    ("dswa_window_schedule nan alpha", lambda: masks.dswa_window_schedule(4, 64, alpha_max=NAN), "alpha_max", "nan"),
    ("dswa_window_schedule alpha order", lambda: masks.dswa_window_schedule(4, 64, 0.9, 0.1), "alpha_min", None),
    ("repetition zero n", lambda: masks.repetition(0, 1), "n", "0"),
    ("check_repeats negative", lambda: masks.check_repeats(-1), "r", "-1"),
    ("dense zero length", lambda: masks.dense(masks.causal, 0), "length", "0"),
    ("to_4d all padding", lambda: masks.to_4d(masks.causal, padding_mask=torch.zeros(1, 4)), "padding_mask", None),
    ("content_positions 1-D", lambda: masks.content_positions(torch.ones(4)), "padding_mask", None),
    ("check_layer out of range", lambda: masks.check_layer(4, 4), "layer", "4"),
    # attention
    ("forward_with_mask past max positions", lambda: attention.forward_with_mask(
        model(), ids(model().config.max_position_embeddings + 52), masks.causal), "input_ids", "2100"),
    ("forward_with_mask all padding", lambda: attention.forward_with_mask(
        model(), ids(6), masks.causal, padding_mask=torch.zeros(1, 6, dtype=torch.long)), "padding_mask", None),
    ("forward_with_mask one padded row", lambda: attention.forward_with_mask(
        model(), ids(6, 2), masks.causal, padding_mask=torch.tensor([[1] * 6, [0] * 6])), "padding_mask", None),
    ("forward_with_mask padding values", lambda: attention.forward_with_mask(
        model(), ids(6), masks.causal, padding_mask=torch.full((1, 6), 2)), "padding_mask", None),
    ("forward_with_mask float ids", lambda: attention.forward_with_mask(model(), ids(6).float(), masks.causal),
     "input_ids", None),
    ("forward_with_mask 1-D ids", lambda: attention.forward_with_mask(model(), ids(6)[0], masks.causal), "input_ids",
     None),
    ("forward_with_mask empty ids", lambda: attention.forward_with_mask(model(), ids(6)[:, :0], masks.causal),
     "input_ids", None),
    ("forward_with_mask ids past vocabulary", lambda: attention.forward_with_mask(
        model(), torch.tensor([[1, 2, 10 ** 6]]), masks.causal), "input_ids", None),
    ("forward_with_mask negative ids", lambda: attention.forward_with_mask(model(), torch.tensor([[1, -2, 3]]),
                                                                           masks.causal), "input_ids", None),
    ("forward_with_mask a list", lambda: attention.forward_with_mask(model(), [[1, 2, 3]], masks.causal), "input_ids",
     None),
    ("forward_with_mask padding shape", lambda: attention.forward_with_mask(
        model(), ids(6), masks.causal, padding_mask=torch.ones(1, 5)), "padding_mask", None),
    ("forward_with_mask layer count", lambda: attention.forward_with_mask(
        model(), ids(6), layer_masks=[masks.causal]), "layer_masks", None),
    ("forward_with_mask wrong device", lambda: attention.forward_with_mask(model(), ids(6).to("meta"), masks.causal),
     "input_ids", "meta"),
    ("influence position past the end", lambda: attention.influence(model(), ids(6), 6, 5, masks.causal), "position",
     "6"),
    # objectives
    ("resolve_mask_token unknown", lambda: objectives.resolve_mask_token(tokenizer(), "mask"), "mask_token",
     "'mask'"),
    ("MaskingConfig nan ratio", lambda: objectives.MaskingConfig(ratio=NAN), "ratio", "nan"),
    ("MaskingConfig string ratio", lambda: objectives.MaskingConfig(ratio="0.2"), "ratio", "'0.2'"),
    ("MaskingConfig inf fraction", lambda: objectives.MaskingConfig(mask_fraction=INF), "mask_fraction", "inf"),
    ("make_batch unknown objective", lambda: make_batch(objective="mlm"), "objective", "'mlm'"),
    ("make_batch negative mask id", lambda: make_batch(mask_id=-1), "mask_id", "-1"),
    ("make_batch mask id past vocabulary", lambda: make_batch(mask_id=5000), "mask_id", "5000"),
    ("make_batch zero vocabulary", lambda: make_batch(vocab_size=0), "vocab_size", "0"),
    ("make_batch padding shape", lambda: make_batch(padding_mask=torch.ones(2, 7)), "padding_mask", None),
    ("make_batch all padding", lambda: make_batch(padding_mask=torch.zeros(2, 8, dtype=torch.long)), "padding_mask",
     None),
    ("make_batch 1-D ids", lambda: make_batch(input_ids=ids(8)[0], padding_mask=torch.ones(8)), "input_ids", None),
    ("fixed_eval_batches zero batch size", lambda: objectives.fixed_eval_batches(
        "mntp", ids(8, 4), batch_size=0, num_batches=1, mask_id=5, vocab_size=2000, special_ids=[]), "batch_size", "0"),
    ("fixed_eval_batches too few blocks", lambda: objectives.fixed_eval_batches(
        "mntp", ids(8, 2), batch_size=2, num_batches=3, mask_id=5, vocab_size=2000, special_ids=[]), "blocks", None),
    ("evaluate_masked_lm no batches", lambda: objectives.evaluate_masked_lm(model(), []), "batches", None),
    ("check_mask_id past the rows", lambda: objectives.check_mask_id(model(), 10 ** 6), "mask_id", "1000000"),
    ("seeded_generator negative", lambda: objectives.seeded_generator(-1, 2), "parts", None),
    # metrics
    ("token_accuracy length mismatch", lambda: metrics.token_accuracy([["A", "B"]], [["A"]]), "pred_tags", None),
    ("token_accuracy sentence mismatch", lambda: metrics.token_accuracy([["A"]], [["A"], ["B"]]), "pred_tags", None),
    ("token_accuracy empty", lambda: metrics.token_accuracy([], []), "true_tags", None),
    ("token_accuracy strings", lambda: metrics.token_accuracy("AB", "AB"), "true_tags", "'AB'"),
    ("seqeval_f1 bad tag", lambda: metrics.seqeval_f1([["B-PER", "O"]], [["P", "O"]]), "pred_tags", "'P'"),
    ("seqeval_f1 bad true tag", lambda: metrics.seqeval_f1([["PER"]], [["O"]]), "true_tags", "'PER'"),
    ("seqeval_f1 strings", lambda: metrics.seqeval_f1("B-PER", "B-PER"), "true_tags", None),
    ("seqeval_f1 length mismatch", lambda: metrics.seqeval_f1([["O", "O"]], [["O"]]), "pred_tags", None),
    ("accuracy_at_k zero k", lambda: metrics.accuracy_at_k([["a"]], ["a"], ks=(0,)), "k", "0"),
    ("accuracy_at_k mismatch", lambda: metrics.accuracy_at_k([["a"]], ["a", "b"]), "gold", None),
    ("mean_ci95 nan", lambda: metrics.mean_ci95([1.0, NAN]), "values", "nan"),
    ("mean_ci95 empty", lambda: metrics.mean_ci95([]), "values", None),
    ("rep_n inf n", lambda: metrics.rep_n([1, 2, 3], INF), "n", "inf"),
    ("lexical_repetition empty", lambda: metrics.lexical_repetition([]), "token_lists", None),
    ("interleaved_timings zero rounds", lambda: metrics.interleaved_timings({"a": len}, [1], rounds=0), "rounds", "0"),
    # mask-predict (OpenLTG)
    ("DecodeConfig beta inf", lambda: openltg.DecodeConfig(beta=INF), "beta", "inf"),
    ("DecodeConfig beta nan", lambda: openltg.DecodeConfig(beta=NAN), "beta", "nan"),
    ("DecodeConfig beta string", lambda: openltg.DecodeConfig(beta="1.8"), "beta", "'1.8'"),
    ("DecodeConfig temperature 0", lambda: openltg.DecodeConfig(ltd=False, temperature=0), "temperature", "0"),
    ("DecodeConfig temperature inf", lambda: openltg.DecodeConfig(temperature=INF), "temperature", "inf"),
    ("DecodeConfig top_p True", lambda: openltg.DecodeConfig(top_p=True), "top_p", "True"),
    ("DecodeConfig top_p string", lambda: openltg.DecodeConfig(top_p="0.9"), "top_p", "'0.9'"),
    ("DecodeConfig top_p nan", lambda: openltg.DecodeConfig(top_p=NAN), "top_p", "nan"),
    ("DecodeConfig zero iterations", lambda: openltg.DecodeConfig(iterations=0), "iterations", "0"),
    ("DecodeConfig inf iterations", lambda: openltg.DecodeConfig(iterations=INF), "iterations", "inf"),
    ("DecodeConfig string alpha", lambda: openltg.DecodeConfig(alpha_min="0.1"), "alpha_min", "'0.1'"),
    ("sample_tokens temperature 0", lambda: openltg.sample_tokens(logits(), 0, 0.9), "temperature", "0"),
    ("sample_tokens temperature nan", lambda: openltg.sample_tokens(logits(), NAN, 0.9), "temperature", "nan"),
    ("sample_tokens top_p True", lambda: openltg.sample_tokens(logits(), 1.0, True), "top_p", "True"),
    ("sample_tokens 1-D logits", lambda: openltg.sample_tokens(logits()[0], 1.0, 0.9), "logits", None),
    ("sample_tokens nan logits", lambda: openltg.sample_tokens(torch.full((2, 5), NAN), 1.0, 0.9), "logits", None),
    ("top_p_filter zero", lambda: openltg.top_p_filter(torch.softmax(logits(), -1), 0), "top_p", "0"),
    ("ltd_temperature beta inf", lambda: openltg.ltd_temperature(0, 8, INF), "beta", "inf"),
    ("ltd_temperature string step", lambda: openltg.ltd_temperature("a", 8, 1.8), "step", "'a'"),
    ("ltd_temperature step past T", lambda: openltg.ltd_temperature(8, 8, 1.8), "step", "8"),
    ("remask_count zero iterations", lambda: openltg.remask_count(10, 0, 0), "iterations", "0"),
    ("remask_count float step", lambda: openltg.remask_count(10, 0.5, 4), "step", "0.5"),
    ("segment_lengths too many", lambda: openltg.segment_lengths(2, 3), "segments", "3"),
    ("generation_mask zero source", lambda: openltg.generation_mask(0), "source_length", "0"),
    ("entropy temperature 0", lambda: openltg.entropy(logits(), temperature=0), "temperature", "0"),
    ("function_word_share temperature inf", lambda: openltg.function_word_share(tokenizer(), logits(1, 2000),
                                                                              temperature=INF), "temperature", "inf"),
    ("autoregressive_generate temperature 0", lambda: openltg.autoregressive_generate(
        model(), [ids(4)[0]], 2, temperature=0), "temperature", "0"),
    ("autoregressive_generate top_p True", lambda: openltg.autoregressive_generate(
        model(), [ids(4)[0]], 2, top_p=True), "top_p", "True"),
    ("autoregressive_generate zero length", lambda: openltg.autoregressive_generate(model(), [ids(4)[0]], 0),
     "length", "0"),
    ("autoregressive_generate empty prompt", lambda: openltg.autoregressive_generate(
        model(), [torch.tensor([], dtype=torch.long)], 2), "prompts", None),
    ("autoregressive_generate no prompts", lambda: openltg.autoregressive_generate(model(), [], 2), "prompts", None),
    ("autoregressive_generate past max positions", lambda: openltg.autoregressive_generate(
        model(), [ids(2040)[0]], 20), "length", None),
    ("story_prompts zero limit", lambda: openltg.story_prompts("corpus", "austen", "test", 0), "limit", "0"),
    # training
    ("TrainConfig negative max_grad_norm", lambda: training.TrainConfig(steps=1, batch_size=1, max_grad_norm=-1),
     "max_grad_norm", "-1"),
    ("TrainConfig nan lr", lambda: training.TrainConfig(steps=1, batch_size=1, lr=NAN), "lr", "nan"),
    ("TrainConfig beta above 1", lambda: training.TrainConfig(steps=1, batch_size=1, betas=(1.5, 0.999)), "betas[0]",
     "1.5"),
    ("TrainConfig string seed", lambda: training.TrainConfig(steps=1, batch_size=1, seed="a"), "seed", "'a'"),
    ("TrainConfig inf steps", lambda: training.TrainConfig(steps=INF, batch_size=1), "steps", "inf"),
    ("LoraSettings zero r", lambda: training.LoraSettings(r=0), "r", "0"),
    ("LoraSettings nan alpha", lambda: training.LoraSettings(alpha=NAN), "alpha", "nan"),
    ("LoraSettings dropout 1", lambda: training.LoraSettings(dropout=1.0), "dropout", "1.0"),
    ("LoraSettings no targets", lambda: training.LoraSettings(target_modules=()), "target_modules", "()"),
    ("LoraSettings string targets", lambda: training.LoraSettings(target_modules="q_proj"), "target_modules",
     "'q_proj'"),
    ("masked_lm_experiment unknown objective", lambda: mntp_adapter.masked_lm_experiment(
        model(), tokenizer(), objective="clm", train_blocks=ids(8, 4), eval_batches=[{}],
        config=training.TrainConfig(steps=1, batch_size=1), run_dir="/nonexistent/run", mask_id=5), "objective", "'clm'"),
    ("masked_lm_experiment no eval batches", lambda: mntp_adapter.masked_lm_experiment(
        model(), tokenizer(), objective="mntp", train_blocks=ids(8, 4), eval_batches=[],
        config=training.TrainConfig(steps=1, batch_size=1), run_dir="/nonexistent/run", mask_id=5), "eval_batches", "[]"),
    ("masked_lm_experiment empty blocks", lambda: mntp_adapter.masked_lm_experiment(
        model(), tokenizer(), objective="mntp", train_blocks=ids(8, 4)[:0], eval_batches=[{}],
        config=training.TrainConfig(steps=1, batch_size=1), run_dir="/nonexistent/run", mask_id=5), "train_blocks", None),
    ("load_adapter empty folder", lambda: adapters.load_adapter(model(), "/nonexistent/adapter"), "path", None),
    # repetition
    ("repeat_ids negative r", lambda: repetition.repeat_ids(ids(4), -1), "r", "-1"),
    ("repeat_batch unknown policy", lambda: repetition.repeat_batch(ids(4), r=1, policy="tight"), "policy",
     "'tight'"),
    ("repeat_batch all padding", lambda: repetition.repeat_batch(ids(4), torch.zeros(1, 4, dtype=torch.long), r=1),
     "padding_mask", None),
    ("Strategy unknown kind", lambda: repetition.Strategy("xx"), "kind", "'xx'"),
    ("label_vocabulary empty", lambda: repetition.label_vocabulary([]), "tag_sequences", None),
    ("check_exit_layer too deep", lambda: repetition.check_exit_layer(9, 4), "exit_layer", "9"),
    # emat
    ("choose_unseen_phrases string fraction", lambda: emat_data.choose_unseen_phrases(["a", "b"], "0.1"),
     "unseen_fraction", "'0.1'"),
    ("choose_unseen_phrases nan fraction", lambda: emat_data.choose_unseen_phrases(["a", "b"], NAN), "unseen_fraction",
     "nan"),
    ("build_vocabulary zero min_count", lambda: emat_data.build_vocabulary(__import__("collections").Counter(a=2), 0),
     "min_count", "0"),
    ("extract_phrase_spans empty", lambda: emat_data.extract_phrase_spans([]), "texts", None),
    ("rank_candidates zero k", lambda: emat_mechanism.rank_candidates(torch.randn(2, 3), ["a", "b", "c"], 0), "k", "0"),
    ("rank_candidates mismatch", lambda: emat_mechanism.rank_candidates(torch.randn(2, 3), ["a", "b"], 1), "candidates", None),
    ("split_at_mask no marker", lambda: emat_data.split_at_mask("no marker here"), "sentence", None),
    ("length_class empty", lambda: emat_mechanism.length_class([]), "phrase_ids", "[]"),
    # the public entry points that used to fail later or deep inside: each names its argument
    ("MNTPDecoder mask_id None", lambda: MNTPDecoder(model(), tokenizer(), mask_id=None), "mask_id", "None"),
    ("MNTPDecoder string mask_id", lambda: MNTPDecoder(model(), tokenizer(), "a"), "mask_id", "'a'"),
    ("check_layer string", lambda: masks.check_layer("a", 4), "layer", "'a'"),
    ("attention_view string layer", lambda: lecture_figures.attention_view(
        {"causal": torch.rand(2, 2, 3, 3)}, ["a", "b", "c"], layer="a"), "layer", "'a'"),
    ("attention_view string head", lambda: lecture_figures.attention_view(
        {"causal": torch.rand(2, 2, 3, 3)}, ["a", "b", "c"], head="a"), "head", "'a'"),
    ("sr_attention_figure string layer", lambda: repetition.figures.sr_attention_figure(
        {"attention": torch.rand(2, 4, 4), "n": 2, "r": 1}, tokenizer(), layer="a"), "layer", "'a'"),
    ("check_exit_layer string", lambda: repetition.check_exit_layer("a", 4), "exit_layer", "'a'"),
    ("mask_predict string seed", lambda: openltg.mask_predict(decoder(), [ids(4)[0]], 2, seed="a"), "seed", "'a'"),
    ("autoregressive_generate string seed", lambda: openltg.autoregressive_generate(model(), [ids(4)[0]], 2, seed="a"),
     "seed", "'a'"),
    ("diffusion sample string seed", lambda: diffusion.sample(decoder(), [ids(4)[0]], 8, seed="a"), "seed", "'a'"),
    ("diffusion_bound string seed", lambda: diffusion.diffusion_bound(decoder(), ids(8, 2), samples=1, seed="a"),
     "seed", "'a'"),
    ("mask_predict text prompts", lambda: openltg.mask_predict(decoder(), "Once upon a time", 2), "prompts",
     "'Once upon a time'"),
    ("autoregressive_generate text prompts", lambda: openltg.autoregressive_generate(model(), "Once upon", 2),
     "prompts", "'Once upon'"),
    ("diffusion sample text prompt in a list", lambda: diffusion.sample(decoder(), ["Once upon"], 8), "prompts[0]",
     "'Once upon'"),
    ("mask_predict prompt id beyond the vocabulary", lambda: openltg.mask_predict(
        decoder(), torch.tensor([1, 2, 10 ** 6]), 2), "prompts[0]", "1000000"),
    ("autoregressive_generate prompt id beyond the vocabulary", lambda: openltg.autoregressive_generate(
        model(), [torch.tensor([1, 2, 10 ** 6])], 2), "prompts[0]", "1000000"),
    ("diffusion sample negative prompt id", lambda: diffusion.sample(decoder(), [torch.tensor([1, -3])], 8),
     "prompts[0]", "-3"),
    ("features empty sentences", lambda: decoder().features([]), "sentences", "[]"),
    ("naive_complete empty sentences", lambda: emat_mechanism.naive_complete(decoder(), None, [], 3), "sentences", "[]"),
    ("collate empty sentences", lambda: repetition.experiment_data.collate([], ["O"], 0), "sentences", None),
    ("masked_lm_experiment too long a block, no eval batches", lambda: mntp_adapter.masked_lm_experiment(
        model(), tokenizer(), objective="mntp", train_blocks=ids(model().config.max_position_embeddings + 1, 2),
        eval_batches=[], config=training.TrainConfig(steps=1, batch_size=1), run_dir="/nonexistent/run", mask_id=5),
     "train_blocks", None),
]


@pytest.mark.parametrize("call, argument, value", [probe[1:] for probe in PROBES], ids=[probe[0] for probe in PROBES])
def test_bad_input_gives_a_value_error_naming_the_argument(call, argument, value, bad_input):
    bad_input(call, argument, value)


def test_every_probe_has_a_distinct_name():
    names = [probe[0] for probe in PROBES]
    assert len(names) == len(set(names))


def test_the_checks_accept_what_they_should():
    assert checks.whole_number(3.0, "n") == 3 and checks.real_number(0, "x", low=0) == 0.0
    assert math.isclose(checks.real_number(0.5, "top_p", low=0, high=1, low_open=True), 0.5)
    with pytest.raises(ValueError, match=r"top_p=0 must be a finite number in \(0, 1\]"):
        checks.real_number(0, "top_p", low=0, high=1, low_open=True)
