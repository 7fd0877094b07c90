"""Where a notebook's claims come from (:func:`provenance`), and the checks that keep claims out of a ledger they do
not belong in (:func:`check_provenance`, :func:`check_consistent`): the profile and its settings, the notebook's
parameters (:func:`expected_parameters`), the commit and whether the notebook's code changed since
(:mod:`helpers.code_identity`), the weight dtype, and the MNTP adapter the rows rest on."""
from __future__ import annotations

import platform
from typing import Sequence

import torch

from .. import code_identity, papers, profiles, store
from ..device import cpu_model, device_label, get_device
from ..paths import repo_root
from .files import GENERATED_BLOCK, GENERATED_FILES, ProvenanceError


def provenance(profile, runs: dict | None = None, seeds: Sequence[int] | None = None) -> dict:
    """Where a notebook's claims come from: the profile (name and the fingerprint of all its settings), the
    fingerprint of the settings of every run the claims rest on (``runs``: name -> settings object), the seeds, the
    code (commit, and whether the tree had uncommitted changes) and the machine (CPU model, torch, Python)."""
    from .. import models  # it imports transformers, which only a notebook's run needs
    from .. import mntp_recipe

    profile = profiles.get(profile) if isinstance(profile, str) else profile
    if not isinstance(profile, profiles.Profile):
        raise ValueError(f"profile={profile!r} must be the notebook's Profile (cfg) or a profile name")
    dirty = _dirty()
    return {"profile": profile.name, "profile_fingerprint": store.fingerprint(profile),
            "runs": {str(name): store.fingerprint(settings) for name, settings in sorted((runs or {}).items())},
            "seeds": sorted({int(seed) for seed in (seeds if seeds is not None else [profile.seed])}),
            "mntp_adapter": mntp_recipe.loaded_mntp_adapters().get(profile.name),
            "commit": code_identity.git("rev-parse", "HEAD"), "dirty": dirty,
            "model": profile.model_name, "dtype": models.weight_dtype_name(profile),
            "machine": {"cpu": cpu_model(), "device": device_label(get_device()), "torch": torch.__version__,
                        "python": platform.python_version()}}


# What a run writes itself, so never makes the tree dirty: figures, runs, the ledger and the generated blocks of the
# README and docs/claims.md.
_RUN_OUTPUTS = (":!figures", ":!runs", ":!claims", *(f":!{name}" for name in GENERATED_FILES))


def _dirty() -> bool | None:
    """Whether the tree has uncommitted changes other than the files a run writes itself (:data:`_RUN_OUTPUTS`; the
    README and docs/claims.md count only outside their generated blocks); None when git cannot say."""
    git = code_identity.git
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", *_RUN_OUTPUTS)
    if status is None or status:
        return None if status is None else True
    for name in GENERATED_FILES:
        if not git("diff", "--name-only", "HEAD", "--", name):
            continue
        committed, current = git("show", f"HEAD:{name}"), repo_root() / name
        if committed is None or not current.exists():
            return True
        if GENERATED_BLOCK.sub("", committed).strip() != GENERATED_BLOCK.sub("", current.read_text()).strip():
            return True
    return False


def random_weights_refusal(model: str, where: str) -> str:
    """The one line that refuses a random-weight run's claims (``WORKBOOK_MODEL=random:...``)."""
    return (f"notebook {where}'s claims were computed on random weights ({model}), which measure nothing of the "
            f"papers, so they never enter a ledger; unset WORKBOOK_MODEL and rerun the notebook on the profile's own "
            f"model to record claims")


def seed_fingerprint(profile: str, seed: int) -> str:
    """The fingerprint of ``profile`` under seed ``seed``: what one seed of a study must have been computed under."""
    return store.fingerprint(profiles.get(profile).replace(seed=int(seed)))


def notebook_settings(notebook: str, profile, examples: int = 1, prefix: int = 1) -> list:
    """What notebook ``notebook``'s parameters cell registers beside the profile (``ledger.parameters(notebook, cfg,
    *these)``) as committed: its package's settings for ``profile`` (the registry, ``helpers.papers``; notebook 02's
    are the masked-LM recipe) with ``examples`` times their test examples (an examples look's) and its trained runs at
    1/``prefix`` of their length (make reproduce's), then what the registry says the cell registers besides
    (notebook 02's mask token)."""
    profile = profiles.get(profile) if isinstance(profile, str) else profile
    entry = papers.notebook(notebook)
    return [profiles.settings_for(entry.package, profile, examples, prefix), *entry.registers]


def expected_parameters(notebook: str, profile, examples: int = 1, prefix: int = 1) -> str:
    """The parameters fingerprint notebook ``notebook``'s claims must carry under ``profile`` (a Profile, e.g. one
    seed of a study, or a name): what its parameters cell registers, unedited (at ``examples`` times its test
    examples: a seed study's examples look; at 1/``prefix`` of its trained runs' lengths: a prefix run's)."""
    profile = profiles.get(profile) if isinstance(profile, str) else profile
    return store.fingerprint([profile, *notebook_settings(notebook, profile, examples, prefix)])


def files_text(names: Sequence[str], most: int = 4) -> str:
    """``names`` in one phrase: the first ``most``, then how many more."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def rerun(profile: str, notebook: str) -> str:
    return (f"rerun notebook {notebook} under WORKBOOK_PROFILE={profile} (python scripts/reproduce.py "
            f"notebooks/{notebook}_*.ipynb)")


def check_code(origin: dict, profile, where: str, what: str, again: str) -> None:
    """The commit ``origin`` names exists and the notebook's code is unchanged since it (or carried by equal
    numbers); its parameters fingerprint is the one the notebook's parameters cell registers under ``profile``
    (:func:`expected_parameters`)."""
    commit = origin.get("commit")
    current, how = code_identity.code_current(commit, where)
    if current is None:
        raise ProvenanceError(f"{what} were computed at commit {commit!r}, which is not a commit of this repository; "
                              f"{again}")
    if not current:
        raise ProvenanceError(f"{what} were computed at commit {commit[:7]}, and notebook {where}'s code has changed "
                              f"since ({files_text(code_identity.code_changes(commit, where) or [])}); {again} (or, if "
                              "the change moved no number, show it: python -m helpers.equal_numbers)")
    expected = expected_parameters(where, profile, examples_of(origin), prefix_of(origin))
    if origin.get("parameters") != expected:
        found = origin.get("parameters")
        differs = (f"were computed under other notebook parameters (fingerprint {found}, the parameters cell's as "
                   f"committed is {expected})" if found else
                   "record no notebook parameters (ledger.parameters in the parameters cell)")
        raise ProvenanceError(f"{what} {differs}; {again}")


def examples_of(origin: dict) -> int:
    """The examples look a seed's claims were computed at (1: the notebook's own test examples); only a study seed's
    provenance records one, so a single-seed run at another scale is refused (its parameters differ)."""
    scale = origin.get("examples_scale", 1) if "study_seed" in origin else 1
    return scale if isinstance(scale, int) and not isinstance(scale, bool) and scale >= 1 else 1


def prefix_of(origin: dict) -> int:
    """The share 1/N of their lengths a run's trained runs were cut to (``prefix`` in its provenance; 1: the full
    length): make reproduce's prefix runs, and a study's record of them."""
    prefix = origin.get("prefix", 1)
    return prefix if isinstance(prefix, int) and not isinstance(prefix, bool) and prefix >= 1 else 1


def examples_study(origin: dict) -> dict[int, dict[int, dict]]:
    """A study provenance's examples looks: scale -> seed -> that seed's provenance at that scale (``{}``: none); an
    error when the entry is malformed."""
    found = origin.get("examples_study", {})
    try:
        return {int(scale): {int(seed): each for seed, each in by_seed.items()} for scale, by_seed in found.items()}
    except (AttributeError, TypeError, ValueError) as error:
        raise ProvenanceError(f"a seed study's examples_study entry is malformed ({error}); run the study again "
                              "(make study)") from error


def check_provenance(origin: dict | None, profile: str, where: str, *, code: bool = True,
                     what: str | None = None) -> None:
    """Refuse claims that were not computed under ``profile``'s own settings (a smoke run saved under the cpu name,
    a profile edited in the kernel, a file from before provenance was recorded) and, with ``code``, at a commit of
    this repository whose code for the notebook is HEAD's, under the notebook's own parameters (:func:`check_code`).
    Each refusal is one line naming the notebook, what differs and the command that fixes it."""
    what = what or f"notebook {where}'s claims"
    again = rerun(profile, where)
    if not isinstance(origin, dict):
        raise ProvenanceError(f"{what} record no provenance (profile, run settings, commit), so "
                              f"nothing says they are {profile}-profile numbers; {again}")
    if origin.get("profile") != profile:
        raise ProvenanceError(f"{what} were computed under the {origin.get('profile')!r} profile, "
                              f"not {profile!r}; {again}")
    if "study" in origin:
        _check_study(origin, profile, where, code, what)
        return
    expected = store.fingerprint(profiles.get(profile))
    if origin.get("profile_fingerprint") != expected:
        raise ProvenanceError(f"{what} were computed under other {profile}-profile settings "
                              f"(fingerprint {origin.get('profile_fingerprint')}, the profile's is {expected}): a "
                              f"profile changed in the kernel, by WORKBOOK_DTYPE (compared with the ledger, never gathered) or "
                              f"by an older workbook; {again}")
    if code:
        check_code(origin, profiles.get(profile), where, what, again)


def _check_study(origin: dict, profile: str, where: str, code: bool, what: str) -> None:
    """:func:`check_provenance` of a seed study's provenance: each seed's (and each examples look's) own."""
    restudy = f"run its seed study again (python scripts/study.py notebooks/{where}_*.ipynb)"
    if not isinstance(origin["study"], dict) or not origin["study"]:
        raise ProvenanceError(f"{what}: a seed study that names no seeds; {restudy}")
    for seed, seed_origin in sorted(origin["study"].items()):
        if not isinstance(seed_origin, dict) or seed_origin.get("profile_fingerprint") != seed_fingerprint(profile, seed):
            raise ProvenanceError(f"{what}'s seed study: seed {seed}'s claims were computed under other "
                                  f"{profile}-profile settings than the profile with seed {seed}; run the study "
                                  f"again (make study)")
        if code:
            check_code(seed_origin, profiles.get(profile).replace(seed=int(seed)), where,
                       f"{what} (seed {seed} of its study)", restudy)
    for scale, by_seed in sorted(examples_study(origin).items()):
        for seed, seed_origin in sorted(by_seed.items()):
            if not isinstance(seed_origin, dict) or examples_of(seed_origin) != scale or \
                    seed_origin.get("profile_fingerprint") != seed_fingerprint(profile, seed):
                raise ProvenanceError(f"{what}'s seed study: seed {seed} at {scale}x the test examples was not "
                                      f"computed under the profile with seed {seed} at that scale; {restudy}")
            if code:
                check_code(seed_origin, profiles.get(profile).replace(seed=int(seed)), where,
                           f"{what} (seed {seed} of its study, at {scale}x the test examples)", restudy)


def by_seed(origin: dict) -> dict[str, dict]:
    """A notebook's provenance per seed: a study's ``study`` entries, or the single run's under its seed."""
    if isinstance(origin.get("study"), dict):
        return {str(seed): each for seed, each in origin["study"].items() if isinstance(each, dict)}
    return {str(seed): origin for seed in origin.get("seeds") or [None]}


def rested_adapters(origins: dict[str, dict]) -> list[tuple[str, str, dict]]:
    """``(notebook, seed, adapter)`` for every seed of every notebook but 02 whose rows rest on an MNTP adapter (its
    provenance's ``mntp_adapter``: source and run fingerprint), by notebook and seed: what :func:`check_consistent`
    compares with the adapter notebook 02's rows measure."""
    return [(notebook, seed, each["mntp_adapter"]) for notebook in sorted(set(origins) - {"02"})
            for seed, each in by_seed(origins[notebook]).items() if isinstance(each.get("mntp_adapter"), dict)]


def check_consistent(origins: dict[str, dict], fresh: Sequence[str]) -> None:
    """Refuse a ledger whose notebooks were not computed together: each newly gathered notebook (``fresh``) must
    share the weight dtype of every other notebook in the ledger (a bf16 run's rows beside a float32 run's), and a
    notebook whose rows rest on the MNTP adapter must have read the very adapter notebook 02's rows measured (its
    run fingerprint, seed by seed), never the short fallback. Provenance from before the dtype was recorded is not
    compared."""
    fresh = set(fresh)
    dtypes = {notebook: each.get("dtype") for notebook, origin in origins.items()
              for each in by_seed(origin).values() if each.get("dtype")}
    for notebook in sorted(fresh):
        others = {dtype for other, dtype in dtypes.items() if other != notebook and dtype != dtypes.get(notebook)}
        if notebook in dtypes and others:
            clash = sorted(other for other, dtype in dtypes.items() if dtype in others)
            raise ProvenanceError(f"notebook {notebook}'s claims were computed in {dtypes[notebook]} and notebook "
                                  f"{files_text(clash)}'s in {' and '.join(sorted(others))}; a ledger is one machine's "
                                  "dtype: rerun every notebook on this machine (make reproduce) and gather them together")
    measured = by_seed(origins["02"]) if "02" in origins else {}
    for notebook, seed, adapter in rested_adapters(origins):
        if notebook not in fresh and "02" not in fresh:
            continue
        if adapter.get("source") == "fallback":
            raise ProvenanceError(f"notebook {notebook}'s claims rest on the short fallback MNTP adapter (notebook "
                                  "02 had not run), not the one notebook 02's rows measure; run notebook 02, then "
                                  f"notebook {notebook} (make reproduce runs them in order)")
        trained = ((measured.get(seed) or {}).get("runs") or {}).get("mntp")
        if trained and adapter.get("fingerprint") != trained:
            raise ProvenanceError(f"notebook {notebook}'s claims (seed {seed}) rest on MNTP adapter "
                                  f"{adapter.get('fingerprint')}, but notebook 02's rows measure adapter {trained}; "
                                  f"rerun notebook 02 and then notebook {notebook} and gather them together "
                                  "(make reproduce)")
