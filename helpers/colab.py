"""Colab set-up, called by every notebook's first code cell after it pip-installs the workbook.

``prepare(notebook, drive=...)``:

- with ``drive=True``, mounts Google Drive and sets ``WORKBOOK_ROOT`` to ``MyDrive/mlm-workbook``, so runs/,
  figures/ and data/cache/ survive a disconnect and an interrupted training resumes from its last checkpoint;
  ``WORKBOOK_ROOT`` set beforehand (e.g. ``%env WORKBOOK_ROOT=/content/drive/MyDrive/elsewhere``) wins;
- copies the ``HF_TOKEN`` Colab secret (key icon, with notebook access on) into the environment, for gated
  models such as Llama-2 (the paper profile);
- fetches the offline assets the profile and notebook need (:func:`helpers.assets.required_for`);
- says which GPU it found, and how to get one when there is none.
"""
from __future__ import annotations

import os
from pathlib import Path

DRIVE_MOUNT = Path("/content/drive")
DRIVE_ROOT = DRIVE_MOUNT / "MyDrive" / "mlm-workbook"


def use_drive(mount: Path | None = None, root: Path | None = None) -> Path:
    """Mount Drive (Colab asks for permission once) and keep the workbook's files under ``root``."""
    mount, root = mount or DRIVE_MOUNT, root or DRIVE_ROOT
    if not (mount / "MyDrive").is_dir():
        from google.colab import drive

        drive.mount(str(mount))
    if not os.environ.get("WORKBOOK_ROOT"):
        os.environ["WORKBOOK_ROOT"] = str(root)
    root = Path(os.environ["WORKBOOK_ROOT"])
    root.mkdir(parents=True, exist_ok=True)
    return root


def hf_token_from_secrets() -> bool:
    """Copy the ``HF_TOKEN`` Colab secret into the environment; False when there is none or no access."""
    if os.environ.get("HF_TOKEN"):
        return True
    try:
        from google.colab import userdata

        token = userdata.get("HF_TOKEN")
    except Exception:  # no such secret, notebook access off, or not in Colab
        return False
    if token:
        os.environ["HF_TOKEN"] = token
    return bool(token)


def prepare(notebook: str, *, drive: bool = False) -> dict:
    """Drive (optional), HF_TOKEN, the profile's offline assets and a GPU check; returns what it did."""
    import torch

    from . import assets, profiles
    from .device import precision

    done = {"root": str(use_drive()) if drive else os.environ.get("WORKBOOK_ROOT", os.getcwd())}
    done["hf_token"] = hf_token_from_secrets()
    profile = profiles.current()
    done["assets"] = assets.fetch_for(profile, notebook)
    if torch.cuda.is_available():
        done["gpu"] = torch.cuda.get_device_name(0)
        print(f"[colab] GPU {done['gpu']} ({precision().reason}); profile {profile.name}; files under {done['root']}"
              f"{'' if drive else ' (not on Drive: set DRIVE = True above to resume after a disconnect)'}")
    else:
        done["gpu"] = None
        print(f"[colab] no GPU: Runtime > Change runtime type > T4 GPU, then rerun. Profile {profile.name} on the CPU "
              f"will be slow outside the cpu profile.")
    if profile.model_name.startswith("meta-llama/") and not done["hf_token"]:
        from .models import gated_model_message

        print("[colab] " + gated_model_message(profile.model_name))
    return done
