"""The seed study: run notebooks once per seed and write the committed ledger from every seed's claims.

Each seed runs the chosen notebooks under ``WORKBOOK_SEED=<seed>`` (the profile's seed: every run key that rests on it,
so each seed trains and finds its own runs), writing its claims to ``claims/study/<profile>/seed-<seed>/`` (committed).
A (seed, notebook) whose claims file is there, computed under the profile with that seed and by the notebook's current
code, is not run again: an interrupted study resumes where it stopped. Then each notebook's rows are combined over the
seeds (``helpers.ledger.combine_seeds``:
a trained row becomes the seed mean with a t interval over seeds, the examples nested, and records each seed's value)
and gathered into ``claims/ledger_cpu.json`` and the docs' generated blocks, marked as a study; a later single-seed ``make reproduce``
keeps them and prints whether its values fall inside the study's prediction intervals. Ctrl-C stops the study at once (the
running kernel is shut down), names what finished, combines and gathers nothing, and exits 130; a rerun resumes.

With ``--plan`` the study follows a plan fixed before it starts (``helpers.ledger.sequential``): at most three looks under
one level for every look's t interval, simulated to keep 5% overall (98.0% for looks after 3, 5 and 8 seeds), the
cost of each look stated before it runs; each notebook's next look is the one that narrows its live rows most per
CPU-minute: more seeds (3, then 5, then 8) or an examples look (the same seeds' trained runs scoring twice the test
examples, ``WORKBOOK_EXAMPLES=2``, written to ``claims/study/<profile>/examples-x2/``), never an examples look for rows
whose examples cannot grow. Each row is kept at
the first look that decided it and says which look that was; after every look the ledger is gathered as the study
stands, so an interrupted study leaves the last finished look's ledger, and a rerun resumes from the committed
per-seed files.

Usage: WORKBOOK_PROFILE=cpu python scripts/study.py notebooks/02_*.ipynb ... [--seeds 0 1 2 | --plan [--looks 3 5 8]
[--rebuild]]; ``--rebuild`` runs no notebook and rebuilds the ledger from the committed per-seed claims files
(``make ledger``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproduce import INTERRUPTED, ROOT, execute  # noqa: E402  (the one notebook executor)


def _profile():
    from helpers import profiles

    return profiles.get(profiles.parse_profile_name(os.environ.get(profiles.ENV_VAR)))


# make reproduce's prefix (helpers.profiles.REPRODUCE_PREFIX): each seed of a notebook whose paper can stop its runs
# at a prefix (helpers.profiles.has_prefix) first trains that prefix, its claims written to claims/study/<profile>/
# prefix-<N>/, and then extends the same runs to the full length, so a make reproduce run is compared with the study
# at the same step. The order matters: a run trained to its full length first keeps no weights of its prefix's best.
def _study_prefix() -> int:
    from helpers import profiles

    return profiles.REPRODUCE_PREFIX


def _seed_done(profile: str, seed: int, notebook: str, examples: int = 1, prefix: int = 1) -> bool:
    """Whether seed ``seed`` of ``notebook`` (at ``examples`` times its test examples) need not run again: its claims
    file is there under the profile with that seed, the notebook's parameters, and code for the notebook unchanged
    since (:func:`helpers.ledger.study_seed_is_done`), since gathering refuses a seed computed by other code; a
    committed per-seed file from older code is run again, not kept."""
    from helpers import ledger

    return ledger.study_seed_is_done(profile, seed, notebook, examples, prefix)


def run_seeds(paths: list[Path], seeds: list[int], timeout: int = 3600, runner=execute, examples: int = 1):
    """Run ``paths`` (in order) once per seed under ``WORKBOOK_SEED`` (skipping a (seed, notebook) whose claims are there), at
    ``examples`` times their test examples (``WORKBOOK_EXAMPLES``: an examples look, on the seeds' trained runs). A
    notebook whose runs stop at a prefix first runs each new seed at make reproduce's prefix (``WORKBOOK_PREFIX``).
    Returns ``{(seed, notebook file): error}`` of the failed runs, or None when interrupted (reported)."""
    os.environ.setdefault("WORKBOOK_ROOT", str(ROOT))
    from helpers import profiles
    from helpers.paths import runs_dir

    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds={seeds!r} must be one or more distinct seeds")
    profile = _profile()
    scaled = "" if examples == 1 else f" at {examples}x the test examples"
    failed = {}
    # notebook by notebook, every seed of one before the next (a notebook's seeds need notebook 02's adapter of the
    # same seed, which an earlier notebook of the list trains): an interrupted look leaves whole notebooks finished
    for path in paths:
        for seed in seeds:
            notebook = path.name[:2]
            if _seed_done(profile.name, seed, notebook, examples):
                print(f"[seed {seed}] {path.name}{scaled}: done earlier", flush=True)
                continue
            prefixes = [1]
            if examples == 1 and profiles.has_prefix(profiles.NOTEBOOK_PAPERS[notebook]) \
                    and not _seed_done(profile.name, seed, notebook, prefix=_study_prefix()):
                prefixes = [_study_prefix(), 1]  # the prefix first: its best weights are kept for the full run to extend
            for prefix in prefixes:
                cut = "" if prefix == 1 else f" at 1/{prefix} of its trained runs' lengths"
                out_dir = runs_dir() / "notebooks" / (f"seed-{seed}" if examples == 1 and prefix == 1 else
                                                      f"examples-x{examples}-seed-{seed}" if prefix == 1 else
                                                      f"prefix-{prefix}-seed-{seed}")
                os.environ[profiles.SEED_VAR] = str(seed)
                os.environ[profiles.EXAMPLES_VAR] = str(examples)
                os.environ[profiles.PREFIX_VAR] = str(prefix)
                try:
                    start = time.perf_counter()
                    print(f"[seed {seed}] running {path.name}{scaled}{cut} ...", flush=True)
                    error = runner(path, out_dir, timeout)
                except KeyboardInterrupt:
                    finished = [f"seed {s} {p.name[:2]}" for s in seeds for p in paths
                                if _seed_done(profile.name, s, p.name[:2], examples)]
                    print(f"\n[study] interrupted during seed {seed} {path.name}{scaled}{cut}: finished "
                          f"{', '.join(finished) or 'none'}; nothing combined or gathered (rerun the study: finished "
                          "seeds are kept)", file=sys.stderr)
                    return None
                finally:
                    del os.environ[profiles.SEED_VAR], os.environ[profiles.EXAMPLES_VAR], os.environ[profiles.PREFIX_VAR]
                print(f"[seed {seed}] {path.name}{cut}: {time.perf_counter() - start:.1f} s"
                      + (f"  FAILED ({error})" if error else ""), flush=True)
                if error:
                    failed[(seed, path.name)] = error
                    break
    return failed


def _combine(notebooks: list[str], seeds_of: dict[str, list[int]], plan=None, schedules=None) -> dict:
    """Each notebook's study rows (:func:`helpers.ledger.record_study`, over ``schedules[notebook]``'s looks when
    given) and its seed-spread figure."""
    from matplotlib import pyplot as plt

    from helpers import ledger, plots

    combined = {}
    for notebook in notebooks:
        seeds = seeds_of[notebook]
        schedule = None if schedules is None else schedules[notebook]
        rows = combined[notebook] = ledger.record_study(_profile().name, seeds, notebook, plan, schedule)
        if any(row.seed_values for row in rows):  # the spread behind each trained row's verdict
            figure = plots.seed_spread_figure(rows, f"notebook {notebook}: each trained row over {len(seeds)} seeds "
                                                    "(dots), its mean and interval (bar), the threshold (dashed)")
            print(f"[study] notebook {notebook}: seed spread in {plots.save_figure(figure, f'{notebook}_seed_spread')}")
            plt.close(figure)
    return combined


def adapter_dependents_left_out(notebooks: list[str], seeds) -> list[str]:
    """The notebooks a study of ``notebooks`` must also run: those outside it whose rows in the committed ledger rest
    on an MNTP adapter other than the one notebook 02 trains now for the same study seed. Rerunning notebook 02 under
    changed settings changes its adapter's key, and the gather then refuses every notebook still resting on the old
    one (:func:`helpers.ledger.provenance.check_consistent`): found before any notebook runs, not after an hour of
    them. Empty when notebook 02 is not studied or the profile writes no ledger."""
    from helpers import ledger, store
    from helpers.ledger.provenance import rested_adapters
    from helpers.mntp_adapter import masked_lm_run_key

    profile = _profile()
    if "02" not in notebooks or profile.name != ledger.LEDGER_PROFILE:
        return []
    trains = {str(seed): store.fingerprint(masked_lm_run_key(profile.replace(seed=int(seed)), "mntp"))
              for seed in seeds}
    return sorted({notebook for notebook, seed, adapter in rested_adapters(ledger.read_provenance())
                   if notebook not in notebooks and seed in trains and adapter.get("fingerprint") != trains[seed]})


def _refuse_without_dependents(notebooks: list[str], seeds) -> bool:
    """Print the one-line refusal when :func:`adapter_dependents_left_out` names notebooks; whether it did."""
    left = adapter_dependents_left_out(notebooks, seeds)
    if left:
        print(f"not started: notebook 02's MNTP adapter would change under notebooks {', '.join(left)}, whose rows in "
              f"the committed ledger rest on the old one, and the gather would refuse them; study them with it "
              f"(STUDY_NOTEBOOKS naming notebooks {', '.join(sorted({*notebooks, *left}))})", file=sys.stderr)
    return bool(left)


def _gather(notebooks: list[str], what: str) -> None:
    from helpers import ledger

    if notebooks and _profile().name == ledger.LEDGER_PROFILE:
        rows = ledger.gather(notebooks=notebooks, study=True)
        print(f"claims ledger {ledger.ledger_path()}: {what} gathered; {ledger.headline(rows)}")


def _report_failed(failed: dict) -> int:
    if not failed:
        return 0
    print("failed (rerun the study: finished seeds are kept): "
          + "; ".join(f"seed {seed} {name}: {error}" for (seed, name), error in failed.items()), file=sys.stderr)
    return 1


def study(paths: list[Path], seeds: list[int], timeout: int = 3600, runner=execute) -> int:
    """Run ``paths`` once per seed (skipping finished ones), then combine and gather. Returns the exit code."""
    if _refuse_without_dependents([path.name[:2] for path in paths], seeds):
        return 2
    failed = run_seeds(paths, seeds, timeout, runner)
    if failed is None:
        return INTERRUPTED
    done = [path.name[:2] for path in paths
            if all(_seed_done(_profile().name, seed, path.name[:2]) for seed in seeds)]
    _combine(done, {notebook: list(seeds) for notebook in done})
    _gather(done, f"the seed study of notebooks {', '.join(done)} ({len(seeds)} seeds)")
    return _report_failed(failed)


def _refuse_to_run(path, out_dir, timeout):
    raise AssertionError("a rebuild runs no notebook")  # never reached: a rebuild stops before a look with seeds to run


def _look_text(look: tuple[int, int], before: tuple[int, int] | None) -> str:
    """What a look runs: new seeds at the notebook's examples, or the same seeds at more examples."""
    count, scale = look
    if before is None or before[1] == scale:
        first = 0 if before is None else before[0]
        return f"seeds {first}..{count - 1}" + ("" if scale == 1 else f" at {scale}x the test examples")
    return f"seeds 0..{count - 1} again at {scale}x the test examples (their trained runs, nothing retrained)"


def _look_cost(notebooks: list[str], look: tuple[int, int], before: tuple[int, int] | None) -> float:
    from helpers.ledger import sequential

    count, scale = look
    known = [notebook for notebook in notebooks if notebook in sequential.CPU_MINUTES_PER_SEED]
    if before is not None and before[1] != scale:  # an examples look: every seed again, its runs found trained
        return sequential.examples_look_cost(known, count, scale)
    return sequential.look_cost(known, count - (0 if before is None else before[0])) * scale


def _run_look(group: list[str], look: tuple[int, int], number: int, path_of: dict, timeout: int, runner,
              rebuild: bool) -> tuple[list[str], dict | None]:
    """Run look ``number`` (``look``: its seeds and examples scale) of the notebooks in ``group``; with ``rebuild``,
    run nothing and keep only the notebooks whose claims files for the look are all there. Returns the notebooks
    that had the look and :func:`run_seeds`' failures (None when interrupted)."""
    count, scale = look
    if rebuild:
        missing = {notebook: [seed for seed in range(count) if not _seed_done(_profile().name, seed, notebook, scale)]
                   for notebook in group}
        for notebook, seeds in missing.items():
            if seeds:
                print(f"[plan] rebuild: notebook {notebook} stops before look {number}; its claims files of "
                      f"seeds {seeds}{'' if scale == 1 else f' at {scale}x the test examples'} are not all "
                      "there, or were computed by other code; make study runs them", flush=True)
        group, runner = [notebook for notebook in group if not missing[notebook]], _refuse_to_run
    if not group:
        return group, {}
    return group, run_seeds([path_of[notebook] for notebook in group], list(range(count)), timeout, runner, scale)


def sequential_study(paths: list[Path], plan=None, timeout: int = 3600, runner=execute, rebuild: bool = False,
                     through_look: int | None = None) -> int:
    """The plan fixed before the study starts (:class:`helpers.ledger.sequential.SequentialPlan`: at most three looks, after
    3, 5 and 8 seeds, one level simulated for the t rule): at each look, run each notebook's next look (its cost stated first), combine
    every notebook at the plan's level over the looks it has had, and allocate its next look
    (:func:`helpers.ledger.sequential.allocate`, :meth:`~helpers.ledger.sequential.SequentialPlan.next_look`): more seeds while one
    of its trained rows is undecided, not futile and seeds-dominated; an examples look (the same seeds' trained runs
    scoring ``examples_factor`` times the test examples) while its only live rows are examples-dominated; else it
    stops. After every look the ledger is gathered as the study stands. With ``rebuild``, no notebook runs: each
    notebook's looks whose per-seed claims files are all there (committed under ``claims/study/``) are combined and
    gathered, following the looks the committed ledger records as run (:func:`_recorded_schedules`) before any
    allocation, and it stops before the first look that would need a notebook run. With ``through_look``, the study
    stops after that look's ledger is gathered (a later run resumes at the next look). Returns the exit code."""
    from helpers import ledger, profiles
    from helpers.ledger import sequential

    plan = plan or sequential.SequentialPlan()
    notebooks = [path.name[:2] for path in paths]
    if not rebuild and _refuse_without_dependents(notebooks, range(plan.looks[0])):
        return 2
    as_run = _recorded_schedules() if rebuild else {}
    path_of = dict(zip(notebooks, paths))
    schedules = {notebook: [] for notebook in notebooks}
    upcoming = {notebook: (plan.looks[0], 1) for notebook in notebooks}
    number = 0
    print(f"[plan] {plan.describe()}", flush=True)
    while upcoming:
        number += 1
        groups = {}
        for notebook, look in upcoming.items():
            before = schedules[notebook][-1] if schedules[notebook] else None
            groups.setdefault((look, before), []).append(notebook)
        for (look, before), group in groups.items():
            print(f"[plan] look {number}: {_look_text(look, before)} of notebooks {', '.join(group)}; about "
                  f"{_look_cost(group, look, before):.0f} min at the cpu profile on 2 cores", flush=True)
        ran = []
        for (look, before), group in groups.items():
            group, look_failed = _run_look(group, look, number, path_of, timeout, runner, rebuild)
            if look_failed is None:
                return INTERRUPTED
            if look_failed:
                return _report_failed(look_failed)
            for notebook in group:
                schedules[notebook].append(look)
            ran += group
        if not ran:
            break
        studied = [notebook for notebook in notebooks if schedules[notebook]]
        seeds_of = {notebook: list(range(max(count for count, scale in schedules[notebook] if scale == 1)))
                    for notebook in ran}
        combined = _combine(ran, seeds_of, plan, {notebook: schedules[notebook] for notebook in ran})
        states = {notebook: _undecided_states(rows, plan, ledger.examples_grow_by_row(_profile().name, notebook))
                  for notebook, rows in combined.items()}
        allocation = sequential.allocate({notebook: list(found.values()) for notebook, found in states.items()}, plan)
        upcoming = {}
        for notebook in ran:
            wants = allocation[notebook]
            if wants == "examples" and not profiles.example_sizes(profiles.NOTEBOOK_PAPERS[notebook]):
                wants = "stop"  # its package names no test examples the plan could grow (notebook 02's)
            following = plan.next_look(schedules[notebook], wants)
            ran_then = as_run.get(notebook, [])
            if rebuild and len(ran_then) > len(schedules[notebook]):  # the study as it ran, not as allocated now
                following = tuple(ran_then[len(schedules[notebook])])
                wants = f"as run ({allocation[notebook]} under today's allocation)"
            live = [f"{row_id}: {state.reason}" for row_id, state in states[notebook].items()]
            live += [f"{row_id}: {reason}" for row_id, reason in _still_moving(combined[notebook])]
            then = ("stops here" if following is None else
                    f"look {number + 1}: {_look_text(following, schedules[notebook][-1])}")
            print(f"[plan] look {number}, notebook {notebook}: {wants if rebuild else allocation[notebook]}; {then}"
                  + "".join(f"\n    {line}" for line in live), flush=True)
            if following is not None:
                upcoming[notebook] = following
        # every notebook studied so far, so the ledger always holds the study as it stands
        _gather(studied, f"look {number}: notebooks {', '.join(studied)}"
                + (f"; notebooks {', '.join(upcoming)} go on to look {number + 1}" if upcoming else ""))
        if upcoming and through_look is not None and number >= through_look:
            print(f"[plan] stopping after look {number} as asked (--through-look {through_look}); notebooks "
                  f"{', '.join(upcoming)} go on to look {number + 1} when the study runs again", flush=True)
            break
    return 0


def _recorded_schedules() -> dict[str, list[tuple[int, int]]]:
    """Each notebook's looks as the committed ledger's study ran them (its provenance's plan schedule): a rebuild
    re-reads those looks, whatever a later allocation rule would choose, since the plan is what was fixed before
    the study; the allocation decides only the looks after them."""
    from helpers.ledger.files import ledger_path, read_payload

    path = ledger_path()
    if not path.exists():
        return {}
    origins = read_payload(path).get("provenance", {})
    return {notebook: [tuple(look) for look in (origin.get("plan") or {}).get("schedule", [])]
            for notebook, origin in origins.items() if isinstance(origin, dict)}


def _still_moving(rows) -> list[tuple[str, str]]:
    """The trained rows whose interval lies on the side that contradicts the paper while their held-out curve is not
    shown to have stopped improving: more seeds cannot decide them, a longer run could. The plan does not extend
    training (it would change every seed's run key, so the notebook's runs start again); it names these rows."""
    from helpers.ledger import rows as ledger_rows

    return [(row.id, "on the contradicting side while its curve still moves: a longer run, not more seeds, could "
                     "decide it (the plan does not extend training)")
            for row in rows if row.trained and row.verdict == "inconclusive"
            and getattr(ledger_rows.reason_of(row), "short", None) == ledger_rows.STILL_MOVING]


def _undecided_states(rows, plan, grow: dict[str, bool] | None = None) -> dict:
    """The :func:`helpers.ledger.sequential.row_state` of each trained row more seeds or examples could still decide,
    by id; ``grow``: whether each row's test examples can still grow (by id; absent: they can)."""
    from helpers.ledger import sequential

    states = {row.id: sequential.row_state(row, plan, (grow or {}).get(row.id, True)) for row in rows}
    return {row_id: state for row_id, state in states.items() if state is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", help="the notebooks to study, e.g. notebooks/02_*.ipynb")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="the seeds (default 0 1 2)")
    parser.add_argument("--plan", action="store_true",
                        help="the sequential plan: looks after --looks seeds, one level calibrated for the t rule, futility stops")
    parser.add_argument("--looks", type=int, nargs="+", default=None, help="the plan's looks (default 3 5 8)")
    parser.add_argument("--rebuild", action="store_true",
                        help="with the plan: run no notebook; combine and gather the looks whose per-seed claims files "
                             "are all there (the committed claims/study/), and stop before the first that needs a run")
    parser.add_argument("--through-look", type=int, default=None,
                        help="with the plan: stop after this look's ledger is gathered (the next run resumes there)")
    arguments = parser.parse_args(argv)
    paths = [Path(name).resolve() for name in arguments.notebooks]
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        parser.error(f"notebooks not found: {missing}")
    if arguments.rebuild and not (arguments.plan or arguments.looks):
        parser.error("--rebuild rebuilds a sequential study: give it with --plan")
    if arguments.plan or arguments.looks:
        from helpers.ledger import sequential

        try:
            plan = sequential.SequentialPlan(looks=tuple(arguments.looks or sequential.DEFAULT_LOOKS))
        except ValueError as error:
            parser.error(f"--looks: {error}")
        if arguments.through_look is not None and arguments.through_look < 1:
            parser.error(f"--through-look {arguments.through_look}: a look number is 1 or more")
        return sequential_study(paths, plan, rebuild=arguments.rebuild, through_look=arguments.through_look)
    return study(paths, arguments.seeds)


if __name__ == "__main__":
    sys.exit(main())
