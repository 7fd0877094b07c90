"""The seed study: run notebooks once per seed and write the committed ledger from every seed's claims.

Each seed runs the chosen notebooks under ``WORKBOOK_SEED=<seed>`` (the profile's seed: every run key that rests on it,
so each seed trains and finds its own runs), writing its claims to ``runs/claims/<profile>/seed-<seed>/``. A (seed,
notebook) whose claims file is there, computed under the profile with that seed, is not run again: an interrupted
study resumes where it stopped. Then each notebook's rows are combined over the seeds (``helpers.claims.combine_seeds``:
a trained row becomes the seed mean with a t interval over seeds, the examples nested, and records each seed's value)
and gathered into ``claims/ledger_cpu.json`` and the README, marked as a study; a later single-seed ``make reproduce``
keeps them and prints whether its values fall inside the study's seed range. Ctrl-C stops the study at once (the
running kernel is shut down), names what finished, combines and gathers nothing, and exits 130; a rerun resumes.

Usage: WORKBOOK_PROFILE=cpu python scripts/study.py notebooks/02_*.ipynb ... [--seeds 0 1 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproduce import INTERRUPTED, ROOT, execute  # noqa: E402  (the one notebook executor)


def study(paths: list[Path], seeds: list[int], timeout: int = 3600, runner=execute) -> int:
    """Run ``paths`` once per seed (skipping finished ones), then combine and gather. Returns the exit code."""
    os.environ.setdefault("WORKBOOK_ROOT", str(ROOT))
    from matplotlib import pyplot as plt

    from helpers import claims, plots, profiles
    from helpers.paths import runs_dir

    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds={seeds!r} must be one or more distinct seeds")
    profile = profiles.get(profiles.parse_profile_name(os.environ.get(profiles.ENV_VAR)))
    failed = {}
    for seed in seeds:
        for path in paths:
            notebook = path.name[:2]
            if claims.study_seed_is_done(profile.name, seed, notebook):
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
                            if claims.study_seed_is_done(profile.name, s, p.name[:2])]
                print(f"\n[study] interrupted during seed {seed} {path.name}: finished "
                      f"{', '.join(finished) or 'none'}; nothing combined or gathered (rerun the study: finished "
                      "seeds are kept)", file=sys.stderr)
                return INTERRUPTED
            finally:
                del os.environ[profiles.SEED_VAR]
            print(f"[seed {seed}] {path.name}: {time.perf_counter() - start:.1f} s" + (f"  FAILED ({error})" if error else ""),
                  flush=True)
            if error:
                failed[(seed, path.name)] = error
    done = [path.name[:2] for path in paths
            if all(claims.study_seed_is_done(profile.name, seed, path.name[:2]) for seed in seeds)]
    for notebook in done:
        rows = claims.record_study(profile.name, seeds, notebook)
        if any(row.seed_values for row in rows):  # the spread behind each trained row's verdict
            figure = plots.seed_spread_figure(rows, f"notebook {notebook}: each trained row over {len(seeds)} seeds "
                                                    "(dots), its mean and interval (bar), the threshold (dashed)")
            print(f"[study] notebook {notebook}: seed spread in {plots.save_figure(figure, f'{notebook}_seed_spread')}")
            plt.close(figure)
    if done and profile.name == claims.LEDGER_PROFILE:
        rows = claims.gather(notebooks=done, study=True)
        print(f"claims ledger {claims.ledger_path()}: the seed study of notebooks {', '.join(done)} ({len(seeds)} seeds) "
              f"gathered; {claims.headline(rows)}")
    if failed:
        print("failed (rerun the study: finished seeds are kept): "
              + "; ".join(f"seed {seed} {name}: {error}" for (seed, name), error in failed.items()), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", help="the notebooks to study, e.g. notebooks/02_*.ipynb")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="the seeds (default 0 1 2)")
    arguments = parser.parse_args(argv)
    paths = [Path(name).resolve() for name in arguments.notebooks]
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        parser.error(f"notebooks not found: {missing}")
    return study(paths, arguments.seeds)


if __name__ == "__main__":
    sys.exit(main())
