"""A seed study's rows: each claim's per-seed rows joined by id (:func:`combine_seeds`), trained rows read at the
looks of the sequential plan fixed before the study (:func:`combine_study`, :mod:`helpers.ledger.sequential`) and
kept at the first look that decided them; the study's claims file written from the committed per-seed files
(:func:`record_study`) and re-derived from them when gathered (:func:`rederive_study`); and a single seed's values
against the study's prediction intervals for a new seed (:func:`seed_range_report`)."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from typing import Sequence

from .. import code_identity, metrics, profiles, store
from .declared import declared_claims
from .fields import DECIDED, DEFINITION, STUDY_MIN_SEEDS, curve, number
from .files import ProvenanceError, check_digest, claims_dir, read_payload, rows_to_json, study_dir
from .provenance import examples_of, examples_study, expected_parameters, files_text, prefix_of, seed_fingerprint
from .rows import Claim, verdict_of
from .sequential import SequentialPlan


def _seed_combined(group: Sequence[Claim], seeds: Sequence[int], plan=None, look: tuple[int, int] = (1, 1)) -> Claim:
    """One trained row from its per-seed rows: the seed mean, and a t interval over seeds with the examples nested
    (:func:`helpers.metrics.seeds_with_examples_interval`, each seed's half-width over the examples from its row).
    Its confound, baseline and note are recomputed from every seed (a seed's confound confounds the study; a
    baseline works only if it worked on every seed), and its budget check judges the seed-mean held-out curve. With
    ``plan``, ``look`` is (which look of the plan this is, the examples scale its seeds' rows were scored at)."""
    first = group[0]
    values = [row.value for row in group]
    if any(value is None for value in values):
        raise ValueError(f"notebook {first.notebook}, {first.id} ({first.quantity or first.claim}): a "
                         "trained row records no value= (its point estimate), so seeds cannot be averaged; give value= "
                         "in its report")
    halves = [(row.high - row.low) / 2 for row in group]
    level = 0.95 if plan is None else plan.level
    mean, low, high = metrics.seeds_with_examples_interval(values, halves, level)
    mde = metrics.seeds_with_examples_mde(values, halves, level=level) if first.kind in DECIDED else first.mde
    each = ", ".join(f"{seed}: {number(value)}" for seed, value in zip(seeds, values))
    works = all(row.baseline_works is True for row in group) if first.baseline else first.baseline_works
    confounds = dict.fromkeys(f"seed {seed}: {row.confound}" for seed, row in zip(seeds, group) if row.confound)
    notes = list(dict.fromkeys(row.note for row in group if row.note))
    note = notes[0] if len(notes) == 1 else "; ".join(f"seed {seed}: {row.note}" for seed, row in zip(seeds, group)
                                                      if row.note)
    curves = [row.plateau for row in group]
    plateau = None  # a seed without a curve leaves the study without one
    if all(found is not None for found in curves):
        gaps = all("against" in found for found in curves)  # a gap is read when every seed recorded it
        plateau = curve(f"{first.plateau['curve']}, mean of {len(group)} seeds",
                        metrics.mean_curve([found["points"] for found in curves]),
                        metrics.mean_curve([found["against"] for found in curves]) if gaps else None)
    return dataclasses.replace(
        first, verdict="", value=mean, low=low, high=high, n_seeds=len(group), seed_values=tuple(values),
        baseline_works=works, confound="; ".join(confounds), note=note,
        ours=f"{number(mean)} (mean of {len(group)} seeds; {each})",
        method=(f"t over {len(group)} training seeds, with {first.method} nested" + ("" if plan is None else
                f"; look {look[0]} of {len(plan.looks)} of a sequential plan"
                + (f", on {look[1]}x the test examples" if look[1] > 1 else "")
                + f", read at {100 * plan.level:.1f}% (the t rule's level for the plan, overall {100 * plan.alpha:g}%)")),
        plateau=plateau, mde=mde)


def combine_seeds(rows_by_seed: dict[int, Sequence[Claim]], plan=None) -> list[Claim]:
    """A seed study's rows: for each claim of the notebook, its rows from every seed made one (in seed ``min``'s order).

    A row that rests on training (``trained=True``) becomes the seed mean with :func:`_seed_combined`'s interval, its
    ``n_seeds`` and ``seed_values`` (its baseline works only if it worked on every seed), and needs at least
    :data:`STUDY_MIN_SEEDS` seeds; a definition check holds only if it holds on every seed; any other row (it does not
    rest on the seed) is seed ``min``'s. The verdict follows by the one rule. A claim missing from a seed, or found
    twice in one, is an error naming it and the seed. With ``plan`` (a :class:`~helpers.ledger.sequential.SequentialPlan`
    whose looks include the number of seeds), trained rows are read at each of its looks the seeds reach, at the plan's
    nominal level, and kept at the first that decides them (:func:`combine_study`)."""
    seeds = sorted(rows_by_seed)
    if not seeds:
        raise ValueError("rows_by_seed is empty; a seed study needs the rows of at least one seed")
    schedule = ((len(seeds), 1),) if plan is None else plan.seeds_schedule(len(seeds))
    return combine_study({(1, seed): rows for seed, rows in rows_by_seed.items()}, schedule, plan)


def combine_study(rows: dict[tuple[int, int], Sequence[Claim]], schedule: Sequence[tuple[int, int]],
                  plan=None) -> list[Claim]:
    """A seed study's rows from each (examples scale, seed)'s rows, read at the looks of ``schedule``: each look is
    (seeds, examples scale), its first ``seeds`` seeds' rows scored at that scale (an examples look scores the same
    trained runs on ``scale`` times the test examples). Each trained row is kept at the first look that decides it
    (:func:`verdict_of` not *inconclusive*), so seeds or examples run later for its notebook's other rows never re-read
    it; an undecided row is read at the last look. Rows that do not rest on training, and definition checks, come
    from the first look's seeds (an examples look re-reads only the trained rows the plan's boundary covers). Without
    ``plan``, ``schedule`` is one look read at 95%."""
    if plan is None:
        if len(schedule) != 1:
            raise ValueError(f"schedule={list(schedule)!r}: a study without a plan has one look")
        schedule = tuple((int(count), int(scale)) for count, scale in schedule)
    else:
        schedule = plan.check_schedule(schedule)
    seeds_at = {scale: sorted(seed for found, seed in rows if found == scale) for scale in {scale for _, scale in schedule}}
    for count, scale in schedule:
        if len(seeds_at[scale]) < count:
            raise ValueError(f"schedule={list(schedule)!r}: its look of {count} seeds at {scale}x the test examples "
                             f"has the rows of seeds {seeds_at[scale]} only")
    first_scale, first_seeds = schedule[0][1], seeds_at[schedule[0][1]][:schedule[0][0]]
    keyed = {}
    for where, found in rows.items():
        keyed[where] = {}
        for row in found:
            if row.id in keyed[where]:
                raise ValueError(f"seed {where[1]}{_scale_text(where[0])} has two rows for {row.id}; a declared claim "
                                 "is one row of its notebook")
            keyed[where][row.id] = row
    order = [row.id for row in rows[(first_scale, first_seeds[0])]]
    for where in sorted(keyed):
        unknown = sorted(set(keyed[where]) - set(order), key=str)
        missing = [key for key in order if key not in keyed[where]]
        if unknown or missing:
            raise ValueError(f"seed {where[1]}{_scale_text(where[0])}'s rows differ from seed {first_seeds[0]}'s: "
                             f"missing {missing}, extra {unknown}; every seed must run the same notebook under the "
                             "same settings")
    combined = []
    for key in order:
        group = [keyed[(first_scale, seed)][key] for seed in first_seeds]
        first = group[0]
        if first.kind == DEFINITION:
            combined.append(next((row for row in group if not row.holds), first))
        elif not first.trained:
            combined.append(first)
        elif schedule[-1][0] < STUDY_MIN_SEEDS:
            raise ValueError(f"{key}: a row that rests on training needs at least {STUDY_MIN_SEEDS} seeds; the study "
                             f"has {schedule[-1][0]}")
        elif plan is None:
            combined.append(_seed_combined(group, first_seeds))
        else:
            looks = [([keyed[(scale, seed)][key] for seed in seeds_at[scale][:count]], seeds_at[scale][:count], scale)
                     for count, scale in schedule]
            combined.append(_first_decided_look(looks, plan))
    return combined


def _scale_text(scale: int) -> str:
    return "" if scale == 1 else f" (at {scale}x the test examples)"


def _first_decided_look(looks: Sequence[tuple[Sequence[Claim], Sequence[int], int]], plan) -> Claim:
    """A trained row of a sequential study read at each of its ``looks`` in order ((its rows, their seeds, the examples
    scale) each), kept at the first whose reading decides it (:func:`verdict_of` not *inconclusive*): a row that
    crossed the boundary stops there, and seeds or examples run later for its notebook's other rows never re-read it.
    An undecided row is read at the last look."""
    for look, (group, seeds, scale) in enumerate(looks, start=1):
        row = _seed_combined(group, seeds, plan, (look, scale))
        if look == len(looks):
            return row
        if verdict_of(row) != "inconclusive":
            later = []
            for (_, before, _), (_, found, found_scale) in zip(looks[look - 1:], looks[look:]):
                added = found[len(before):] if len(found) > len(before) else found
                later.append(f"seeds {added[0]}..{added[-1]}{_scale_text(found_scale)}")
            return dataclasses.replace(row, method=f"{row.method}; decided there, so {'; '.join(later)} (run for "
                                                   "other rows) are not read")
    raise AssertionError("unreachable: the last look returns")


def study_provenance(origins: dict[int, dict], profile: str, plan=None, schedule=None,
                     examples: dict[int, dict[int, dict]] | None = None) -> dict:
    """The provenance of a seed study's rows: each seed's own, under ``study`` (``check_provenance`` verifies each
    against the profile with that seed), and the seeds; an examples look's seeds under ``examples_study`` (scale ->
    seed -> provenance); with ``plan``, the plan and the ``schedule`` of looks read ((seeds, examples scale) each)."""
    first = origins[min(origins)]
    everyone = list(origins.values()) + [each for by_seed in (examples or {}).values() for each in by_seed.values()]
    found = {"profile": profile, "profile_fingerprint": store.fingerprint(profiles.get(profile)),
             "seeds": sorted(int(seed) for seed in origins), "study": {str(seed): origins[seed] for seed in sorted(origins)},
             "commit": first.get("commit"), "dirty": any(origin.get("dirty") for origin in everyone),
             "machine": first.get("machine"), "mntp_adapter": first.get("mntp_adapter")}
    if examples:
        found["examples_study"] = {str(scale): {str(seed): by_seed[seed] for seed in sorted(by_seed)}
                                   for scale, by_seed in sorted(examples.items())}
    if plan is not None:
        schedule = plan.seeds_schedule(len(origins)) if schedule is None else plan.check_schedule(schedule)
        found["plan"] = {"looks": list(plan.looks), "alpha": plan.alpha, "examples_factor": plan.examples_factor,
                         "schedule": [list(look) for look in schedule]}
    return found


def study_seed_is_done(profile: str, seed: int, notebook: str, examples: int = 1, prefix: int = 1) -> bool:
    """Whether seed ``seed``'s claims of ``notebook`` (at ``examples`` times its test examples) are in
    :func:`study_dir`, computed under the profile with that seed, under the notebook's current parameters
    (:func:`~helpers.ledger.provenance.expected_parameters`) and at a commit whose code for the notebook is HEAD's
    (:func:`helpers.code_identity.code_current`): what lets an interrupted study resume without redoing a finished
    seed, and never keeps a seed computed under settings or code since changed (gathering would refuse it)."""
    path = study_dir(profile, seed, examples, prefix) / f"{notebook}.json"
    if not path.exists():
        return False
    origin = read_payload(path).get("provenance") or {}
    if origin.get("profile_fingerprint") != seed_fingerprint(profile, seed) or examples_of(origin) != examples \
            or prefix_of(origin) != prefix:
        return False
    seeded = profiles.get(profile).replace(seed=int(seed))
    return origin.get("parameters") == expected_parameters(notebook, seeded, examples, prefix) and \
        code_identity.code_current(origin.get("commit"), notebook)[0] is True


def _study_payloads(profile: str, notebook: str, seeds: Sequence[int], schedule) -> dict[tuple[int, int], dict]:
    """Each (examples scale, seed)'s claims file a study reads: ``seeds`` at scale 1, and each examples look's first
    seeds at its scale."""
    wanted = {(1, int(seed)) for seed in seeds}
    wanted |= {(scale, seed) for count, scale in (schedule or ()) if scale > 1 for seed in range(count)}
    return {where: read_payload(study_dir(profile, where[1], where[0]) / f"{notebook}.json") for where in sorted(wanted)}


def examples_grow_by_row(profile: str, notebook: str, seed: int = 0) -> dict[str, bool]:
    """Per row id of ``notebook``'s study, whether its test examples can still grow
    (:func:`~helpers.ledger.sequential.examples_grow`), from the example count ``n`` seed ``seed`` read at each
    examples scale whose per-seed file is there; rows read at one scale only can grow."""
    from .sequential import examples_grow

    counts: dict[str, dict[int, int | None]] = {}
    scale = 1
    while (path := study_dir(profile, seed, scale) / f"{notebook}.json").exists():
        for row in read_payload(path)["claims"]:
            counts.setdefault(row.id, {})[scale] = row.n
        scale *= 2
    return {row_id: examples_grow(found) for row_id, found in counts.items()}


def redeclared_rows(rows: Sequence[Claim]) -> list[Claim]:
    """A per-seed file's rows read under their current declarations (:meth:`~helpers.ledger.declared.Declared.
    redeclare`): what was measured as recorded, what it means as declared now. A row whose id no paper declares is
    kept as recorded; ``python -m helpers.ledger --check`` names it (:func:`~helpers.ledger.audit.undeclared_rows`)."""
    declared = declared_claims()
    return [declared[row.id].redeclare(row) if row.id in declared else row for row in rows]


def _combined_from(payloads: dict[tuple[int, int], dict], profile: str, plan, schedule) -> tuple[list[Claim], dict]:
    rows = {where: redeclared_rows(payload["claims"]) for where, payload in payloads.items()}
    if plan is None:
        rows = combine_seeds({seed: found for (scale, seed), found in rows.items()})
    else:
        schedule = plan.seeds_schedule(len([1 for scale, _ in payloads if scale == 1])) if schedule is None else schedule
        rows = combine_study(rows, schedule, plan)
    origins = {seed: payload["provenance"] for (scale, seed), payload in payloads.items() if scale == 1}
    examples = {}
    for (scale, seed), payload in payloads.items():
        if scale > 1:
            examples.setdefault(scale, {})[seed] = payload["provenance"]
    return rows, study_provenance(origins, profile, plan, schedule, examples)


def record_study(profile: str, seeds: Sequence[int], notebook: str, plan=None, schedule=None) -> list[Claim]:
    """Combine ``notebook``'s per-seed claims (:func:`combine_seeds`, at ``plan``'s level when given; with
    ``schedule``, the plan's looks as run, examples looks included: :func:`combine_study`) into its claims file
    ``runs/claims/<profile>/<notebook>.json``, with :func:`study_provenance`; returns the combined rows."""
    payloads = _study_payloads(profile, notebook, seeds, schedule)
    rows, origin = _combined_from(payloads, profile, plan, schedule)
    store.write_text(claims_dir(profile) / f"{notebook}.json",
                     rows_to_json(rows, notebook=notebook, profile=profile, provenance=origin,
                                   written=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")))
    for found in sorted(study_dir(profile, min(seeds)).glob(f"{notebook}_*.json")):  # the first seed's tables
        store.write_text(claims_dir(profile) / found.name, found.read_text())
    return rows


def rederive_study(payload: dict, profile: str, notebook: str) -> None:
    """Refuse a study-form claims file (its provenance has ``study``) that is not what its per-seed files give
    (:func:`combine_seeds` over ``study_dir(profile, seed)/<notebook>.json``): numbers edited by hand, a seed's file
    gone or rerun since."""
    restudy = f"run its seed study again (python scripts/study.py notebooks/{notebook}_*.ipynb)"
    seeds = sorted(int(seed) for seed in payload["provenance"]["study"])
    files = {(1, seed): study_dir(profile, seed) / f"{notebook}.json" for seed in seeds}
    for scale, by_seed in examples_study(payload["provenance"]).items():
        files.update({(scale, seed): study_dir(profile, seed, scale) / f"{notebook}.json" for seed in by_seed})
    missing = [str(path) for path in files.values() if not path.exists()]
    if missing:
        raise ProvenanceError(f"notebook {notebook}'s seed study cannot be re-derived: {files_text(missing)} missing; "
                              f"{restudy}")
    for (scale, seed), path in files.items():
        check_digest(path, notebook, f"notebook {notebook}'s claims of seed {seed}{_scale_text(scale)}", restudy)
    payloads = {where: read_payload(path) for where, path in sorted(files.items())}
    recorded = payload["provenance"].get("plan")
    plan = schedule = None
    if recorded is not None:
        try:
            plan = SequentialPlan(looks=tuple(recorded["looks"]), alpha=float(recorded["alpha"]),
                                  examples_factor=int(recorded.get("examples_factor", 2)))
            schedule = tuple(tuple(look) for look in recorded["schedule"]) if "schedule" in recorded else None
        except (KeyError, TypeError, ValueError) as error:
            raise ProvenanceError(f"notebook {notebook}'s seed-study file records a malformed plan ({error}); "
                                  f"{restudy}") from error
    rows, origin = _combined_from(payloads, profile, plan, schedule)
    origin = json.loads(json.dumps(origin))
    differ = [row.id for row, derived in zip(payload["claims"], rows) if row != derived]
    if len(rows) != len(payload["claims"]) or differ or origin != payload["provenance"]:
        what = (f"rows {files_text(differ)}" if differ else "its rows" if len(rows) != len(payload["claims"])
                else "its provenance")
        raise ProvenanceError(f"notebook {notebook}'s seed-study file is not what its per-seed files give ({what} "
                              f"differ: edited by hand, or a seed rerun since); {restudy}")


def seed_prediction_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Where one new seed's value should fall, given a study's per-seed ``values``: the prediction interval
    ``mean ± t(level; n−1) · s · sqrt(1 + 1/n)``. The seeds' min..max is no such interval: a fourth seed lands outside
    the range of three half the time."""
    from scipy import stats  # scipy only where a prediction interval is asked for

    values = [float(value) for value in values]
    if len(values) < 2:
        raise ValueError(f"values={values!r}: a prediction interval needs at least 2 seeds' values")
    n = len(values)
    mean = sum(values) / n
    spread = (sum((value - mean) ** 2 for value in values) / (n - 1)) ** 0.5
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * spread * (1 + 1 / n) ** 0.5
    return mean - half, mean + half


def seed_values_at(profile: str, notebook: str, seeds: Sequence[int], examples: int = 1,
                   prefix: int = 1) -> dict[str, tuple]:
    """Each trained row's value in every one of ``seeds``' per-seed claims files of ``notebook`` at ``examples`` times
    its test examples (by id; rows some seed lacks are left out): what a single-seed run at that scale is compared
    with. A study row is kept at the look that decided it, often a larger examples scale, whose values do not
    describe a run on the notebook's own examples."""
    found: dict[str, list[float]] = {}
    for seed in seeds:
        path = study_dir(profile, int(seed), examples, prefix) / f"{notebook}.json"
        if not path.exists():
            return {}
        for row in read_payload(path)["claims"]:
            if row.trained and row.value is not None:
                found.setdefault(row.id, []).append(float(row.value))
    return {row_id: tuple(values) for row_id, values in found.items() if len(values) == len(seeds)}


def seed_range_report(single: Sequence[Claim], study: Sequence[Claim],
                      values: dict[str, tuple] | None = None, where: str | None = None) -> list[str]:
    """For each trained row of a single-seed run: whether its value lies inside the study row's 95% prediction
    interval for a new seed (:func:`seed_prediction_interval` over ``values[row id]``, the study's seeds at the run's
    own test examples (:func:`seed_values_at`), else the study row's ``seed_values``). A study row whose seeds all read
    the same value has no spread to judge a rerun by (a judge's floor): it is named NOT COMPARED, never passed. A
    single seed's verdict is never the study's, so none is printed. ``where``: how the seeds' values were read, said
    after their count (default: at the run's own test examples, when ``values`` are given)."""
    seeds = values if values is not None else {row.id: row.seed_values for row in study if row.seed_values}
    if where is None:
        where = " at the run's own test examples" if values is not None else ""
    lines = []
    for row in single:
        if not row.trained or row.value is None:
            continue
        values = seeds.get(row.id)
        if not values or len(values) < 2:
            lines.append(f"{row.where} ({row.quantity or row.claim}): {number(row.value)}; no study row")
            continue
        if max(values) - min(values) == 0:  # every seed read one value, as at a judge's floor: no spread to judge by
            lines.append(f"{row.where} ({row.quantity or row.claim}): {number(row.value)} NOT COMPARED: the study's "
                         f"{len(values)} seeds all read {number(values[0])} (no spread, as when every seed sits at a "
                         "judge's floor), so no prediction interval can pass a rerun")
            continue
        low, high = seed_prediction_interval(values)
        inside = low <= row.value <= high
        lines.append(f"{row.where} ({row.quantity or row.claim}): {number(row.value)} "
                     f"{'inside' if inside else 'OUTSIDE'} the study's 95% prediction interval for a new seed "
                     f"[{number(low)}, {number(high)}] ({len(values)} seeds{where})")
    return lines
