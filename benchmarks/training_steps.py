"""Every training step the notebooks run, timed at a profile's own recipe: tokens/s, useful FLOP/s and their share of
this machine's bf16 matrix-product limit, each held-out evaluation's share of its run, and notebook 02's MNTP step
side by side with variants of it. Defaults are measured, never changed.

Each step is built by its notebook's own driver and run through ``helpers.training``'s own loop pieces
(``benchmarks/training_steps_cases.py``): notebook 02's MNTP and MTP steps (4 x 128 tokens, bf16 weights, LoRA
r = 16 under bf16 autocast), notebook 03's MAGNET joint step in both phases, notebook 03's LLM2Vec-style SimCSE stage, notebook 04's SR tagger step for each r and each unmasking baseline
(at the one torch thread each of its two worker processes trains with), notebook 06's EMAT heads (whole matrix and
new rows only), naive MTC's length classifier and GRU decoder steps (float32, on frozen features), notebook 07's diffusion fine-tune step. A row's ms/step is the median over ``--steps``
steps after one warm-up step; tokens/s and GFLOP/s are the medians of each step's own rates. The FLOP count and the
limit are ``benchmarks/training_steps_counts.py``'s (its docstring states the count); "% limit" is a row's GFLOP/s
over the faster of a bf16 (512 x 576) @ (576 x 1536) product and a large square one, at the row's thread count; "% own"
over the same limit in the row's own dtype (float32 for notebook 06's heads).

Held-out evaluations are timed once each, after the steps; a run's evaluation share is
``eval seconds x evaluations / (steps x step seconds + that)`` at the run's own cadence.

MNTP variants, built through the workbook's own options and timed in one run with today's step (``--variant-steps``
steps each), the variants taking turns step by step, each round started by the next one (a drift of the shared
machine falls on all alike): eager attention (``models.load_model``), LoRA dropout 0 instead of the recipe's 0.05
(``LoraSettings``), no mask tensor for the unpadded bidirectional batch (``masked_lm_experiment(mask_tensor=False)``:
sdpa with ``is_causal=False``), ``torch.compile`` of each decoder layer, and two combinations: dropout 0 with compiled
layers and either no mask tensor (sdpa) or eager attention. Ratios are today's step time over the variant's (above 1:
faster). A variant's first step's extra time over its median is reported apart: for a compiled one, the compile
seconds, from an empty inductor cache.

    python benchmarks/training_steps.py                       # the cpu profile, every step (minutes)
    python benchmarks/training_steps.py --profile-top 15      # and torch.profiler's top ops of the MNTP step
    python benchmarks/training_steps.py --tiny --json out.json  # the smoke profile's sizes, to check the script

Runs go to a scratch folder (``--scratch``, else a temporary one), and the cache is read through a farm of links to
its files there: a file a driver adds to its cache (notebook 06's phrase data at the cpu sizes, about a minute of
spaCy the first time) lands in the scratch folder, and so does one it rewrites (``helpers.file_io`` writes to a
temporary file and renames it over the link). Reuse a ``--scratch`` folder to keep what was built.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

CASES = ("mntp", "mtp", "magnet", "diffusion", "sr", "emat")


def prepare_environment(tiny: bool, scratch: Path) -> None:
    """The profile, a scratch workbook root, and its cache: real folders holding links to the real cache's files."""
    from helpers import paths

    cache = paths.cache_dir().resolve()
    farm = scratch / "cache"
    for folder, _, files in os.walk(cache, followlinks=True):
        target = farm / Path(folder).relative_to(cache)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            if not (target / name).exists():
                (target / name).symlink_to(Path(folder) / name)
    os.environ.update(WORKBOOK_PROFILE="smoke" if tiny else "cpu", WORKBOOK_ROOT=str(scratch),
                      WORKBOOK_CACHE=str(farm))
    # a fresh inductor cache, so a compiled variant's first step compiles from nothing, as in a fresh process
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_", dir=scratch)
    for name in ("WORKBOOK_SEED", "WORKBOOK_DTYPE", "WORKBOOK_MODEL", "WORKBOOK_EXAMPLES"):
        os.environ.pop(name, None)


@contextmanager
def threads(count: int | None):
    previous = torch.get_num_threads()
    torch.set_num_threads(count or previous)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def timed(call, *arguments) -> float:
    started = time.perf_counter()
    call(*arguments)
    return time.perf_counter() - started


def dtype_of(loop) -> str:
    from helpers.device import training_mixed_precision

    return "bf16" if training_mixed_precision(loop.model) == "bf16" else "float32"


def summarise(name: str, loop, row, warmup: float, seconds: list[float], limits: dict, count: int) -> dict:
    """A table row from one row's timed steps."""
    counted = []
    for index in row.steps[1:]:
        parts = [row.count(batch) for batch in loop.batches(index)]
        counted.append((sum(p[0] for p in parts), sum(p[1] for p in parts)))
    limit = limits[count]
    rates = [tokens / s for (tokens, _), s in zip(counted, seconds)]
    gflops = [flops / s / 1e9 for (_, flops), s in zip(counted, seconds)]
    result = {"name": name, "unit": row.unit, "dtype": dtype_of(loop), "threads": count, "warmup_s": warmup,
              "step_s": statistics.median(seconds), "seconds": seconds,
              "tokens_per_step": statistics.median(t for t, _ in counted),
              "gflop_per_step": statistics.median(f for _, f in counted) / 1e9,
              "tokens_per_s": statistics.median(rates), "gflop_per_s": statistics.median(gflops)}
    result["share_of_limit"] = result["gflop_per_s"] / limit["limit"]
    result["share_of_own_limit"] = result["gflop_per_s"] / limit["limit" if result["dtype"] == "bf16" else "limit_fp32"]
    return result


def time_rows(case, limits: dict) -> list[dict]:
    """Each row of ``case``: a warm-up step, then its timed steps."""
    results = []
    with threads(case.threads):
        count = torch.get_num_threads()
        for row in case.rows:
            warmup = timed(case.loop.step, row.steps[0])
            seconds = [timed(case.loop.step, index) for index in row.steps[1:]]
            results.append(summarise(row.name, case.loop, row, warmup, seconds, limits, count))
    return results


def time_evaluations(case, results: list[dict]) -> dict | None:
    """Each held-out evaluation of ``case`` once, and their share of a run at the run's cadence."""
    from training_steps_counts import evaluation_share

    if not case.evaluations:
        return None
    with threads(case.threads):
        kinds = [(evaluation.name, timed(case.loop.evaluate, evaluation.step), evaluation.count)
                 for evaluation in case.evaluations]
    steps = {result["name"]: result["step_s"] for result in results}
    train = sum(row.run_steps * steps[row.name] for row in case.rows)
    return {"run": case.name, "kinds": [{"name": n, "seconds": s, "count": c} for n, s, c in kinds],
            "train_s": train, "share": evaluation_share([(s, c) for _, s, c in kinds], train)}


def profile_top(case, row, top: int, steps: int = 2) -> dict:
    """torch.profiler over ``steps`` steps of ``row`` of ``case``: the ``top`` ops by self CPU time, with their share
    of all ops' self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    with threads(case.threads), profile(activities=[ProfilerActivity.CPU]) as recorded:
        for index in row.steps[1:1 + steps]:
            case.loop.step(index)
    events = recorded.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    ranked = sorted(events, key=lambda event: event.self_cpu_time_total, reverse=True)[:top]
    return {"case": row.name, "steps": steps, "ops": [
        {"op": event.key, "self_ms": event.self_cpu_time_total / 1e3 / steps, "calls": event.count / steps,
         "share": event.self_cpu_time_total / total} for event in ranked]}


def time_variants(today, inputs, scratch: Path, steps: list[int], limits: dict, compile_layers: bool) -> list[dict]:
    """Today's MNTP step and its variants, taking turns step by step; a row each."""
    import training_steps_cases as C

    builders = {"eager attention": dict(attn_implementation="eager"), "LoRA dropout 0": dict(dropout=0.0),
                "no mask tensor": dict(mask_tensor=False), "compiled layers": {},
                "dropout 0 + no mask + compiled": dict(dropout=0.0, mask_tensor=False),
                "dropout 0 + eager + compiled": dict(dropout=0.0, attn_implementation="eager")}
    loops = {"today": today.loop}
    for name, options in builders.items():
        if "compiled" in name and not compile_layers:
            continue
        loops[name] = C.masked_lm_variant(inputs, scratch, **options)
        if "compiled" in name:
            C.compile_layers(loops[name].model)
    warmups, samples = {}, {name: [] for name in loops}
    for name, loop in loops.items():
        try:
            warmups[name] = timed(loop.step, steps[0])
        except Exception as error:  # a variant this torch cannot run is reported, not fatal
            warmups[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
    names = [name for name in loops if not isinstance(warmups[name], str)]
    for turn, index in enumerate(steps[1:]):
        for name in names[turn % len(names):] + names[:turn % len(names)]:  # each round starts one later
            samples[name].append(timed(loops[name].step, index))
    row = dataclasses.replace(today.rows[0], steps=steps)
    results = []
    for name, loop in loops.items():
        if isinstance(warmups[name], str):
            results.append({"name": name, "error": warmups[name]})
            continue
        result = summarise(name, loop, row, warmups[name], samples[name], limits, torch.get_num_threads())
        result["first_step_extra_s"] = warmups[name] - result["step_s"]
        results.append(result)
    reference = results[0]["step_s"]
    for result in results:
        if "step_s" in result:
            result["speed_vs_today"] = reference / result["step_s"]
    return results


def print_tables(report: dict) -> None:
    limits = report["limits"]
    for count, limit in limits.items():
        print(f"bf16 matrix products at {count} thread(s): (512x576)@(576x1536) {limit['mlp']:.0f} GFLOP/s, "
              f"{report['square']}^3 {limit['square']:.0f} GFLOP/s -> limit {limit['limit']:.0f} GFLOP/s; float32 "
              f"{limit['mlp_fp32']:.0f} and {limit['square_fp32']:.0f} GFLOP/s -> {limit['limit_fp32']:.0f} GFLOP/s")
    print(f"\n{'step':46} {'dtype':7} {'thr':>3} {'ms/step':>8} {'tokens/s':>9} {'unit':>12} {'GFLOP/step':>10} "
          f"{'GFLOP/s':>8} {'% limit':>7} {'% own':>6}")
    for r in report["steps"]:
        print(f"{r['name'][:46]:46} {r['dtype']:7} {r['threads']:>3} {r['step_s'] * 1e3:8.0f} "
              f"{r['tokens_per_s']:9,.0f} {r['unit']:>12} {r['gflop_per_step']:10.2f} {r['gflop_per_s']:8.1f} {r['share_of_limit']:7.1%} "
              f"{r['share_of_own_limit']:6.1%}")
    print(f"\n{'held-out evaluation':52} {'s/eval':>7} {'evals/run':>9} {'train s/run':>11} {'share of run':>12}")
    for e in report["evaluations"]:
        for k in e["kinds"]:
            print(f"{k['name'][:52]:52} {k['seconds']:7.2f} {k['count']:9d}")
        print(f"{'  = ' + e['run']:52} {'':7} {'':9} {e['train_s']:11.1f} {e['share']:12.1%}")
    if report["variants"]:
        print(f"\n{'MNTP step variant':32} {'ms/step':>8} {'tokens/s':>9} {'GFLOP/s':>8} {'% limit':>7} "
              f"{'today / variant (time)':>22} {'first step extra s':>18}")
        for r in report["variants"]:
            if "error" in r:
                print(f"{r['name']:32} failed: {r['error']}")
                continue
            print(f"{r['name']:32} {r['step_s'] * 1e3:8.0f} {r['tokens_per_s']:9,.0f} {r['gflop_per_s']:8.1f} "
                  f"{r['share_of_limit']:7.1%} {r['speed_vs_today']:21.2f}x {r['first_step_extra_s']:18.1f}")
    for table in report["profiles"]:
        print(f"\ntorch.profiler, {table['case']} ({table['steps']} steps): top ops by self CPU time")
        for op in table["ops"]:
            print(f"  {op['op'][:60]:60} {op['self_ms']:9.1f} ms/step {op['calls']:7.1f} calls/step {op['share']:6.1%}")


def build_cases(names, inputs, profile, scratch: Path, steps: int):
    """The cases asked for, one at a time (each is timed and dropped before the next is built)."""
    import training_steps_cases as C

    if "mtp" in names:
        yield C.masked_lm_case(inputs, "mtp", scratch, steps)
    if "magnet" in names:
        yield from C.magnet_cases(profile, scratch, steps)
    if "diffusion" in names:
        yield C.diffusion_case(profile, scratch, steps)
    if "sr" in names:
        yield from C.tagger_cases(profile, scratch, steps)
    if "emat" in names:
        yield from C.emat_cases(profile, scratch, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the smoke profile's sizes (tiny random Llama)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per row after a warm-up (3; tiny: 1)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--variant-steps", type=int, default=None,
                        help="timed MNTP steps per variant after a warm-up, the variants taking turns (6; tiny: 1)")
    parser.add_argument("--no-variants", action="store_true", help="skip the MNTP variants")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled-layer variants")
    parser.add_argument("--profile-top", type=int, default=0,
                        help="torch.profiler: the top N ops of each step of --profile-cases")
    parser.add_argument("--profile-cases", nargs="*", default=["MNTP"],
                        help="runs to profile, by the start of their name (each of their steps)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's); a row whose notebook sets its own keeps it")
    parser.add_argument("--scratch", default=None, help="scratch workbook root (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="also write the report to this file")
    args = parser.parse_args()
    steps = args.steps or (1 if args.tiny else 3)
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="training_steps_")).resolve()
    prepare_environment(args.tiny, scratch)
    if args.threads:
        torch.set_num_threads(args.threads)

    import training_steps_cases as C
    from helpers import device, profiles
    from training_steps_counts import limits as measure_limits

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    profile = profiles.current()
    square = 1024 if args.tiny else 4096
    print(f"profile {profile.name} ({profile.model_name}), torch {torch.__version__}, {device.cpu_model()}, "
          f"{torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.2f}; scratch {scratch}", flush=True)
    limits = measure_limits(sorted({torch.get_num_threads(), 1}, reverse=True), square)
    busy = [count for count in limits if count > 1 and limits[count]["mlp"] < limits[1]["mlp"]]
    if busy:
        print(f"WARNING: the MLP-shape product is slower at {busy[0]} threads than at 1: another process holds a core, "
              f"and every {busy[0]}-thread timing here waits on it (--threads 1 measures what one core does)")
    report = {"profile": profile.name, "torch": torch.__version__, "square": square, "limits": limits, "steps": [],
              "evaluations": [], "variants": [], "profiles": []}
    inputs = C.masked_lm_inputs(profile) if {"mntp", "mtp"} & set(args.cases) else None

    def finish(case, results):
        report["steps"].extend(results)
        evaluation = time_evaluations(case, results)
        if evaluation:
            report["evaluations"].append(evaluation)
        if args.profile_top and any(case.name.startswith(prefix) for prefix in args.profile_cases):
            report["profiles"].extend(profile_top(case, row, args.profile_top) for row in case.rows)
        print(f"[{time.strftime('%H:%M:%S')}] {case.name}: done", flush=True)

    if "mntp" in args.cases:
        today = C.masked_lm_case(inputs, "mntp", scratch, steps)
        if args.no_variants:
            finish(today, time_rows(today, limits))
        else:
            variant_steps = list(range(1 + (args.variant_steps or (1 if args.tiny else 6))))
            variants = time_variants(today, inputs, scratch, variant_steps, limits, not args.no_compile)
            report["variants"] = variants
            finish(today, [{**variants[0], "name": today.rows[0].name}])
        del today
        gc.collect()
    for case in build_cases(args.cases, inputs, profile, scratch, steps):
        finish(case, time_rows(case, limits))
        del case
        gc.collect()
    print(f"\n[{time.strftime('%H:%M:%S')}] load average over the last 1, 5, 15 minutes: "
          + ", ".join(f"{value:.2f}" for value in os.getloadavg()))
    print_tables(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    if args.scratch is None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
