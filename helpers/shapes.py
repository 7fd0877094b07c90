"""The sizes of the workbook's decoders, known without loading or downloading one: :class:`ModelShape` and
:data:`KNOWN_SHAPES`. The memory estimate (:mod:`helpers.memory`) reads them, and so does the loader of the
random-weight models (:func:`helpers.models.random_config`), which builds a model of a real shape from them."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a Llama-style decoder that memory depends on."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    @property
    def linear_parameters(self) -> int:
        """Attention and MLP weights of all layers: what nf4 quantises."""
        h, kv = self.hidden, self.kv_dim
        return self.layers * (2 * h * h + 2 * h * kv + 3 * h * self.intermediate)

    @property
    def other_parameters(self) -> int:
        """Embeddings, the LM head when untied, and the norms."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + (2 * self.layers + 1) * self.hidden

    @property
    def parameters(self) -> int:
        return self.linear_parameters + self.other_parameters

    def llama_config(self, **extra):
        """A transformers ``LlamaConfig`` of this shape (``extra``: further config fields), for a random model of it."""
        from transformers import LlamaConfig

        return LlamaConfig(vocab_size=self.vocab, hidden_size=self.hidden, intermediate_size=self.intermediate,
                           num_hidden_layers=self.layers, num_attention_heads=self.heads,
                           num_key_value_heads=self.kv_heads, tie_word_embeddings=self.tied, **extra)

    def lora_parameters(self, r: int) -> int:
        """LoRA A and B on q, k, v, o of every layer (``training.LoraSettings``' targets)."""
        h, kv = self.hidden, self.kv_dim
        return self.layers * r * ((h + h) + 2 * (h + kv) + (h + h))


# Shapes from the models' config.json, so the estimate needs no download.
KNOWN_SHAPES = {
    "HuggingFaceTB/SmolLM2-360M": ModelShape("SmolLM2-360M", 960, 2560, 32, 15, 5, 49152, True),
    "meta-llama/Llama-2-7b-hf": ModelShape("Llama-2-7B", 4096, 11008, 32, 32, 32, 32000, False),
    "embedded:smollm2-135m": ModelShape("SmolLM2-135M", 576, 1536, 30, 9, 3, 49152, True),
    "tiny-random:llama": ModelShape("tiny random Llama", 64, 128, 4, 4, 2, 49152, True),
}
# Random weights of a real shape (``WORKBOOK_MODEL=random:<shape>``, helpers.profiles.RANDOM_MODELS): the same sizes.
KNOWN_SHAPES.update({
    "random:smollm2-135m": dataclasses.replace(KNOWN_SHAPES["embedded:smollm2-135m"], name="SmolLM2-135M (random)"),
    "random:smollm2-360m": dataclasses.replace(KNOWN_SHAPES["HuggingFaceTB/SmolLM2-360M"], name="SmolLM2-360M (random)"),
})


def shape_of_config(config, name: str = "") -> ModelShape:
    """A :class:`ModelShape` from a transformers config (Llama, Mistral, Qwen, SmolLM ...)."""
    return ModelShape(name or getattr(config, "_name_or_path", "") or type(config).__name__, int(config.hidden_size),
                      int(config.intermediate_size), int(config.num_hidden_layers), int(config.num_attention_heads),
                      int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads),
                      int(config.vocab_size), bool(getattr(config, "tie_word_embeddings", False)))


def model_shape(name: str) -> ModelShape:
    """The shape of a profile's model: from :data:`KNOWN_SHAPES`, else from its Hub config (needs the Hub)."""
    if name in KNOWN_SHAPES:
        return KNOWN_SHAPES[name]
    from transformers import AutoConfig

    try:
        return shape_of_config(AutoConfig.from_pretrained(name), name)
    except Exception as error:
        raise ValueError(f"model_name={name!r}: no known shape and its config could not be loaded ({error})") from error
