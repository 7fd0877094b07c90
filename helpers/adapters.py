"""LoRA adapters on disk: saved whole with the settings they were trained under (``workbook.json``), found again
by those settings (:func:`adapter_path`), and refused when read under other settings or another mask token.

A save replaces the adapter's folder whole (``store.replace_dir``), one writer at a time (``store.folder_lock``), and
under ``accelerate launch`` only the main process writes (:func:`helpers.distributed.on_main_process`).
"""
from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

from . import paths, store
from .distributed import on_main_process

ADAPTER_METADATA = "workbook.json"
ADAPTER_FILES = ("adapter_config.json", ADAPTER_METADATA)
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # peft's weights file, either form


@contextlib.contextmanager
def peft_quietly():
    """peft reads transformers' deprecated ``model.is_gradient_checkpointing`` whenever it wraps a model, which
    raises a FutureWarning that is peft's to fix, not ours; silence that one warning, only around peft's calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def save_adapter(model, path, metadata: dict | None = None) -> Path:
    """Save a peft adapter (small) with its config, plus ``metadata`` (the settings it was trained with, e.g. the
    mask token) in workbook.json. The folder is replaced whole (``store.replace_dir``): weights and metadata are
    never out of step, and a crash leaves the previous adapter. Under ``accelerate launch`` the main process writes
    it and the others wait (:func:`on_main_process`). Saves are serialised by a lock on the folder that holds the
    adapter (``store.folder_lock``, waiting its turn), so two processes saving one adapter at once both succeed. A
    failed write (a full disk, a file-size limit) raises ``store.WriteError`` naming the folder and what is intact."""
    path = Path(path)

    def write():
        with store.folder_lock(path.parent):  # one save of this adapter at a time, across threads and processes
            had = adapter_exists(path)
            try:
                with store.replace_dir(path) as scratch:
                    model.save_pretrained(scratch)
                    store.write_json(scratch / ADAPTER_METADATA, store.canonical_settings(metadata or {}), indent=1)
            except Exception as error:
                if store.write_failure(error) is None:
                    raise
                intact = "the previous adapter there is intact" if had else "no adapter was saved there"
                raise store.write_failed(path, error, f"{intact} (nothing half-written is left), and the run "
                                         "folder's checkpoint is untouched", "rerun the notebook or command that "
                                         "trains it: it saves the adapter again without training") from error

    on_main_process(write)  # under accelerate launch every process holds the same adapter: one writes it
    return path


def adapter_exists(path) -> bool:
    store.recover_dir(path)
    return all((Path(path) / name).is_file() for name in ADAPTER_FILES)


def adapter_metadata(path) -> dict:
    file = Path(path) / ADAPTER_METADATA
    return store.read_json(file, f"Delete {Path(path)} and rerun the notebook that trains it.") if file.exists() else {}


def load_adapter(model, path, expected: dict | None = None):
    """Attach a saved adapter to a base model; with ``expected``, refuse one whose metadata differs from it in any
    key ``expected`` names (the metadata may hold more, such as the mask id it was trained with)."""
    from peft import PeftModel

    path = Path(path)
    if not (path / "adapter_config.json").exists():
        raise ValueError(f"path={str(path)!r} holds no adapter (adapter_config.json missing)")
    fix = f"Delete {path} and rerun the notebook that trains it."
    if not any((path / name).is_file() for name in ADAPTER_WEIGHTS):  # else peft looks for it on the Hub
        raise store.CorruptFileError(f"{path / ADAPTER_WEIGHTS[0]} is missing: the adapter at {path} has its config "
                                     f"but no weights file; it is damaged or truncated. {fix}")
    if expected is not None:
        wanted = store.canonical_settings(expected)
        stored = adapter_metadata(path)
        differences = store.flat_differences({key: stored.get(key) for key in wanted} if isinstance(wanted, dict)
                                             else stored, wanted)
        if differences:
            raise ValueError(f"the adapter at {path} was trained with other settings: {'; '.join(differences[:12])}. {fix}")
    try:
        with peft_quietly():
            return PeftModel.from_pretrained(model, str(path))
    except Exception as error:  # safetensors and json errors from peft: say which file and what to do
        if type(error).__name__ in ("SafetensorError", "JSONDecodeError", "HeaderTooLarge") or isinstance(
                error, (OSError, EOFError)):
            raise store.CorruptFileError(f"the adapter at {path} cannot be read ({type(error).__name__}: {error}); "
                                         f"it is damaged or truncated. {fix}") from error
        raise


def check_adapter_mask_id(path, mask_id: int, tokenizer) -> None:
    """Refuse an adapter trained with another mask id than ``mask_id`` (the one its mask-token setting resolves to
    now): a run whose data were built for another mask token, saved under this setting's name."""
    trained = adapter_metadata(path).get("mask_id")
    if trained is not None and int(trained) != int(mask_id):
        raise ValueError(f"the adapter at {path} was trained with mask id {trained} ({tokenizer.decode([int(trained)])!r}), "
                         f"but its mask-token setting resolves to id {mask_id} ({tokenizer.decode([int(mask_id)])!r}): its "
                         f"training data were built for another mask token. Delete {path} and rerun notebook 02.")


def adapter_path(kind: str, model_name: str, settings) -> Path:
    """Where an adapter trained under ``settings`` is cached, e.g. data/cache/adapters/mntp-embedded-smollm2-135m-<hash>.

    The fingerprint covers every setting (mask token included), so a reader asking for other settings never
    finds this adapter.
    """
    slug = model_name.replace(":", "-").replace("/", "-")
    return paths.cache_dir() / "adapters" / f"{kind}-{slug}-{store.fingerprint([kind, model_name, settings])}"

