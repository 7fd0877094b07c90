"""The seed study: run notebooks once per seed and write the committed ledger from every seed's claims.

Each seed runs the chosen notebooks under ``WORKBOOK_SEED=<seed>`` (the profile's seed: every run key that rests on it,
so each seed trains and finds its own runs), writing its claims to ``claims/study/<profile>/seed-<seed>/`` (committed).
A (seed, notebook) whose claims file is there, computed under the profile with that seed and by the notebook's current
code, is not run again: an interrupted study resumes where it stopped. Then each notebook's rows are combined over the
seeds (``helpers.claims.combine_seeds``:
a trained row becomes the seed mean with a t interval over seeds, the examples nested, and records each seed's value)
and gathered into ``claims/ledger_cpu.json`` and the README, marked as a study; a later single-seed ``make reproduce``
keeps them and prints whether its values fall inside the study's prediction intervals. Ctrl-C stops the study at once (the
running kernel is shut down), names what finished, combines and gathers nothing, and exits 130; a rerun resumes.

With ``--plan`` the study follows a plan fixed before it starts (``helpers.sequential``): looks after 3, then 5, then
8 seeds under Pocock's boundary (every look's interval read at 97.8%, overall 5%), the cost of each look stated
before it runs, and more seeds only for the notebooks that still have a row more seeds could decide. Each row is kept at
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


def _seed_done(profile: str, seed: int, notebook: str) -> bool:
    """Whether seed ``seed`` of ``notebook`` need not run again: its claims file is there under the profile with that
    seed and the notebook's parameters (:func:`helpers.claims.study_seed_is_done`), computed at a commit whose code for
    the notebook is HEAD's (:func:`helpers.claims.code_changes`), since gathering refuses a seed computed by other
    code; a committed per-seed file from older code is run again, not kept."""
    import json

    from helpers import claims

    if not claims.study_seed_is_done(profile, seed, notebook):
        return False
    origin = json.loads((claims.study_dir(profile, seed) / f"{notebook}.json").read_text()).get("provenance") or {}
    return claims.code_changes(origin.get("commit"), notebook) == []


def run_seeds(paths: list[Path], seeds: list[int], timeout: int = 3600, runner=execute):
    """Run ``paths`` once per seed under ``WORKBOOK_SEED`` (skipping a (seed, notebook) whose claims are there).
    Returns ``{(seed, notebook file): error}`` of the failed runs, or None when interrupted (reported)."""
    os.environ.setdefault("WORKBOOK_ROOT", str(ROOT))
    from helpers import claims, profiles
    from helpers.paths import runs_dir

    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds={seeds!r} must be one or more distinct seeds")
    profile = _profile()
    failed = {}
    for seed in seeds:
        for path in paths:
            notebook = path.name[:2]
            if _seed_done(profile.name, seed, notebook):
                print(f"[seed {seed}] {path.name}: done earlier", flush=True)
                continue
            out_dir = runs_dir() / "notebooks" / f"seed-{seed}"
            os.environ[profiles.SEED_VAR] = str(seed)
            try:
                start = time.perf_counter()
                print(f"[seed {seed}] running {path.name} ...", flush=True)
                error = runner(path, out_dir, timeout)
            except KeyboardInterrupt:
                finished = [f"seed {s} {p.name[:2]}" for s in seeds for p in paths
                            if _seed_done(profile.name, s, p.name[:2])]
                print(f"\n[study] interrupted during seed {seed} {path.name}: finished "
                      f"{', '.join(finished) or 'none'}; nothing combined or gathered (rerun the study: finished "
                      "seeds are kept)", file=sys.stderr)
                return None
            finally:
                del os.environ[profiles.SEED_VAR]
            print(f"[seed {seed}] {path.name}: {time.perf_counter() - start:.1f} s" + (f"  FAILED ({error})" if error else ""),
                  flush=True)
            if error:
                failed[(seed, path.name)] = error
    return failed


def _combine(notebooks: list[str], seeds_of: dict[str, list[int]], plan=None) -> dict:
    """Each notebook's study rows (:func:`helpers.claims.record_study`) and its seed-spread figure."""
    from matplotlib import pyplot as plt

    from helpers import claims, plots

    combined = {}
    for notebook in notebooks:
        seeds = seeds_of[notebook]
        rows = combined[notebook] = claims.record_study(_profile().name, seeds, notebook, plan)
        if any(row.seed_values for row in rows):  # the spread behind each trained row's verdict
            figure = plots.seed_spread_figure(rows, f"notebook {notebook}: each trained row over {len(seeds)} seeds "
                                                    "(dots), its mean and interval (bar), the threshold (dashed)")
            print(f"[study] notebook {notebook}: seed spread in {plots.save_figure(figure, f'{notebook}_seed_spread')}")
            plt.close(figure)
    return combined


def _gather(notebooks: list[str], what: str) -> None:
    from helpers import claims

    if notebooks and _profile().name == claims.LEDGER_PROFILE:
        rows = claims.gather(notebooks=notebooks, study=True)
        print(f"claims ledger {claims.ledger_path()}: {what} gathered; {claims.headline(rows)}")


def _report_failed(failed: dict) -> int:
    if not failed:
        return 0
    print("failed (rerun the study: finished seeds are kept): "
          + "; ".join(f"seed {seed} {name}: {error}" for (seed, name), error in failed.items()), file=sys.stderr)
    return 1


def study(paths: list[Path], seeds: list[int], timeout: int = 3600, runner=execute) -> int:
    """Run ``paths`` once per seed (skipping finished ones), then combine and gather. Returns the exit code."""
    from helpers import claims

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


def sequential_study(paths: list[Path], plan=None, timeout: int = 3600, runner=execute, rebuild: bool = False) -> int:
    """The plan fixed before the study starts (:class:`helpers.sequential.SequentialPlan`: looks after 3, 5 and 8
    seeds, Pocock's boundary): at each look, run the notebooks still allocated seeds (the cost stated first), combine
    every notebook at the plan's level, and allocate the next look (:func:`helpers.sequential.allocate`): a notebook
    continues while one of its trained rows is undecided, not futile and seeds-dominated. Each notebook's rows are
    gathered at the look that stopped it. With ``rebuild``, no notebook runs: the looks whose seeds' claims files are
    all there (committed under ``claims/study/``) are combined and gathered, and the study stops before the first look
    that would need a notebook run. Returns the exit code."""
    from helpers import sequential

    plan = plan or sequential.SequentialPlan()
    notebooks = [path.name[:2] for path in paths]
    active, seeds_of, failed, previous = list(notebooks), {}, {}, 0
    print(f"[plan] {plan.describe()}", flush=True)
    for look, count in enumerate(plan.looks, start=1):
        if not active:
            break
        cost = sequential.look_cost([n for n in active if n in sequential.CPU_MINUTES_PER_SEED], count - previous)
        print(f"[plan] look {look}: seeds {previous}..{count - 1} of notebooks {', '.join(active)}; about "
              f"{cost:.0f} min at the cpu profile on 2 cores", flush=True)
        if rebuild:
            from helpers import claims

            missing = [f"seed {seed} of {notebook}" for seed in range(count) for notebook in active
                       if not _seed_done(_profile().name, seed, notebook)]
            if missing:
                print(f"[plan] rebuild: look {look} stops here; its claims files are not all there, or were computed by "
                      f"other code ({', '.join(missing)}); make study runs them", flush=True)
                break
            runner = _refuse_to_run
        look_failed = run_seeds([path for path in paths if path.name[:2] in active], list(range(count)), timeout, runner)
        if look_failed is None:
            return INTERRUPTED
        failed.update(look_failed)
        if look_failed:
            break
        for notebook in active:
            seeds_of[notebook] = list(range(count))
        combined = _combine(active, seeds_of, plan)
        states = {notebook: _undecided_states(rows, plan) for notebook, rows in combined.items()}
        allocation = sequential.allocate({notebook: list(found.values()) for notebook, found in states.items()})
        for notebook in active:
            live = [f"{row_id}: {state.reason}" for row_id, state in states[notebook].items()]
            live += [f"{row_id}: {reason}" for row_id, reason in _still_moving(combined[notebook])]
            print(f"[plan] look {look}, notebook {notebook}: {allocation[notebook]}"
                  + "".join(f"\n    {line}" for line in live), flush=True)
        stopped = [notebook for notebook in active if allocation[notebook] != "seeds" or count == plan.looks[-1]]
        going_on = [notebook for notebook in active if notebook not in stopped]
        # every notebook studied so far, so the ledger always holds the study as it stands: a stopped notebook at the
        # look that stopped it; one going on at this look (its decided rows are final; the others wait for more seeds)
        _gather(list(seeds_of), f"look {look} ({count} seeds): notebooks {', '.join(seeds_of)}"
                + (f"; notebooks {', '.join(going_on)} go on to look {look + 1}" if going_on else ""))
        active, previous = [notebook for notebook in active if notebook not in stopped], count
    return _report_failed(failed)


def _still_moving(rows) -> list[tuple[str, str]]:
    """The trained rows whose interval lies on the side that contradicts the paper while their held-out curve is not
    shown to have stopped improving: more seeds cannot decide them, a longer run could. The plan does not extend
    training (it would change every seed's run key, so the notebook's runs start again); it names these rows."""
    from helpers import claims

    blocked = "contradicting side, training not shown to have stopped"
    return [(row.id or row.where, "on the contradicting side while its curve still moves: a longer run, not more "
                                  "seeds, could decide it (the plan does not extend training)")
            for row in rows if row.trained and row.verdict == "inconclusive" and claims.missing_for_verdict(row) == blocked]


def _undecided_states(rows, plan) -> dict:
    """The :func:`helpers.sequential.row_state` of each trained row more seeds could still decide, by id."""
    from helpers import sequential

    states = {row.id or row.where: sequential.row_state(row, plan) for row in rows}
    return {row_id: state for row_id, state in states.items() if state is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", help="the notebooks to study, e.g. notebooks/02_*.ipynb")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="the seeds (default 0 1 2)")
    parser.add_argument("--plan", action="store_true",
                        help="the sequential plan: looks after --looks seeds, Pocock's boundary, futility stops")
    parser.add_argument("--looks", type=int, nargs="+", default=None, help="the plan's looks (default 3 5 8)")
    parser.add_argument("--rebuild", action="store_true",
                        help="with the plan: run no notebook; combine and gather the looks whose per-seed claims files "
                             "are all there (the committed claims/study/), and stop before the first that needs a run")
    arguments = parser.parse_args(argv)
    paths = [Path(name).resolve() for name in arguments.notebooks]
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        parser.error(f"notebooks not found: {missing}")
    if arguments.rebuild and not (arguments.plan or arguments.looks):
        parser.error("--rebuild rebuilds a sequential study: give it with --plan")
    if arguments.plan or arguments.looks:
        from helpers import sequential

        try:
            plan = sequential.SequentialPlan(looks=tuple(arguments.looks or sequential.DEFAULT_LOOKS))
        except ValueError as error:
            parser.error(f"--looks: {error}")
        return sequential_study(paths, plan, rebuild=arguments.rebuild)
    return study(paths, arguments.seeds)


if __name__ == "__main__":
    sys.exit(main())
