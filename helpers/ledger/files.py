"""The ledger's files: where each lives, how each is read, and the digest that seals a notebook's claims file or result
table (:func:`sealed_json`, :func:`check_digest`; the one writer of those files is
:func:`helpers.ledger.notebook.write_sealed`).

- ``runs/claims/<profile>/<NN>.json`` (and ``<NN>_<table>.json``): a notebook's claims (result table), sealed;
- ``claims/study/<profile>/[examples-x<k>/]seed-<s>/``: one seed of a seed study's files, sealed and committed;
- ``claims/ledger_<profile>.json`` and ``claims/tables_<profile>.json``: the committed ledger and its result tables;
- ``docs/claims.md`` and ``README.md``: the files whose generated blocks the ledger renders.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from ..paths import repo_root, runs_dir
from .rows import Claim
from .tables import ResultTable

LEDGER_PROFILE = "cpu"
# Profiles with a ledger of their own (claims/ledger_<profile>.json): cpu's is the docs'; gpu's is a user's own scale.
LEDGER_PROFILES = ("cpu", "gpu")
# Where the generated blocks live, relative to the repo root: the full claims table, the result tables and a gpu
# ledger's block in CLAIMS_DOC; the ledger's headline (counts only) in README.
LEDGER_DOC = "docs/ledger.md"
CLAIMS_DOC = "docs/claims.md"
README = "README.md"
GENERATED_FILES = (README, CLAIMS_DOC)
# A generated block of those files, markers included (helpers.ledger.render writes them).
GENERATED_BLOCK = re.compile(r"<!-- (claims|claims:gpu|headline|table:[^:\s]+):begin[^>]*-->.*?<!-- \1:end -->", re.S)


class ProvenanceError(ValueError):
    """A claims file (or ledger row) whose provenance does not belong in the ledger it would enter."""


def claims_dir(profile: str) -> Path:
    return runs_dir() / "claims" / profile


def study_dir(profile: str, seed: int, examples: int = 1, prefix: int = 1) -> Path:
    """Where one seed of a seed study writes its claims: ``claims/study/<profile>/seed-<seed>/``, committed beside the
    ledger (a few kilobytes per notebook), so a later look of the study, or a rebuild of the ledger, starts from them on
    any machine, a fresh clone included; their provenance names the machine that computed them. An examples look
    (``examples`` times the test examples, ``WORKBOOK_EXAMPLES``) writes to ``claims/study/<profile>/examples-x<k>/
    seed-<seed>/``; the same seed's runs cut to 1/``prefix`` of their length (the prefix make reproduce trains, run
    before the full length) to ``claims/study/<profile>/prefix-<N>/seed-<seed>/``."""
    for name, value in (("examples", examples), ("prefix", prefix)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number >= 1")
    if examples > 1 and prefix > 1:
        raise ValueError(f"examples={examples} and prefix={prefix}: a prefix is recorded at the notebook's own examples")
    folder = repo_root() / "claims" / "study" / profile
    if prefix > 1:
        folder = folder / f"prefix-{prefix}"
    return (folder if examples == 1 else folder / f"examples-x{examples}") / f"seed-{int(seed)}"


def ledger_path(profile: str = LEDGER_PROFILE) -> Path:
    return repo_root() / "claims" / f"ledger_{profile}.json"


def tables_path(profile: str = LEDGER_PROFILE) -> Path:
    return repo_root() / "claims" / f"tables_{profile}.json"


def claims_doc_path(root: Path | None = None) -> Path:
    """docs/claims.md under ``root`` (the repo root by default): the full claims table and the result tables."""
    return Path(root or repo_root()) / CLAIMS_DOC


def ledger_doc_path(root: Path | None = None) -> Path:
    """docs/ledger.md under ``root`` (the repo root by default): how the ledger decides, with the counts of what the
    design can decide."""
    return Path(root or repo_root()) / LEDGER_DOC


def readme_path(root: Path | None = None) -> Path:
    """README.md under ``root`` (the repo root by default): the ledger's headline."""
    return Path(root or repo_root()) / README


def journal_path() -> Path:
    """The journal of a gather's one write of the ledger, the tables file and the docs together."""
    return ledger_path().with_name(".gather.journal.json")


def _unreadable(path: Path, error: Exception) -> ValueError:
    return ValueError(f"{path} is not a readable claims file ({error}); rerun the notebook that writes it "
                      f"(WORKBOOK_PROFILE=<profile> python scripts/reproduce.py notebooks/<NN>_*.ipynb)")


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise _unreadable(Path(path), error) from error


def read_payload(path: Path) -> dict:
    """A claims file or ledger as written, its ``claims`` read as :class:`~helpers.ledger.rows.Claim` rows (each
    re-checked: a verdict that does not follow from its row is refused)."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
        payload["claims"] = [Claim(**row) for row in payload["claims"]]
        return payload
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise _unreadable(path, error) from error


def read_rows(path: Path) -> list[Claim]:
    """The claims in one ledger file; a broken file is an error naming it and the command that rewrites it."""
    return read_payload(path)["claims"]


def read_provenance(path: Path | None = None) -> dict[str, dict]:
    """The committed ledger's provenance, notebook -> the provenance of the run its rows came from."""
    path = Path(path or ledger_path())
    return read_payload(path).get("provenance", {}) if path.exists() else {}


def read_changes(path: Path | None = None) -> list[dict]:
    """The verdict changes the committed ledger records against the ledger it replaced."""
    path = Path(path or ledger_path())
    return list(read_payload(path).get("changes", [])) if path.exists() else []


def read_table(path: Path, payload: dict | None = None) -> ResultTable:
    """The result table one notebook wrote (``runs/claims/<profile>/<notebook>_<name>.json``; ``payload``: its
    content, already read)."""
    path = Path(path)
    payload = read_json(path) if payload is None else payload
    try:
        return ResultTable(**{field: payload[field] for field in ("notebook", "name", "title", "header", "rows", "note")})
    except (KeyError, TypeError, ValueError) as error:
        raise _unreadable(path, error) from error


def read_tables(path: Path | None = None) -> list[ResultTable]:
    """The committed result tables (``claims/tables_cpu.json``); none when the file does not exist yet."""
    path = Path(path or tables_path())
    if not path.exists():
        return []
    try:
        return [ResultTable(**entry) for entry in json.loads(path.read_text())["tables"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a readable tables file ({error}); restore it with `git checkout {path.name}` "
                         "or rerun `make reproduce`") from error


def tables_to_json(tables: Sequence[ResultTable], profile: str) -> str:
    return json.dumps({"profile": profile, "tables": [entry.to_json() for entry in tables]}, indent=1,
                      ensure_ascii=False) + "\n"


def rows_to_json(rows: Sequence[Claim], **header) -> str:
    """A ledger (or a seed study's combined claims file): ``header``'s fields, then the rows."""
    return json.dumps({**header, "claims": [asdict(row) for row in rows]}, indent=1, sort_keys=False) + "\n"


def content_digest(payload: dict) -> str:
    """The sha256 of a claims file's content (every field but ``digest`` itself, as JSON with sorted keys): what a
    claims file or result table is sealed with, so that a number edited by hand afterwards is refused."""
    body = {key: value for key, value in json.loads(json.dumps(payload)).items() if key != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def sealed_json(payload: dict) -> str:
    """``payload`` as a claims file's JSON, with its :func:`content_digest`."""
    payload = json.loads(json.dumps(payload))
    return json.dumps({**payload, "digest": content_digest(payload)}, indent=1, ensure_ascii=False) + "\n"


def check_digest(path: Path, notebook: str, what: str, rerun: str, raw: dict | None = None) -> None:
    """Refuse a claims file or result table whose content (``raw``, else read from ``path``) is not what the notebook
    sealed: its digest missing (written by hand) or no longer matching (edited since)."""
    path = Path(path)
    raw = read_json(path) if raw is None else raw
    if raw.get("digest") != content_digest(raw):
        raise ProvenanceError(f"{what} ({path}) do not match the digest notebook {notebook} sealed them with (edited "
                              f"after it wrote them, or written by hand); {rerun}")


def ledger_code(path: Path | None = None) -> dict[str, dict]:
    """What the ledger says of each notebook's code: ``{"commit", "changed": files changed since that commit when
    gathered (None: the commit was not found), "carried": the equal-numbers record that carried it}``. Read from the
    ledger alone, so the docs it renders never depend on the checkout."""
    path = Path(path or ledger_path())
    return dict(read_payload(path).get("code", {}).get("notebooks", {})) if path.exists() else {}


