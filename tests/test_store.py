"""helpers.store: fingerprints, atomic writes, checked reads, asset checksums; paths.repo_root's checkout choice."""
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from helpers import data, file_io, models, paths, store


@dataclass(frozen=True)
class Settings:
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)


def test_fingerprint_changes_with_every_setting_and_not_with_dict_order():
    base = {"settings": Settings(), "mask_token": "underscore", "blocks": torch.arange(6).view(2, 3)}
    assert store.fingerprint(base) == store.fingerprint(dict(reversed(list(base.items()))))
    assert store.fingerprint(base) == store.fingerprint({**base, "blocks": torch.arange(6).view(2, 3)})
    for changed in ({"settings": Settings(lr=2e-3)}, {"settings": Settings(betas=(0.9, 0.99))},
                    {"mask_token": "eos"}, {"blocks": torch.arange(1, 7).view(2, 3)}, {"blocks": torch.arange(6)}):
        assert store.fingerprint({**base, **changed}) != store.fingerprint(base), changed
    assert store.fingerprint(print) == store.fingerprint(print)  # functions by name, never by address


def test_run_dir_for_names_a_new_folder_per_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    first, second = store.run_dir_for("02_mntp_cpu", {"lr": 1e-3}), store.run_dir_for("02_mntp_cpu", {"lr": 2e-3})
    assert first.parent == second.parent == tmp_path / "runs" and first != second
    assert first.name.startswith("02_mntp_cpu_")
    with pytest.raises(ValueError, match="name="):
        store.run_dir_for("", {})


def test_flat_differences_names_each_changed_key_old_to_new():
    old = store.canonical_settings({"config": Settings(), "run": {"mask_token": "underscore"}})
    new = store.canonical_settings({"config": Settings(lr=0.5), "run": {"mask_token": "eos", "extra": 1}})
    assert store.flat_differences(old, new) == ["config.lr: 0.001 -> 0.5", "run.extra: (absent) -> 1",
                                                "run.mask_token: 'underscore' -> 'eos'"]


def test_a_crash_inside_atomic_write_leaves_the_old_file(tmp_path):
    path = store.write_json(tmp_path / "result.json", {"f1": 0.5})
    with pytest.raises(RuntimeError):
        with store.atomic_write(path) as handle:
            handle.write('{"f1": 0.')  # half written
            raise RuntimeError("killed")
    assert store.read_json(path) == {"f1": 0.5}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left behind


def test_a_crash_at_the_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = store.save_torch(tmp_path / "best.pt", {"f1": 0.5})

    def killed(*args):
        raise OSError("killed before the rename")
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(OSError):
        store.save_torch(path, {"f1": 0.9})
    monkeypatch.undo()
    assert store.load_torch(path) == {"f1": 0.5}


def test_replace_dir_swaps_a_whole_folder_and_recovers_after_a_crash(tmp_path, monkeypatch):
    target = tmp_path / "adapter"
    with store.replace_dir(target) as scratch:
        (scratch / "weights").write_text("old")
    with pytest.raises(RuntimeError):
        with store.replace_dir(target) as scratch:
            (scratch / "weights").write_text("half")
            raise RuntimeError("killed")
    assert (target / "weights").read_text() == "old"
    # A crash between moving the old folder aside and moving the new one in: the old one comes back.
    os.replace(target, tmp_path / "adapter.old")
    store.recover_dir(target)
    assert (target / "weights").read_text() == "old"


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_json_and_torch_files_name_their_path(tmp_path, damage):
    json_path = store.write_json(tmp_path / "spans.json", [[1, 2]] * 100)
    torch_path = store.save_torch(tmp_path / "features.pt", {"train": torch.ones(50, 8)})
    for path in (json_path, torch_path):
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) // 2] if damage == "truncate" else b"\x00garbage" + raw[8:])
    with pytest.raises(store.CorruptFileError, match="spans.json"):
        store.read_json(json_path)
    with pytest.raises(store.CorruptFileError, match="features.pt"):
        store.load_torch(torch_path)


def test_a_torn_last_jsonl_line_is_dropped_with_a_warning_a_torn_middle_line_is_an_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"ste')
    with pytest.warns(UserWarning, match="torn last line"):
        assert store.read_jsonl(path) == [{"step": 1}, {"step": 2}]
    path.write_text('{"step": 1}\n{"ste\n{"step": 3}\n')
    with pytest.raises(store.CorruptFileError, match="line 2 of 3"):
        store.read_jsonl(path)


def test_checksums_catch_a_truncated_file_by_size_and_a_changed_one_by_hash(tmp_path):
    path = tmp_path / "asset.bin"
    path.write_bytes(b"x" * 1000)
    assert store.verify_checksum(path) is False  # nothing recorded yet
    store.record_checksum(path)
    assert store.verify_checksum(path, full=True)
    path.write_bytes(b"x" * 999)
    with pytest.raises(store.CorruptFileError, match=r"asset.bin has 999 bytes.*helpers.assets --force"):
        store.verify_checksum(path)
    path.write_bytes(b"y" * 1000)
    assert store.verify_checksum(path)  # the cheap check sees only the size
    with pytest.raises(store.CorruptFileError, match="sha256"):
        store.verify_checksum(path, full=True)


def test_a_truncated_safetensors_file_is_caught_without_a_recorded_checksum(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file({"a": torch.ones(64, 64), "b": torch.zeros(10)}, str(path))
    store.check_safetensors(path)
    raw = path.read_bytes()
    for cut in (len(raw) - 1, len(raw) // 2, 20, 4):
        path.write_bytes(raw[:cut])
        with pytest.raises(store.CorruptFileError, match="model.safetensors"):
            store.check_safetensors(path)


def test_truncated_wheel_and_deb_are_caught(tmp_path):
    wheel = tmp_path / "x.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("model.gguf", os.urandom(5000))
    store.check_zip(wheel, full=True)
    wheel.write_bytes(wheel.read_bytes()[:3000])
    with pytest.raises(store.CorruptFileError, match="x.whl"):
        store.check_zip(wheel)
    deb = tmp_path / "x.deb"
    member = lambda name, body: name.ljust(16).encode() + b"0".ljust(12) + b"0".ljust(6) * 2 + b"100644".ljust(8) \
        + str(len(body)).ljust(10).encode() + b"`\n" + body + (b"\n" if len(body) % 2 else b"")
    deb.write_bytes(b"!<arch>\n" + member("debian-binary", b"2.0\n") + member("data.tar.xz", os.urandom(301)))
    store.check_ar(deb)
    deb.write_bytes(deb.read_bytes()[:-50])
    with pytest.raises(store.CorruptFileError, match="x.deb"):
        store.check_ar(deb)


def test_a_truncated_novels_json_is_an_error_naming_it_and_the_repair(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    path = data.austen_cache_path()
    store.write_json(path, {"Emma": ["CHAPTER I", "", "Emma Woodhouse, handsome, clever, and rich."]})
    store.record_checksum(path)
    assert data.austen_novels()["Emma"][2].startswith("Emma Woodhouse")
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(store.CorruptFileError, match=r"novels.json.*python -m helpers.assets --force"):
        data.austen_novels()
    (path.parent / (path.name + store.CHECKSUM_SUFFIX)).unlink()  # no checksum: the JSON parse still catches it
    with pytest.raises(store.CorruptFileError, match="novels.json"):
        data.austen_novels()


def test_a_truncated_embedded_model_is_an_error_naming_it_and_the_repair(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    folder = tmp_path / models.EMBEDDED_DIR_NAME
    folder.mkdir()
    for name in models.EMBEDDED_REQUIRED_FILES:
        (folder / name).write_text("{}")
    save_file({"w": torch.ones(32, 32)}, str(folder / "model.safetensors"))
    assert models.embedded_model_dir() == folder
    raw = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(raw[:-100])
    with pytest.raises(store.CorruptFileError, match=r"model.safetensors.*python -m helpers.assets --force"):
        models.embedded_model_dir()


def _fake_checkout(root):
    for marker in ("notebooks", "helpers"):
        (root / marker).mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    return root


def test_repo_root_prefers_workbook_root_then_refuses_two_different_checkouts(tmp_path, monkeypatch):
    other = _fake_checkout(tmp_path / "other")
    monkeypatch.chdir(other / "notebooks")
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path / "chosen"))
    assert paths.repo_root() == (tmp_path / "chosen").resolve()
    monkeypatch.delenv("WORKBOOK_ROOT")
    package_root = paths.Path(paths.__file__).resolve().parents[1]
    with pytest.raises(paths.CheckoutMismatchError, match=rf"{other}.*{package_root}.*WORKBOOK_ROOT"):
        paths.repo_root()
    monkeypatch.chdir(package_root / "helpers")  # the package's own checkout: no conflict
    assert paths.repo_root() == package_root
    monkeypatch.chdir(tmp_path)  # outside any checkout: the package's
    assert paths.repo_root() == package_root


def test_reuse_run_names_one_folder_per_settings_object_and_keeps_its_result(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    run = store.reuse_run("04_tagger", Settings())
    assert run.path == store.run_dir_for("04_tagger", Settings()) and run.path.is_dir()
    assert store.reuse_run("04_tagger", Settings(lr=2e-3)).path != run.path  # any field of the object keys it
    assert run.finished() is None
    run.finish({"f1": 0.5})
    assert store.reuse_run("04_tagger", Settings()).finished() == {"f1": 0.5}
    assert store.reuse_run("04_tagger", Settings(), resume=False).finished() is None  # a fresh run empties it


def test_a_scratch_file_of_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)  # a pid that no longer runs
    stale = tmp_path / f".ledger.json.{dead}.abc123.tmp"
    stale.write_text("torn")
    live = tmp_path / f".ledger.json.{os.getpid()}.def456.tmp"  # another writer, still at work
    live.write_text("in progress")
    store.write_text(tmp_path / "ledger.json", "{}")
    assert not stale.exists() and live.exists()
    assert (tmp_path / "ledger.json").read_text() == "{}"


def test_write_together_leaves_all_old_or_rolls_all_forward(tmp_path, monkeypatch):
    files = {tmp_path / name: "old" for name in ("ledger.json", "tables.json", "README.md")}
    for path, text in files.items():
        path.write_text(text)
    journal = tmp_path / ".gather.journal.json"
    real_replace, calls = os.replace, []

    def killed_after_one_rename(source, target):
        if str(source).endswith(".staged"):
            calls.append(target)
            if len(calls) == 2:
                raise KeyboardInterrupt  # the process dies between two renames
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed_after_one_rename)
    with pytest.raises(KeyboardInterrupt):
        store.write_together({path: "new" for path in files}, journal)
    monkeypatch.setattr(os, "replace", real_replace)
    assert journal.exists() and sorted(path.read_text() for path in files) == ["new", "old", "old"]
    store.finish_together(journal, list(files))  # what the next reader does first
    assert [path.read_text() for path in files] == ["new"] * 3
    assert not journal.exists() and not list(tmp_path.glob(".*"))  # no journal, staged or scratch file left


def test_write_together_killed_before_its_journal_keeps_every_old_file(tmp_path, monkeypatch):
    files = [tmp_path / "ledger.json", tmp_path / "README.md"]
    for path in files:
        path.write_text("old")
    real_write_json = file_io.write_json

    def killed_writing_the_journal(path, value, **options):
        if str(path).endswith("journal.json"):
            raise KeyboardInterrupt
        return real_write_json(path, value, **options)

    monkeypatch.setattr(file_io, "write_json", killed_writing_the_journal)  # store.write_together's own write
    with pytest.raises(KeyboardInterrupt):
        store.write_together({path: "new" for path in files}, tmp_path / ".journal.json")
    monkeypatch.undo()
    store.finish_together(tmp_path / ".journal.json", files)
    assert [path.read_text() for path in files] == ["old", "old"] and not list(tmp_path.glob(".*"))


def test_a_figure_write_under_a_file_size_limit_fails_clearly_and_keeps_the_old_figure(tmp_path):
    import subprocess
    import sys
    import textwrap

    for marker in ("pyproject.toml", "helpers", "notebooks"):
        (tmp_path / marker).mkdir() if marker != "pyproject.toml" else (tmp_path / marker).touch()
    script = textwrap.dedent("""
        import resource, numpy, matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from helpers.plots import core
        fig, ax = plt.subplots(); ax.plot([1, 2]); path = core.save_figure(fig, "01_example")
        before = path.read_bytes()
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 4, resource.RLIM_INFINITY))
        fig, ax = plt.subplots(); ax.imshow(numpy.random.default_rng(0).random((300, 300)))
        try:
            core.save_figure(fig, "01_example")
        except OSError as error:
            print("ERROR", error)
        print("INTACT", path.read_bytes() == before, sorted(p.name for p in path.parent.iterdir()))
    """)
    env = {**os.environ, "WORKBOOK_ROOT": str(tmp_path), "WORKBOOK_PROFILE": "cpu"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert "ERROR" in result.stdout and "01_example.png" in result.stdout and "unchanged" in result.stdout
    assert "INTACT True ['01_example.png']" in result.stdout


def test_a_read_only_workbook_root_names_the_path_and_workbook_root(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    for marker in ("pyproject.toml", "helpers", "notebooks"):
        (tmp_path / marker).mkdir() if marker != "pyproject.toml" else (tmp_path / marker).touch()
    tmp_path.chmod(0o555)
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    try:
        with pytest.raises(paths.ReadOnlyRootError, match="runs.*WORKBOOK_ROOT"):
            paths.runs_dir()
    finally:
        tmp_path.chmod(0o755)


def test_an_unwritable_folder_under_the_root_is_refused_by_name(tmp_path, monkeypatch):
    for marker in ("pyproject.toml", "helpers", "notebooks"):
        (tmp_path / marker).mkdir() if marker != "pyproject.toml" else (tmp_path / marker).touch()
    (tmp_path / "runs").write_text("a file where the runs folder should be")
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    with pytest.raises(paths.ReadOnlyRootError, match="runs.*WORKBOOK_ROOT"):
        paths.runs_dir()


def test_one_writer_per_run_folder_and_no_stale_lock_after_a_kill(tmp_path, lock_holder):
    import time

    holder = lock_holder(tmp_path)
    assert f"pid {holder.pid}" in store.holder_of(tmp_path)
    with pytest.raises(store.InUseError, match=f"training run {tmp_path} is being written by pid {holder.pid}"):
        with store.exclusive(tmp_path, "training run"):
            pass
    holder.kill()
    holder.wait()
    deadline = time.time() + 10
    while store.holder_of(tmp_path) is not None and time.time() < deadline:
        time.sleep(0.05)
    with store.exclusive(tmp_path, "training run"):  # the kernel released the killed holder's lock
        assert f"pid {os.getpid()}" in (tmp_path / store.LOCK_FILE).read_text()

def test_a_torch_save_under_a_file_size_limit_raises_the_oserror_and_keeps_the_old_file(tmp_path):
    """torch reports a failed write as a RuntimeError of its own ("unexpected pos ..."); save_torch gives back the
    OSError (here EFBIG), so that callers can name the file and what is intact."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import errno, resource, torch
        from helpers import store
        path = store.save_torch({str(tmp_path / "state.pt")!r}, {{"w": torch.zeros(10)}})
        before = path.read_bytes()
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) * 4, resource.RLIM_INFINITY))
        try:
            store.save_torch(path, {{"w": torch.zeros(100000)}})
        except OSError as error:
            print("ERRNO", errno.errorcode[error.errno])
        print("INTACT", path.read_bytes() == before, sorted(p.name for p in path.parent.iterdir()))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert "ERRNO EFBIG" in result.stdout, result.stdout + result.stderr
    assert "INTACT True ['state.pt']" in result.stdout


def test_write_failed_names_the_path_what_is_intact_and_the_remedy():
    import errno

    from safetensors import SafetensorError

    full = store.write_failed("/x/state.pt", OSError(errno.ENOSPC, "full"), "the old one is intact", "run again")
    assert isinstance(full, OSError) and full.errno == errno.ENOSPC
    assert str(full).endswith("could not write /x/state.pt (No space left on device); the old one is intact. "
                              "Free space on that disk, then run again")
    wrapped = SafetensorError("Error while serializing: I/O error: File too large (os error 27)")
    assert store.write_failure(wrapped) == errno.EFBIG and store.write_failure(ValueError("a bug")) is None
    assert "(File too large); it. Raise the file-size limit" in str(store.write_failed("/x", wrapped, "it", "go"))


def test_canonical_without_leaves_out_the_named_fields_and_names_a_value_it_cannot():
    @dataclass(frozen=True)
    class Recipe:
        steps: int
        lr: float
        shape: tuple

    short, long = Recipe(4, 0.1, (2, 3)), Recipe(8, 0.1, (2, 3))
    assert store.canonical_without(short, ("steps",)) == {"lr": 0.1, "shape": [2, 3]}
    assert store.fingerprint(store.canonical_without(short, ("steps",))) == \
        store.fingerprint(store.canonical_without(long, ("steps",)))
    assert store.canonical_without(Recipe(4, 0.2, (2, 3)), ("steps",)) != store.canonical_without(short, ("steps",))
    assert store.canonical_without({"steps": 3, "seed": 1}, ("steps",)) == {"seed": 1}
    with pytest.raises(ValueError, match=r"settings=\[1, 2\] must be a dataclass or a dict"):
        store.canonical_without([1, 2], ("steps",))
