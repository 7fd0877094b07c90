"""Worker processes die with the kernel that started them (a killed notebook leaves no orphan training), and an
interrupt (Jupyter's stop button) cancels the queued jobs and ends the running ones within seconds."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest


KERNEL = textwrap.dedent("""
    import os, time
    from helpers import workers

    def busy(_):
        time.sleep(120)
        return os.getpid()

    if __name__ == "__main__":
        pool = workers.worker_pool(2)
        futures = [pool.submit(busy, index) for index in range(2)]
        time.sleep(0.5)
        print(" ".join(str(pid) for pid in pool._processes), flush=True)
        time.sleep(120)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_kernel_leaves_no_worker_process(tmp_path, process_alive):
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)
    kernel = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = ""
        deadline = time.time() + 120
        while not line.strip() and time.time() < deadline:
            line = kernel.stdout.readline()
        children = [int(pid) for pid in line.split()]
        assert len(children) == 2 and all(process_alive(pid) for pid in children)
    finally:
        kernel.send_signal(signal.SIGKILL)  # what "kill the kernel" does
        kernel.wait()
    deadline = time.time() + 15
    while any(process_alive(pid) for pid in children) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(process_alive(pid) for pid in children), f"workers {children} outlived their kernel"


def test_a_worker_whose_parent_is_already_gone_exits_at_once():
    probe = subprocess.run([sys.executable, "-c", "import sys\nfrom helpers import workers\n"
                            "workers.die_with_parent(999999999)\nprint('still here')"], capture_output=True, text=True)
    assert probe.returncode == 1 and "still here" not in probe.stdout


INTERRUPTED_KERNEL = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from helpers import workers

    def slow(index):  # stands in for a tagger's training: a minute per job
        (Path(sys.argv[1]) / f"{index}.started").write_text(str(os.getpid()))
        time.sleep(60)
        return index

    if __name__ == "__main__":
        try:
            workers.run_jobs(slow, list(range(12)), 2)
            print("all jobs ran", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("whom", ["group", "kernel"])
def test_an_interrupt_cancels_the_queued_jobs_and_ends_the_running_ones_within_seconds(tmp_path, whom, process_alive):
    """12 one-minute jobs in 2 workers; SIGINT once two have started, to the kernel's whole process group (what
    Jupyter's stop button does) or to the kernel alone: the call raises KeyboardInterrupt within seconds, the two
    running workers are gone, and none of the 10 queued jobs ever starts."""
    script = tmp_path / "kernel.py"
    script.write_text(INTERRUPTED_KERNEL)
    marks = tmp_path / "marks"
    marks.mkdir()
    # a kernel leads its own process group, and starts with SIGINT's default action as Jupyter starts it: an ignored
    # SIGINT that this test process may have inherited or been left with is not passed on (Python installs its
    # KeyboardInterrupt handler only where SIGINT is not ignored at startup)
    kernel = subprocess.Popen([sys.executable, str(script), str(marks)], stdout=subprocess.PIPE, text=True,
                              cwd=tmp_path, start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while len(list(marks.iterdir())) < 2 and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # both pids written
        children = [int(path.read_text()) for path in marks.iterdir()]
        assert len(children) == 2 and all(process_alive(pid) for pid in children)
        interrupted = time.time()
        if whom == "group":
            os.killpg(kernel.pid, signal.SIGINT)
        else:
            kernel.send_signal(signal.SIGINT)
        out, _ = kernel.communicate(timeout=20)
        stopped = time.time() - interrupted
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
    assert out.strip() == "interrupted" and stopped < 10, (out, stopped)
    assert not any(process_alive(pid) for pid in children), f"workers {children} outlived the interrupt"
    time.sleep(1)
    assert sorted(path.name for path in marks.iterdir()) == ["0.started", "1.started"]  # no queued job ran


def test_a_pool_of_no_workers_is_refused_naming_the_argument():
    from helpers import workers

    with pytest.raises(ValueError, match="workers=0 must be a positive int"):
        workers.worker_pool(0)


def _logged_run(log: str, progress: bool = False):
    """A timing job's stand-in: appends this process's pid to ``log`` and returns ``(pid, runs logged so far,
    progress)``."""
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    with open(log) as handle:
        return os.getpid(), len(handle.read().split()), progress


def test_one_process_runs_the_job_here_and_more_run_it_in_as_many_fresh_processes_in_order(tmp_path):
    from helpers import workers

    log = str(tmp_path / "runs.log")
    assert workers.in_fresh_processes(_logged_run, (log,), 1, progress=True) == [(os.getpid(), 1, True)]
    results = workers.in_fresh_processes(_logged_run, (log,), 2, progress=True)
    pids = [pid for pid, _, _ in results]
    assert len(set(pids)) == 2 and os.getpid() not in pids  # two processes, neither this one
    assert [count for _, count, _ in results] == [2, 3]  # one after the other, the results in that order
    assert [progress for _, _, progress in results] == [False, False]  # a worker shows no progress bar
    with pytest.raises(ValueError, match="processes=0"):
        workers.in_fresh_processes(_logged_run, (log,), 0)


def _kept_hook(module, args, output):  # a hook of our own: importable, so it pickles, and it must stay
    return None


def _parameter_count(model, progress: bool = False) -> int:
    return sum(parameter.numel() for parameter in model.parameters())


def test_capturing_hooks_come_off_a_model_before_it_is_pickled_to_fresh_processes():
    """transformers' output-capturing hook (a local function, installed by a forward that asked for hidden states)
    cannot be pickled: the model reaches the workers only once it is off, and the other hooks stay."""
    import pickle

    torch = pytest.importorskip("torch")
    capturing = pytest.importorskip("transformers.utils.output_capturing")
    install = getattr(capturing, "install_output_capturing_hook", None) or \
        getattr(capturing, "install_output_capuring_hook", None)  # transformers' own spelling
    if install is None:
        pytest.skip("this transformers has no output-capturing hooks")
    from helpers import workers

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[0].register_forward_hook(_kept_hook)
    install(model[1], "hidden_states", 0)
    model._output_capturing_hooks_installed = True
    with pytest.raises((AttributeError, pickle.PicklingError)):
        pickle.dumps(model)  # what the workers would receive with the hook on
    assert workers.in_fresh_processes(_parameter_count, (model,), 2, models=(model,)) == [12, 12]
    assert not model[1]._forward_hooks and "_output_capturing_hooks_installed" not in model.__dict__
    assert list(model[0]._forward_hooks.values()) == [_kept_hook]
