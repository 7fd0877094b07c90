"""Tables 2-3 (§4.2): sentence-level representations, the last token's ([EOS]) final state after an instruction,
scored on STS-B where the Hub is reachable."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ... import masks as M
from ... import objectives as O
from ...models import MissingAssetError
from .mechanism import encode_sentences, last_token_states
from .settings import MagnetSettings

STS_INSTRUCTION = "Retrieve semantically similar text"  # Table 8, "STS*"


@torch.no_grad()
def sentence_embeddings(model, tokenizer, texts: Sequence[str], *, instruction: str | None, mask: M.Mask,
                        batch_size: int = 32, max_len: int = 128, progress: bool = False) -> torch.Tensor:
    """``(N, d)`` last-token ([EOS]) encodings after ``instruction`` (§4.2), under ``mask``."""
    device = next(model.parameters()).device
    out = []
    for first in tqdm(range(0, len(texts), batch_size), desc="embedding", disable=not progress):
        batch = O.to_device(encode_sentences(tokenizer, texts[first:first + batch_size], instruction=instruction,
                                             max_len=max_len), device)
        out.append(last_token_states(model, batch, mask).float().cpu())
    return torch.cat(out)


def sts_spearman(model, tokenizer, *, mask: M.Mask, pairs: int, batch_size: int = 32) -> float:
    """Table 2's STS-B: Spearman x 100 between cosine similarity and the gold score (needs the Hub)."""
    from scipy.stats import spearmanr

    try:
        import datasets

        rows = datasets.load_dataset("sentence-transformers/stsb", split="test")
    except Exception as error:
        raise MissingAssetError(f"could not load STS-B from the Hub: {error}") from error
    rows = rows.select(range(min(pairs, len(rows))))
    left, right = (sentence_embeddings(model, tokenizer, list(rows[column]), instruction=STS_INSTRUCTION, mask=mask,
                                       batch_size=batch_size) for column in ("sentence1", "sentence2"))
    similarity = F.cosine_similarity(left, right).numpy()
    return 100.0 * float(spearmanr(similarity, np.asarray(rows["score"])).correlation)


def sentence_table(named_models: dict, tokenizer, settings: MagnetSettings):
    """Table 2's STS-B Spearman for each ``name -> (model, mask)`` where ``settings.sts`` (the Hub), else None.

    Offline there is no sentence-level task here: clustering held-out Austen sentences by novel (a stand-in for
    Table 3 tried earlier) had no signal, random assignment scoring V 4.2 against 4.0-5.8 for every model, so it
    could not rank them and was dropped.
    """
    import pandas as pd

    if not settings.sts:
        return None
    rows = {name: {"STS-B Spearman": sts_spearman(model, tokenizer, mask=mask, pairs=settings.sts_pairs,
                                                  batch_size=settings.embed_batch_size)}
            for name, (model, mask) in tqdm(named_models.items(), desc="sentence-level models")}
    return pd.DataFrame(rows).T
