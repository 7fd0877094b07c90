"""Every notebook on the current device on random weights, then each training notebook's step at the gpu profile's
sizes in bf16, fp16 with a gradient scaler and (where bitsandbytes has CUDA) nf4: one command, one results folder.

    python scripts/gpu_run.py                  # on a GPU machine: the whole run, at most about 8 minutes
    python scripts/gpu_run.py --tiny           # on a CPU: the same steps at tiny sizes (what tests/test_gpu_run.py runs)
    python scripts/gpu_run.py --pack           # here, before borrowing a GPU: the small caches it needs, in one folder

What it does, in order:

1. **Packages.** Imports what the notebooks and the executor need (nbclient, nbformat, ipykernel, matplotlib,
   ipywidgets, pandas, scipy, sklearn, peft, transformers, accelerate). Anything missing is installed from the
   wheels in ``.whl/`` (``pip install --no-index --no-deps --target /tmp/site``; the folder travels with the
   checkout, at most 64 MiB on the borrowed machine) and put on ``PYTHONPATH`` for the kernels too. What was
   installed is printed and written to the results (on a machine that has everything, as on CPU here: nothing).
2. **Notebooks.** All seven notebooks (``--notebooks`` picks some) at the smoke profile's sizes with
   ``WORKBOOK_MODEL=random:smollm2-135m`` (``--model``), each in a fresh kernel under ``scripts/reproduce.py``'s
   executor, on the device ``helpers.device.get_device`` picks (CUDA when present), in a scratch workbook root
   ``runs/gpu_run/<device>-<date>/`` (its own ``runs/``, ``figures/``, executed copies and a copy of the small caches,
   so nothing is reused from an earlier run and nothing of this checkout's runs is touched). A last cell added to each copy prints the kernel's
   peak memory: ``torch.cuda.max_memory_allocated`` on CUDA, the peak resident set (of the kernel and its workers)
   elsewhere. Random weights never record claims (``helpers.ledger``), so no ledger is touched.
3. **Training steps.** For notebooks 02, 03 and 04 (the ones ``helpers.memory`` estimates), the workload of
   ``helpers.memory.workload`` at the gpu profile's sizes on random weights of SmolLM2-360M's shape (``--tiny``: a
   2-layer, 128-wide shape and a few short rows, on CPU), each in its own process: 02's MNTP step, 03's MAGNET phase-2
   joint step (MNTP + MSG on the masked view and SSCL on two views) and 04's tagger step (the decoder under LoRA on
   the r-fold repeated rows and a linear tag head); one warm-up step (AdamW's states), then one measured step. Each
   in bf16 (weights in bf16, LoRA in float32, autocast), in fp16 with ``torch.amp.GradScaler`` (a T4's path), and in
   nf4 (bitsandbytes 4-bit weights, QLoRA) where bitsandbytes has CUDA. Peak memory (as above; on CPU the peak
   resident set of that process) is set beside ``helpers.memory.estimate`` without the resident models and, on CUDA,
   without the 1 GiB allowance for the CUDA context (which the allocator does not see).
4. **Results.** ``benchmarks/results/<device>-<date>/gpu_run.json`` and ``gpu_run.md`` (a markdown table per part):
   per notebook pass/fail, wall time, peak memory, the estimate where there is one, and the precision used.

Budget on a GPU (8 minutes in all; ``--budget`` seconds, default 470): about 0.5 min for the packages, at most
5 min for the seven notebooks (each also has its own limit, ``--notebook-timeout``, default 150 s), about 2 min for
the 3 x 3 training steps (each process: imports, a random model built on the GPU, two steps), a few seconds to write.
Whatever would start after the budget is spent is recorded as skipped, not run. The borrowed GPU machine is offline
and takes 64 MiB: carry ``runs/gpu_pack`` (``--pack`` fills it here with the embedded tokenizer, the Austen corpus
and the silver labels, about 8 MB) and ``.whl`` (wheels of anything that machine lacks).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("01", "02", "03", "04", "05", "06", "07")
STEP_NOTEBOOKS = ("02", "03", "04")
PRECISIONS = ("bf16", "fp16", "nf4")
NEEDED = ("nbclient", "nbformat", "ipykernel", "matplotlib", "ipywidgets", "pandas", "scipy", "sklearn", "peft",
          "transformers", "accelerate")
# The small caches a notebook run on random weights reads (the model's weights are not among them).
PACKED = ("smollm2-135m-instruct/tokenizer.json", "smollm2-135m-instruct/tokenizer.json.sha256.json",
          "smollm2-135m-instruct/tokenizer_config.json", "smollm2-135m-instruct/tokenizer_config.json.sha256.json",
          "austen", "silver")
PACK_DIR = ROOT / "runs" / "gpu_pack"
PEAK_MARK = "GPU_RUN_PEAK "
PEAK_CELL = ("import json as _json, resource as _resource, torch as _torch\n"
             "_peaks = [_resource.getrusage(who).ru_maxrss * 1024 for who in (_resource.RUSAGE_SELF, "
             "_resource.RUSAGE_CHILDREN)]\n"
             f"print({PEAK_MARK!r} + _json.dumps({{'cuda': _torch.cuda.max_memory_allocated() if "
             "_torch.cuda.is_available() else None, 'rss': max(_peaks)}))\n")
GIB = 2 ** 30


# --------------------------------------------------------------------------- packages


def ensure_packages(wheels: Path = ROOT / ".whl", target: Path = Path("/tmp/site")) -> list[str]:
    """Import :data:`NEEDED`; install what is missing from ``wheels`` into ``target`` (put on ``sys.path`` and
    ``PYTHONPATH``, so the notebooks' kernels see it too). Returns the wheels installed (none when nothing lacks)."""
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if not missing:
        return []
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        raise SystemExit(f"missing packages {', '.join(missing)} and no wheels in {wheels} to install them from")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(target), *map(str, found)], check=True)
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    importlib.invalidate_caches()
    still = [name for name in missing if importlib.util.find_spec(name) is None]
    if still:
        raise SystemExit(f"installed {len(found)} wheels from {wheels}, but {', '.join(still)} still cannot be imported")
    return [path.name for path in found]


# --------------------------------------------------------------------------- caches


def source_cache() -> Path:
    """The cache to copy from: ``$WORKBOOK_CACHE``, else this checkout's ``data/cache`` when it holds the tokenizer,
    else the folder ``--pack`` filled."""
    if os.environ.get("WORKBOOK_CACHE"):
        return Path(os.environ["WORKBOOK_CACHE"]).expanduser()
    local = ROOT / "data" / "cache"
    return local if (local / PACKED[0]).is_file() or not (PACK_DIR / "cache").is_dir() else PACK_DIR / "cache"


def copy_caches(source: Path, target: Path) -> list[str]:
    """Copy :data:`PACKED` from ``source`` to ``target``; returns what was missing in ``source``."""
    missing = []
    for name in PACKED:
        found, copy = source / name, target / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if found.is_dir():
            shutil.copytree(found, copy, dirs_exist_ok=True)
        elif found.is_file():
            shutil.copy2(found, copy)
        else:
            missing.append(name)
    return missing


# --------------------------------------------------------------------------- the notebooks


def run_notebook(number: str, scratch: Path, timeout: int) -> dict:
    """Run notebook ``number`` (a copy in ``scratch/notebooks`` with the peak-memory cell appended) under
    ``scripts/reproduce.py``'s executor; its result row."""
    import nbformat

    sys.path.insert(0, str(ROOT / "scripts"))
    import reproduce

    source = next((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    notebook = nbformat.read(source, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PEAK_CELL))
    copy = scratch / "notebooks" / source.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, copy)
    executed: dict = {}
    start = time.perf_counter()
    error = reproduce.execute(copy, scratch / "executed", timeout, executed)
    seconds = time.perf_counter() - start
    peak = None
    for cell in executed.get(copy.name, notebook).cells[-1:]:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            if PEAK_MARK in text:
                peak = json.loads(text.split(PEAK_MARK, 1)[1].splitlines()[0])
    return {"notebook": number, "name": source.name, "passed": error is None, "error": error,
            "seconds": round(seconds, 1), "peak_bytes": None if peak is None else (peak["cuda"] or peak["rss"]),
            "peak_kind": None if peak is None else ("cuda allocated" if peak["cuda"] is not None else "rss")}


def notebook_estimate(number: str, profile) -> float | None:
    """``helpers.memory``'s estimate (bytes, without the CUDA allowance and resident models) of notebook ``number``'s
    training step under ``profile``, in the profile's weight dtype; None for a notebook it does not model."""
    import torch

    from helpers import memory, models

    if number not in memory.TRAINING_NOTEBOOKS:
        return None
    work = dataclasses.replace(memory.workload(number, profile), resident_models=0)
    dtype_bytes = torch.finfo(models.resolve_dtype(profile.dtype)).bits // 8
    found = memory.estimate(work, dtype_bytes=dtype_bytes)
    return found.total - found.overhead


# --------------------------------------------------------------------------- the training steps

TINY_SHAPE = dict(name="tiny probe", hidden=128, intermediate=256, layers=2, heads=4, kv_heads=2, vocab=1000, tied=True)


def step_workload(notebook: str, tiny: bool):
    """Notebook ``notebook``'s training workload at the gpu profile's sizes on SmolLM2-360M's shape (``tiny``: a tiny
    shape and a few short rows), and the SSCL rows' length for notebook 03."""
    from helpers import memory, profiles

    profile = profiles.get("gpu").replace(model_name="random:smollm2-360m")
    work = memory.workload(notebook, profile)
    sscl_len = memory.training_settings("03", profile).sscl_max_len if notebook == "03" else 0
    if tiny:
        seq_len = 48 if notebook == "04" else 64
        sscl_len = 16 if notebook == "03" else 0
        work = dataclasses.replace(work, model=memory.ModelShape(**TINY_SHAPE), micro_batch=2, seq_len=seq_len,
                                   extra_tokens=2 * 4 * sscl_len, extra_forward_tokens=4 * sscl_len,
                                   extra_labelled=0)
    return work, sscl_len


def _random_model(work, dtype, device, four_bit: bool):
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM

    config = work.model.llama_config(max_position_embeddings=max(4096, work.seq_len), bos_token_id=1, eos_token_id=2,
                                     pad_token_id=2)
    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)
    if not four_bit:
        return model
    from transformers import BitsAndBytesConfig

    with tempfile.TemporaryDirectory() as folder:  # bitsandbytes quantises while loading: save the random weights
        model.save_pretrained(folder)
        del model
        return AutoModelForCausalLM.from_pretrained(
            folder, attn_implementation="sdpa", dtype=dtype, device_map={"": device},
            quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                   bnb_4bit_compute_dtype=dtype))


def _loss(notebook: str, model, work, sscl_len: int, device):
    """The loss of ``notebook``'s step on random rows (a closure), and the tag head notebook 04 trains (else None)."""
    import torch

    from helpers import masks as M, objectives as O

    generator = torch.Generator().manual_seed(0)
    vocab, special, mask_id = work.model.vocab, (0, 1, 2), 5
    ids = torch.randint(10, vocab, (work.micro_batch, work.seq_len), generator=generator)
    head = None
    if notebook == "02":
        batch = O.to_device(O.make_batch("mntp", ids, torch.ones_like(ids), mask_id=mask_id, vocab_size=vocab,
                                         special_ids=special, config=O.MaskingConfig(ratio=0.2), generator=generator),
                            device)

        def loss_of():
            return O.masked_lm_loss(model, batch, M.bidirectional)["loss"]
    elif notebook == "03":
        from helpers.papers.magnet import mechanism as G

        G.add_projection_head(model, work.model.hidden, 0)
        span_max = min(128, work.seq_len // 4)
        spans = [G.sample_spans(work.seq_len, max_spans=2, min_len=4, max_len=span_max, generator=generator)
                 for _ in range(work.micro_batch)]
        masked = O.to_device(G.masked_view(ids, spans, mask_id=mask_id, vocab_size=vocab, special_ids=special,
                                           generator=generator), device)
        rows = work.extra_forward_tokens // sscl_len

        def view():
            found = torch.randint(10, vocab, (rows, sscl_len), generator=generator)
            return O.to_device({"input_ids": found, "padding_mask": torch.ones_like(found)}, device)

        joint = {"lambdas": (1.0, 9.0, 1.0), "masked": masked, "anchors": view(), "positives": view()}

        def loss_of():
            return G.joint_loss(model, joint)["loss"]
    else:
        head = torch.nn.Linear(work.model.hidden, 9).to(device)
        labels = torch.randint(0, 9, ids.shape, generator=generator).to(device)
        inputs = ids.to(device)

        def loss_of():
            hidden = model.get_base_model().model(input_ids=inputs).last_hidden_state
            return torch.nn.functional.cross_entropy(head(hidden).flatten(0, 1).float(), labels.flatten())
    return loss_of, head


def one_step(notebook: str, precision: str, tiny: bool) -> dict:
    """One measured training step of ``notebook``'s workload in ``precision`` (in this process); its result row."""
    import torch

    from helpers import memory, training as T
    from helpers.device import device_label, get_device

    device = torch.device("cpu") if tiny else get_device()
    work, sscl_len = step_workload(notebook, tiny)
    four_bit = precision == "nf4"
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    model = _random_model(work, dtype, device, four_bit)
    model = T.add_lora(model, dataclasses.replace(T.LoraSettings(), r=work.lora_r), four_bit=four_bit).train()
    if work.checkpointing:
        T.enable_gradient_checkpointing(model)
    loss_of, head = _loss(notebook, model, work, sscl_len, device)
    trainable = [p for p in model.parameters() if p.requires_grad] + (list(head.parameters()) if head else [])
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step():
        with torch.autocast(device.type, dtype=dtype):
            loss = loss_of()
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    step()  # AdamW's states and the lazy allocations exist from here on
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    loss = step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    found = memory.estimate(dataclasses.replace(work, resident_models=0, four_bit=four_bit), dtype_bytes=2)
    estimate = found.total - found.overhead  # the allocator's share: the CUDA context is outside it
    if device.type == "cuda":
        peak, kind = torch.cuda.max_memory_allocated(device), "cuda allocated"
    else:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "rss"
    label = {"bf16": "bf16 autocast, bf16 weights", "fp16": "fp16 autocast, fp16 weights, GradScaler",
             "nf4": "nf4 weights (bitsandbytes), bf16 compute"}[precision]
    return {"notebook": notebook, "precision": precision, "precision_used": label, "passed": True, "error": None,
            "device": device_label(device), "model": work.model.name, "tokens": work.tokens,
            "micro_batch": f"{work.micro_batch} x {work.seq_len}" + (f" + {work.extra_tokens}" if work.extra_tokens else ""),
            "checkpointing": work.checkpointing, "step_seconds": round(seconds, 3), "loss": round(loss, 4),
            "scale": None if scaler is None else scaler.get_scale(), "peak_bytes": peak, "peak_kind": kind,
            "estimate_bytes": estimate}


def run_step(notebook: str, precision: str, tiny: bool, timeout: int) -> dict:
    """:func:`one_step` in a process of its own (its own peak, and an out-of-memory or a crash is its row's error)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--one-step", notebook, precision] + (["--tiny"] * tiny)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"notebook": notebook, "precision": precision, "passed": False, "error": f"timed out after {timeout} s",
                "seconds": round(time.perf_counter() - start, 1)}
    lines = [line for line in done.stdout.splitlines() if line.startswith(PEAK_MARK)]
    if done.returncode or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"notebook": notebook, "precision": precision, "passed": False, "error": tail[0][:300],
                "seconds": round(time.perf_counter() - start, 1)}
    return {**json.loads(lines[-1][len(PEAK_MARK):]), "seconds": round(time.perf_counter() - start, 1)}


# --------------------------------------------------------------------------- the report


def _gib(value) -> str:
    return "—" if value is None else f"{value / GIB:.2f}"


def markdown(result: dict) -> str:
    lines = [f"# GPU run: {result['device']}, {result['date']}", "",
             f"`python scripts/gpu_run.py{' --tiny' if result['tiny'] else ''}`; model {result['model']} (random "
             f"weights); {result['seconds']:.0f} s in all; installed: {', '.join(result['installed']) or 'nothing'}.",
             "", f"## Notebooks (smoke sizes, {result['notebook_precision']})", "",
             "| notebook | precision path | result | wall time (s) | peak (GiB) | peak measured as | estimate (GiB) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in result["notebooks"]:
        state = "pass" if row.get("passed") else f"FAIL: {row.get('error') or 'skipped'}"
        lines.append(f"| {row['notebook']} | {row.get('path', 'bf16')} | {state} | {row.get('seconds', '—')} | "
                     f"{_gib(row.get('peak_bytes'))} | "
                     f"{row.get('peak_kind') or '—'} | {_gib(row.get('estimate_bytes'))} |")
    sizes = "tiny sizes on CPU (--tiny)" if result["tiny"] else "the gpu profile's sizes, SmolLM2-360M's shape"
    lines += ["", f"## Training steps ({sizes})", "",
              "| notebook | precision | result | step (s) | process (s) | peak (GiB) | estimate (GiB) | peak / estimate | micro-batch | checkpointing |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in result["steps"]:
        state = "pass" if row.get("passed") else f"FAIL: {row.get('error') or 'skipped'}"
        ratio = (f"{row['peak_bytes'] / row['estimate_bytes']:.2f}" if row.get("peak_bytes") and row.get("estimate_bytes")
                 else "—")
        lines.append(f"| {row['notebook']} | {row.get('precision_used', row['precision'])} | {state} | "
                     f"{row.get('step_seconds', '—')} | {row.get('seconds', '—')} | {_gib(row.get('peak_bytes'))} | "
                     f"{_gib(row.get('estimate_bytes'))} | {ratio} | {row.get('micro_batch', '—')} | "
                     f"{row.get('checkpointing', '—')} |")
    lines += ["", "Peaks: `torch.cuda.max_memory_allocated` on CUDA; on a CPU the process's (or the kernel's) peak "
                  "resident set, which includes Python, torch and the data, so a ratio there checks nothing. Estimates "
                  "(`helpers.memory.estimate`) leave out the models a notebook keeps resident and the 1 GiB CUDA "
                  "allowance; notebooks 01, 05, 06 and 07 have none."]
    for note in result["notes"]:
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="CPU, tiny sizes for the training steps")
    parser.add_argument("--notebooks", nargs="*", default=list(NOTEBOOKS), choices=NOTEBOOKS)
    parser.add_argument("--steps", nargs="*", default=list(STEP_NOTEBOOKS), choices=STEP_NOTEBOOKS)
    parser.add_argument("--precisions", nargs="*", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--model", default="random:smollm2-135m",
                        help="a random-weight model, or tiny-random:llama (the smoke profile's own: the test's quick run)")
    parser.add_argument("--out", type=Path, default=None, help="default benchmarks/results/<device>-<date>")
    parser.add_argument("--budget", type=float, default=470.0, help="seconds; later items are skipped")
    parser.add_argument("--notebook-timeout", type=int, default=150)
    parser.add_argument("--notebook-precisions", nargs="*", default=["bf16", "fp16"], choices=("bf16", "fp16"),
                        help="bf16: the device's own choice; fp16: a bf16 GPU down the T4's path (CUDA only)")
    parser.add_argument("--fp16-notebooks", nargs="*", default=list(NOTEBOOKS), choices=NOTEBOOKS,
                        help="the notebooks the fp16 path runs (after every bf16 one)")
    parser.add_argument("--step-timeout", type=int, default=90)
    parser.add_argument("--pack", action="store_true", help=f"copy the small caches into {PACK_DIR} and stop")
    parser.add_argument("--one-step", nargs=2, metavar=("NOTEBOOK", "PRECISION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    sys.path.insert(0, str(ROOT))
    if args.one_step:
        print(PEAK_MARK + json.dumps(one_step(*args.one_step, tiny=args.tiny)))
        return 0
    if args.pack:
        missing = copy_caches(ROOT / "data" / "cache", PACK_DIR / "cache")
        print(f"{PACK_DIR}: {'; missing (run make setup): ' + ', '.join(missing) if missing else 'ready'}; carry it "
              f"and .whl to the GPU machine")
        return 1 if missing else 0
    started = time.perf_counter()
    installed = ensure_packages()
    print(f"[gpu_run] installed: {', '.join(installed) or 'nothing (every package was there)'}", flush=True)
    if args.tiny:
        os.environ["WORKBOOK_DEVICE"] = "cpu"
    import torch

    from helpers import profiles
    from helpers.device import device_label, get_device, precision

    if args.model != profiles.TINY_RANDOM_MODEL:  # the smoke profile's own tiny model: the test's cheap notebook run
        profiles.check_random_model(args.model, "--model")
    device = get_device()
    label = device_label(device)
    date = _dt.date.today().isoformat()
    slug = "".join(ch if ch.isalnum() else "-" for ch in (torch.cuda.get_device_name(device) if device.type == "cuda"
                                                          else "cpu")).strip("-").lower()
    out = args.out or ROOT / "benchmarks" / "results" / f"{slug}-{date}"
    scratch = ROOT / "runs" / "gpu_run" / out.name  # a workbook root of its own, never committed
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "notebooks").mkdir(parents=True)
    missing = copy_caches(source_cache(), scratch / "data" / "cache")
    notes = [f"caches not found (the notebooks that read them fail): {', '.join(missing)}"] if missing else []
    os.environ.update({"WORKBOOK_ROOT": str(scratch), "WORKBOOK_CACHE": str(scratch / "data" / "cache"),
                       "WORKBOOK_PROFILE": "smoke"})
    if profiles.is_random_model(args.model):
        os.environ["WORKBOOK_MODEL"] = args.model
    else:
        os.environ.pop("WORKBOOK_MODEL", None)
    os.environ.pop("WORKBOOK_SEED", None)
    os.environ.pop("WORKBOOK_DTYPE", None)
    profile = profiles.current()
    chosen = precision(device)
    notebook_precision = (f"weights {profile.dtype}, training autocast {chosen.mixed_precision} ({chosen.reason})"
                          if device.type == "cuda" else f"{profile.dtype} on {label}")
    print(f"[gpu_run] {label}; notebooks at smoke sizes on {args.model}; results in {out}", flush=True)

    def left() -> float:
        return args.budget - (time.perf_counter() - started)

    result = {"device": label, "date": date, "tiny": args.tiny, "model": args.model, "installed": installed,
              "notebook_precision": notebook_precision, "torch": torch.__version__, "python": platform.python_version(),
              "notebooks": [], "steps": [], "notes": notes, "seconds": 0.0}
    run_all(args, result, device, scratch, profile, out, started, left)
    return write_results(result, out)


def run_all(args, result: dict, device, scratch: Path, profile, out: Path, started: float, left) -> None:
    """The notebooks in bf16, then (on CUDA) the fp16 path's, then the training steps, into ``result``; the results
    written after each part, so what is done survives a run cut short."""
    notes = result["notes"]
    paths = ("fp16",) if device.type == "cuda" and "fp16" in args.notebook_precisions else ()
    if "fp16" in args.notebook_precisions and not paths:
        notes.append("notebooks not run on the fp16 path: it is a CUDA path (WORKBOOK_GPU_PRECISION)")
    for name in (("bf16",) if "bf16" in args.notebook_precisions else ()) + paths:
        chosen_numbers = args.notebooks if name == "bf16" else [n for n in args.notebooks if n in args.fp16_notebooks]
        result["notebooks"] += run_notebooks(chosen_numbers, scratch / name, profile, args.notebook_timeout, left, name)
        result["seconds"] = round(time.perf_counter() - started, 1)
        write_results(result, out)
    result["steps"] = run_steps(args, device, notes, left)
    result["seconds"] = round(time.perf_counter() - started, 1)


def run_notebooks(numbers, scratch: Path, profile, timeout: int, left, path: str = "bf16") -> list[dict]:
    """Each notebook in ``numbers`` (:func:`run_notebook`) while ``left()`` seconds of the budget remain, in a scratch
    workbook of its own; ``path`` "fp16" sends a bf16 GPU down the T4's path (``WORKBOOK_GPU_PRECISION``)."""
    from helpers.device import GPU_PRECISION_VAR

    cache = scratch / "data" / "cache"  # a copy of the pristine caches per path: nothing one path computed is reused
    shutil.copytree(scratch.parent / "data" / "cache", cache, dirs_exist_ok=True)
    (scratch / "notebooks").mkdir(parents=True, exist_ok=True)
    if path == "fp16":
        os.environ[GPU_PRECISION_VAR] = "fp16"
    else:
        os.environ.pop(GPU_PRECISION_VAR, None)
    os.environ.update({"WORKBOOK_ROOT": str(scratch), "WORKBOOK_CACHE": str(cache)})
    rows = []
    for number in numbers:
        if left() < 20:
            rows.append({"notebook": number, "path": path, "passed": False, "error": "skipped: budget spent"})
            continue
        row = {"path": path, **run_notebook(number, scratch, int(min(timeout, left())))}
        row["estimate_bytes"] = notebook_estimate(number, profile)
        rows.append(row)
        print(f"[gpu_run] notebook {number} ({path}): {'pass' if row['passed'] else 'FAIL ' + str(row['error'])[:300]} "
              f"{row['seconds']} s, peak {_gib(row['peak_bytes'])} GiB ({row['peak_kind']})", flush=True)
    os.environ.pop(GPU_PRECISION_VAR, None)
    return rows


def run_steps(args, device, notes: list, left) -> list[dict]:
    """Each training step of ``args.steps`` x precisions (:func:`run_step`) while the budget lasts; nf4 only where
    bitsandbytes has CUDA (else a note says why)."""
    precisions = [name for name in args.precisions if name != "nf4"]
    if "nf4" in args.precisions:
        if device.type == "cuda" and not args.tiny and importlib.util.find_spec("bitsandbytes") is not None:
            precisions.append("nf4")
        else:
            notes.append("nf4 not run: bitsandbytes with CUDA is not available here")
    steps = []
    for notebook in args.steps:
        for name in precisions:
            if left() < 15:
                steps.append({"notebook": notebook, "precision": name, "passed": False, "error": "skipped: budget spent"})
                continue
            row = run_step(notebook, name, args.tiny, int(min(args.step_timeout, left())))
            steps.append(row)
            print(f"[gpu_run] step {notebook} {name}: {'pass' if row['passed'] else 'FAIL ' + str(row['error'])[:200]} "
                  f"{row.get('step_seconds', '—')} s a step, peak {_gib(row.get('peak_bytes'))} GiB against "
                  f"{_gib(row.get('estimate_bytes'))} estimated", flush=True)
    return steps


def write_results(result: dict, out: Path) -> int:
    """``gpu_run.json`` and ``gpu_run.md`` in ``out``; 1 when anything failed or was skipped."""
    rows, steps = result["notebooks"], result["steps"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_run.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "gpu_run.md").write_text(markdown(result))
    failed = [f"notebook {row['notebook']}" for row in rows if not row.get("passed")]
    failed += [f"step {row['notebook']} {row['precision']}" for row in steps if not row.get("passed")]
    print(f"[gpu_run] {result['seconds']:.0f} s; {out / 'gpu_run.md'}; "
          + (f"FAILED: {', '.join(failed)}" if failed else "all passed"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
