"""The paper's decoders on a frozen masked LM's contextual embedding at the mask, and how completions are ranked.

Kalinsky et al., *Simple and Effective Multi-Token Completion from Masked Language Models* (seed 004). Every decoder
reads the same vector: *"Both solutions utilize the MLM by using the contextual embedding vector of the masked
place"* (§4, :func:`mask_features`).

- **EMAT (§4.1, Figure 1 (2)):** the output matrix extended by one row per multi-token phrase
  (:class:`ExtendedMatrixDecoder`, :func:`build_emat`, :func:`emat_labels`).
- **The RNN decoder (§4.2, Figure 1 (3)):** a GRU started from the mask embedding, beam search until EOS
  (:class:`GRUDecoder`, :func:`build_gru`, :func:`gru_targets`, :func:`language_model_targets`).
- **Naive MTC (§5.2, Table 2):** predict a length (1, 2, 3+ tokens), duplicate the mask, fill the masks one after the
  other (:class:`LengthClassifier`, :func:`length_class`, :func:`naive_complete`).
- **Ranking and accuracy@k (§5):** :func:`rank_candidates`, :func:`first_distinct_completions`,
  :func:`is_completion`, :func:`accuracy`.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ... import metrics
from ...checks import whole_number
from ...masked_lm import MaskedLM
from ...padding import padded

KS = (1, 3, 5, 10, 50)  # Tables 2-3: accuracy@k for these k
LENGTH_CLASSES = ("1 token", "2 tokens", "3+ tokens")  # §5.2: "we are only interested in 3 classes"


# ---------------------------------------------------------------------------------------------
# §4: the contextual embedding at the mask, and the tokens that start and end a completion
# ---------------------------------------------------------------------------------------------


def mask_features(mlm: MaskedLM, sequences: Sequence[Sequence[int]], mask_columns: Sequence[int]) -> torch.Tensor:
    """The contextual embedding of the token at each ``mask_columns`` entry as the output matrix sees it (§4): the
    output ``mlm.offset`` columns before it, through the head's transform (BERT) (float32)."""
    hidden = mlm.hidden_at(sequences, [column - mlm.offset for column in mask_columns])
    return mlm.output_transform(hidden).float()


def start_id(mlm: MaskedLM) -> int:
    """The token a GRU reads first when there is no preceding token (LM pre-training, §4.2): the MNTP separator, else
    the encoder's [CLS] / <s>."""
    for token in (getattr(mlm, "separator_id", None), mlm.tokenizer.cls_token_id, mlm.tokenizer.bos_token_id):
        if token is not None:
            return int(token)
    raise ValueError(f"{mlm.name}: the tokenizer has no separator, [CLS] or BOS token to start a sequence with")


def end_id(mlm: MaskedLM) -> int:
    """The token that ends a completion (§4.2, "until reaching an EOS token"): EOS, else the encoder's [SEP] (BERT
    has no EOS; the public code adds one)."""
    for token in (mlm.tokenizer.eos_token_id, mlm.tokenizer.sep_token_id):
        if token is not None:
            return int(token)
    raise ValueError(f"{mlm.name}: the tokenizer has no EOS or [SEP] token to end a completion with")


# ---------------------------------------------------------------------------------------------
# §5: ranking completions and accuracy@k
# ---------------------------------------------------------------------------------------------


def check_k(k) -> int:
    """``k`` itself if it is a positive whole number (how many completions to return), else a ValueError."""
    if isinstance(k, bool) or not isinstance(k, (int,)) or k <= 0:
        raise ValueError(f"k={k!r} must be a positive whole number (how many completions to return)")
    return k


def is_completion(text: str) -> bool:
    """A candidate counts only if it holds a letter or digit, like every vocabulary phrase (no bare punctuation)."""
    return any(character.isalnum() for character in text)


def first_distinct_completions(scored, k: int) -> list[tuple[str, float]]:
    """The first ``k`` distinct ``(text, score)`` pairs, in the given order, that are real completions."""
    seen, best = set(), []
    for text, score in scored:
        if text not in seen and is_completion(text):
            seen.add(text)
            best.append((text, score))
            if len(best) == k:
                break
    return best


def ranking_depth(k: int) -> int:
    """How many top candidates to read to find ``k`` distinct real completions (some decode alike or to punctuation)."""
    return 8 * check_k(k) + 16


def rank_candidates(scores: torch.Tensor, candidates: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
    """Per row, the ``k`` best distinct candidate strings (see :func:`is_completion`) with their scores, best first."""
    check_k(k)
    if scores.shape[-1] != len(candidates):
        raise ValueError(f"scores has {scores.shape[-1]} columns but there are {len(candidates)} candidates")
    if bool(torch.isnan(scores).any()):  # topk ranks NaN above every number
        raise ValueError("scores holds NaN; a candidate without a score cannot be ranked")
    top = scores.topk(min(scores.shape[-1], ranking_depth(k)), dim=-1)
    ranked = []
    for values, indices in zip(top.values.tolist(), top.indices.tolist()):
        ranked.append(first_distinct_completions(((candidates[index], value) for value, index in zip(values, indices)), k))
    return ranked


def accuracy(ranked: Sequence[Sequence[tuple[str, float] | str]], gold: Sequence[str], ks: Sequence[int] = KS) -> dict[int, float]:
    """accuracy@k (§5: "the percentage of masked sentences where the label is among the top-k predictions")."""
    if isinstance(gold, str) or not all(isinstance(phrase, str) for phrase in gold):
        raise ValueError(f"gold={str(gold)[:60]!r} must be a list of phrase strings, one per example, not one string")
    strings = [[item[0] if isinstance(item, tuple) else item for item in row] for row in ranked]
    return metrics.accuracy_at_k(strings, [phrase.strip() for phrase in gold], ks)


# ---------------------------------------------------------------------------------------------
# §4.1 EMAT: the extended output matrix
# ---------------------------------------------------------------------------------------------


class ExtendedMatrixDecoder(nn.Module):
    """EMAT (§4.1, Figure 1 (2)): logits over the masked LM's tokens plus one new row per multi-token phrase.

    *"We assign each new multi-token phrase to an embedding vector, which is added only to the output
    token-prediction matrix"*, and *"we extract the contextual embedding from the masked sentence and only
    train the extended-matrix decoder"*. Single-token phrases keep their original row; each new row starts
    as the **mean of the output embeddings of the phrase's tokens** (the public code starts them at random).
    With ``train_token_rows`` (the default, as the public ``matrix_plugin``, which detaches the output matrix
    "so it will train") the whole extended matrix is trained, a copy of the token rows (and BERT's output bias)
    included; the masked LM itself is untouched. With ``train_token_rows=False`` only the new rows train and the
    token rows stay the masked LM's own, so a single-token label that never occurs in training keeps the masked
    LM's own score.
    """

    def __init__(self, token_matrix: torch.Tensor, phrase_rows: torch.Tensor, token_strings: Sequence[str],
                 phrases: Sequence[str], train_token_rows: bool = True, token_bias: torch.Tensor | None = None):
        super().__init__()
        bias = torch.zeros(token_matrix.shape[0]) if token_bias is None else token_bias.detach().float().clone()
        if train_token_rows and token_bias is not None:  # BERT's output bias trains with its rows
            self.token_bias = nn.Parameter(bias.to(token_matrix.device))
        else:
            self.register_buffer("token_bias", bias.to(token_matrix.device), persistent=False)
        if len(phrases) != phrase_rows.shape[0]:
            raise ValueError(f"phrases has {len(phrases)} entries but phrase_rows has {phrase_rows.shape[0]} rows")
        if train_token_rows:
            self.token_matrix = nn.Parameter(token_matrix.detach().float().clone())
        else:
            self.register_buffer("token_matrix", token_matrix.detach().float(), persistent=False)
        self.phrase_matrix = nn.Parameter(phrase_rows.detach().float().clone())
        self.phrases = list(phrases)
        self.phrase_index = {phrase: i for i, phrase in enumerate(self.phrases)}
        self.candidates = [*token_strings, *self.phrases]

    @property
    def vocab_size(self) -> int:
        return int(self.token_matrix.shape[0])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.cat([hidden @ self.token_matrix.T + self.token_bias, hidden @ self.phrase_matrix.T], dim=-1)

    def label(self, phrase: str, phrase_ids: Sequence[int], canonical_ids: Sequence[int]) -> int:
        """The output row that stands for ``phrase`` here: its own token if it is one, else its phrase row."""
        if len(phrase_ids) == 1:
            return int(phrase_ids[0])
        if phrase in self.phrase_index:
            return self.vocab_size + self.phrase_index[phrase]
        return int(canonical_ids[0])  # one token mid-sentence, several here (rare): the canonical token

    @torch.no_grad()
    def complete(self, hidden: torch.Tensor, k: int) -> list[list[tuple[str, float]]]:
        return rank_candidates(self(hidden.float()).softmax(-1), self.candidates, k)


def build_emat(mlm: MaskedLM, vocabulary: Sequence[str], train_token_rows: bool = True) -> ExtendedMatrixDecoder:
    """An EMAT over ``vocabulary`` (§4.1): phrases that are one token (mid-sentence) reuse it; the rest get new rows."""
    if not vocabulary:
        raise ValueError("vocabulary is empty; EMAT needs at least one phrase to extend the output matrix with")
    matrix = mlm.output_matrix.detach().float()
    multi, rows = [], []
    for phrase in vocabulary:
        ids = mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids
        if len(ids) > 1:
            multi.append(phrase)
            rows.append(matrix[ids].mean(0))
    phrase_rows = torch.stack(rows) if rows else matrix.new_zeros((0, matrix.shape[1]))
    return ExtendedMatrixDecoder(matrix, phrase_rows, mlm.token_strings, multi, train_token_rows,
                                 token_bias=mlm.output_bias).to(mlm.device)


def emat_labels(emat: ExtendedMatrixDecoder, mlm: MaskedLM, phrases: Sequence[str],
                phrase_ids: Sequence[Sequence[int]]) -> torch.Tensor:
    """The EMAT output row of each label (:meth:`ExtendedMatrixDecoder.label`), the cross-entropy target of §4.1;
    ``phrase_ids`` are each label's tokens as they stand in its sentence."""
    canonical = {phrase: mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids for phrase in set(phrases)}
    return torch.tensor([emat.label(phrase, ids, canonical[phrase]) for phrase, ids in zip(phrases, phrase_ids)])


# ---------------------------------------------------------------------------------------------
# §4.2 The RNN (GRU) decoder
# ---------------------------------------------------------------------------------------------


class GRUDecoder(nn.Module):
    """The generative extension (§4.2, Figure 1 (3)), shaped as the public decoder.

    - *"we use this vector [the contextual embedding of the mask] as the first hidden vector fed into
      the GRU"*: every layer starts from it.
    - *"As the first input … the static embedding of the token preceding the [MASK] token. For later
      steps, the input is the previous token"*. *"initializing the GRU's decoder embeddings with the same
      parameters used by the MLM … improves the performance"*: the embeddings are a copy of the masked LM's,
      trained with the decoder when ``train_embeddings`` (as the public code, ``freeze_bert=False``).
    - *"at each step we concatenate: a) the output of the GRU; b) the previous vector embedding; and c)
      the masked token contextual embedding … and feed them to a feed forward (FF) layer … The output of the
      FF is then fed as input to the MLM decoder"*: FF -> GELU (the public ``transform`` + ``gelu``) -> a copy
      of the masked LM's output head (for BERT ``cls``: transform, then the output matrix), trained with the
      decoder when ``train_embeddings``. Dropout 0.2, 2 layers (App. C, Table 8).
    """

    def __init__(self, embeddings: torch.Tensor, output_head: nn.Module, eos_id: int, layers: int = 2,
                 dropout: float = 0.2, train_embeddings: bool = True):
        super().__init__()
        hidden = int(embeddings.shape[1])
        self.embedding = nn.Embedding.from_pretrained(embeddings.detach().float().clone(), freeze=not train_embeddings)
        self.output_head = output_head.float()
        self.output_head.requires_grad_(train_embeddings)
        self.eos_id = int(eos_id)
        self.layers = whole_number(layers, "layers")
        self.gru = nn.GRU(hidden, hidden, num_layers=layers, dropout=dropout if layers > 1 else 0.0, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.feed_forward = nn.Linear(3 * hidden, hidden)

    @property
    def vocab_size(self) -> int:
        return int(self.embedding.num_embeddings)

    def initial_state(self, mask_hidden: torch.Tensor) -> torch.Tensor:
        return mask_hidden.unsqueeze(0).expand(self.layers, -1, -1).contiguous()

    def step(self, tokens: torch.Tensor, state: torch.Tensor, mask_hidden: torch.Tensor):
        """One generation step: logits over the vocabulary and the new GRU state."""
        embedded = self.embedding(tokens)
        output, state = self.gru(embedded.unsqueeze(1), state)
        combined = self.dropout(torch.cat([output[:, 0], embedded, mask_hidden], dim=-1))
        return self.output_head(F.gelu(self.feed_forward(combined))), state

    def forward(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, targets: torch.Tensor,
                teacher_forcing: float = 1.0) -> torch.Tensor:
        """Logits ``(N, T, V)`` for padded ``targets`` (-100 after EOS); each step feeds the gold token with
        probability ``teacher_forcing``, else the model's own best guess (App. C: 0.5)."""
        state, tokens, steps = self.initial_state(mask_hidden), first_tokens, []
        for t in range(targets.shape[1]):
            logits, state = self.step(tokens, state, mask_hidden)
            steps.append(logits)
            gold = targets[:, t].clamp(min=0)
            use_gold = teacher_forcing >= 1.0 or bool(torch.rand(()) < teacher_forcing)
            tokens = gold if use_gold else logits.argmax(-1)
        return torch.stack(steps, dim=1)

    def loss(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, targets: torch.Tensor,
             teacher_forcing: float = 1.0) -> torch.Tensor:
        """Mean cross-entropy per label token (EOS included), step by step as in :meth:`forward`.

        ``targets`` are padded with -100 at the end only (:func:`gru_targets`), so step ``t`` runs on the rows
        still inside their label: the same loss as over the padded batch, without the padding's vocabulary-wide
        logits (the costly part on a CPU)."""
        lengths = (targets != -100).sum(1)
        order = lengths.argsort(descending=True)
        mask_hidden, tokens, targets, lengths = mask_hidden[order], first_tokens[order], targets[order], lengths[order]
        state = self.initial_state(mask_hidden)
        total = mask_hidden.new_zeros(())
        for t in range(targets.shape[1]):
            live = int((lengths > t).sum())
            if live == 0:
                break
            state, tokens = state[:, :live], tokens[:live]
            logits, state = self.step(tokens, state.contiguous(), mask_hidden[:live])
            total = total + F.cross_entropy(logits, targets[:live, t], reduction="sum")
            use_gold = teacher_forcing >= 1.0 or bool(torch.rand(()) < teacher_forcing)
            tokens = targets[:live, t] if use_gold else logits.argmax(-1)
        return total / lengths.sum().clamp(min=1)

    @torch.no_grad()
    def beam_search(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, beam_size: int, max_steps: int,
                    num_results: int) -> list[list[tuple[list[int], float]]]:
        """Beam search until EOS (§4.2): every live beam that emits EOS becomes a finished completion.

        Returns, per input, up to ``num_results`` finished token sequences (EOS stripped) with their
        log-probabilities, best first. Stops early once ``num_results`` finished ones beat every live beam.
        """
        whole_number(beam_size, "beam_size")
        whole_number(max_steps, "max_steps")
        count, vocab = mask_hidden.shape[0], self.vocab_size
        hidden = mask_hidden.repeat_interleave(beam_size, 0)
        state = self.initial_state(hidden)
        tokens = first_tokens.repeat_interleave(beam_size)
        scores = torch.full((count, beam_size), float("-inf"), device=hidden.device)
        scores[:, 0] = 0.0
        sequences = torch.empty((count, beam_size, 0), dtype=torch.long, device=hidden.device)
        finished_scores, finished_sequences = [], []
        for _ in range(max_steps):
            logits, state = self.step(tokens, state, hidden)
            total = scores.unsqueeze(-1) + logits.log_softmax(-1).view(count, beam_size, vocab)
            finished_scores.append(total[:, :, self.eos_id].clone())
            finished_sequences.append(sequences)
            total[:, :, self.eos_id] = float("-inf")
            scores, flat = total.view(count, -1).topk(beam_size, dim=-1)
            beams, new_tokens = flat // vocab, flat % vocab
            sequences = torch.cat([sequences.gather(1, beams.unsqueeze(-1).expand(-1, -1, sequences.shape[-1])),
                                   new_tokens.unsqueeze(-1)], dim=-1)
            rows = (beams + torch.arange(count, device=beams.device).unsqueeze(1) * beam_size).view(-1)
            state, tokens = state[:, rows], new_tokens.view(-1)
            done = torch.cat(finished_scores, dim=1)
            if done.shape[1] >= num_results and bool((done.topk(num_results, dim=1).values[:, -1]
                                                      >= scores.max(dim=1).values).all()):
                break
        results = []
        all_scores = torch.cat(finished_scores, dim=1).cpu()
        for row in range(count):
            order = all_scores[row].argsort(descending=True)[:num_results]
            results.append([(finished_sequences[int(i) // beam_size][row, int(i) % beam_size].tolist(),
                             float(all_scores[row, i])) for i in order if math.isfinite(float(all_scores[row, i]))])
        return results

    def complete(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, tokenizer, k: int, beam_size: int,
                 max_steps: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` distinct completion strings with their probabilities (beam search)."""
        check_k(k)
        was_training = self.training
        self.eval()
        found = self.beam_search(mask_hidden.float(), first_tokens, beam_size, max_steps, num_results=2 * k + 4)
        self.train(was_training)
        ranked = []
        for candidates in found:
            seen, row = set(), []
            for ids, score in candidates:
                text = tokenizer.decode(ids, skip_special_tokens=True).strip()
                if text not in seen and is_completion(text):
                    seen.add(text)
                    row.append((text, math.exp(score)))
            ranked.append(row[:k])
        return ranked


def build_gru(mlm: MaskedLM, layers: int = 2, dropout: float = 0.2, train_embeddings: bool = True) -> GRUDecoder:
    """A :class:`GRUDecoder` on ``mlm``'s embeddings and output head, ending at :func:`end_id` (§4.2, App. C)."""
    return GRUDecoder(mlm.input_embeddings, mlm.output_head(), end_id(mlm), layers, dropout,
                      train_embeddings).to(mlm.device)


def gru_targets(phrase_ids: Sequence[Sequence[int]], eos_id: int, max_steps: int) -> torch.Tensor:
    """The GRU's MTC targets (§4.2): each label's in-context tokens + EOS, cut to ``max_steps``, padded with -100."""
    return padded([([*ids] + [eos_id])[:max_steps] for ids in phrase_ids], -100)[0]


def language_model_targets(mlm: MaskedLM, sentences: Sequence[str], max_tokens: int) -> torch.Tensor:
    """Pre-training targets for the GRU (§4.2, "pre-train the generative model on a vanilla Language Modeling
    task"): each sentence's first ``max_tokens`` tokens, then EOS if the sentence ended there, padded with -100 (as
    the public ``lm_pretrain``, which cuts at the batch median)."""
    whole_number(max_tokens, "max_tokens")
    if not sentences:
        raise ValueError("sentences is empty; the GRU's language-model pre-training needs text")
    eos = end_id(mlm)
    rows = []
    for sentence in sentences:
        ids = mlm.tokenizer(sentence, add_special_tokens=False).input_ids
        rows.append(ids[:max_tokens] if len(ids) > max_tokens else [*ids, eos])
    return padded(rows, -100)[0]


# ---------------------------------------------------------------------------------------------
# §5.2 Naive MTC: predict a length, duplicate the mask, fill the masks one by one
# ---------------------------------------------------------------------------------------------


def length_class(phrase_ids: Sequence[int]) -> int:
    """0, 1 or 2 for phrases of 1, 2 or more tokens (naive MTC's length classes, §5.2)."""
    if len(phrase_ids) == 0:
        raise ValueError(f"phrase_ids={list(phrase_ids)!r} is empty; a phrase has at least one token")
    return min(len(phrase_ids), 3) - 1


class LengthClassifier(nn.Module):
    """Naive MTC's length predictor (§5.2), here a linear probe on the same frozen mask embedding
    (the paper fine-tunes a BERT classifier)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, len(LENGTH_CLASSES))

    def forward(self, mask_hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(mask_hidden.float())


@torch.no_grad()
def naive_complete(mlm: MaskedLM, lengths: LengthClassifier, sentences: Sequence[str], k: int,
                   first_tokens: int = 100, second_tokens: int | None = None) -> list[list[tuple[str, float]]]:
    """Naive MTC (§5.2): P(one token) · P_MLM(t), and P(two tokens) · P(t1 | [MASK] [MASK]) · P(t2 | t1 [MASK]).

    *"After duplicating the mask, we complete the first missing token using the MLM. Then, we replace the
    first mask with each of the top-100 predicted tokens and complete the second mask."* The second mask is completed
    over the whole vocabulary (``second_tokens=None``, as the paper): for the top-``k`` list only each first token's
    best :func:`ranking_depth` second tokens can enter it, so those are read; an int caps them lower. Every
    candidate is scored in one tensor and decoded lazily, best first, until ``k`` distinct completions are found.
    """
    check_k(k)
    if isinstance(sentences, str) or len(sentences) == 0:
        raise ValueError(f"sentences={str(sentences)[:60]!r} must be a non-empty list of sentences, each holding "
                         "[MASK] once")
    whole_number(first_tokens, "first_tokens")
    if second_tokens is not None:
        whole_number(second_tokens, "second_tokens")
    depth = ranking_depth(k)
    encoded_one = [mlm.encode_masked(sentence) for sentence in sentences]
    encoded_two = [mlm.encode_masked(sentence, mask_count=2) for sentence in sentences]
    hidden = mask_features(mlm, [ids for ids, _ in encoded_one], [p for _, p in encoded_one])
    length_probs = lengths(hidden).softmax(-1)
    single_scores = mlm.token_logits(hidden).softmax(-1) * length_probs[:, :1]
    single = single_scores.topk(min(depth, single_scores.shape[-1]), dim=-1)
    first = mlm.token_logits(mask_features(mlm, [ids for ids, _ in encoded_two], [p for _, p in encoded_two]))
    first_top = first.softmax(-1).topk(first_tokens, dim=-1)
    filled, positions = [], []
    for (ids, position), tokens in zip(encoded_two, first_top.indices.tolist()):
        for token in tokens:
            filled.append(ids[:position] + [token] + ids[position + 1:])
            positions.append(position + 1)  # the second mask
    second = mlm.token_logits(mask_features(mlm, filled, positions)).softmax(-1)
    second_top = second.topk(min(second_tokens or depth, second.shape[-1]), dim=-1)
    strings = mlm.token_strings
    ranked = []
    for row in range(len(sentences)):
        block = slice(row * first_tokens, (row + 1) * first_tokens)
        pairs = (length_probs[row, 1] * first_top.values[row, :, None] * second_top.values[block]).flatten()
        scores = torch.cat([single.values[row], pairs]).cpu()
        order = scores.argsort(descending=True, stable=True).tolist()
        width = second_top.indices.shape[-1]
        singles, firsts = single.indices[row].tolist(), first_top.indices[row].tolist()
        seconds = second_top.indices[block].tolist()

        def text_of(index: int) -> str:
            if index < len(singles):
                return strings[singles[index]]
            pair = index - len(singles)
            t1, t2 = firsts[pair // width], seconds[pair // width][pair % width]
            return mlm.tokenizer.decode([t1, t2], skip_special_tokens=True).strip()

        ranked.append(first_distinct_completions(((text_of(i), float(scores[i])) for i in order), k))
    return ranked
