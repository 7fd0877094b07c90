"""Worker processes die with the kernel that started them (a killed notebook leaves no orphan training)."""
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead, only not yet reaped
        return handle.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_kernel_leaves_no_worker_process(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)
    kernel = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = ""
        deadline = time.time() + 120
        while not line.strip() and time.time() < deadline:
            line = kernel.stdout.readline()
        children = [int(pid) for pid in line.split()]
        assert len(children) == 2 and all(_alive(pid) for pid in children)
    finally:
        kernel.send_signal(signal.SIGKILL)  # what "kill the kernel" does
        kernel.wait()
    deadline = time.time() + 15
    while any(_alive(pid) for pid in children) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in children), f"workers {children} outlived their kernel"


def test_a_worker_whose_parent_is_already_gone_exits_at_once():
    probe = subprocess.run([sys.executable, "-c", "import sys\nfrom helpers import workers\n"
                            "workers.die_with_parent(999999999)\nprint('still here')"], capture_output=True, text=True)
    assert probe.returncode == 1 and "still here" not in probe.stdout
