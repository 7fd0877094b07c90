"""Notebook 01 as a user meets it: JupyterLab in headless Chromium, every cell run, one slider moved.

Starts JupyterLab on 127.0.0.1 (a free port, a token, a throw-away copy of the notebook so that autosave never
touches the repository), drives Debian's ``chromium`` with ``chromium-driver`` through Selenium, and checks
that no cell output holds an error, that the MAGNET widget opens at its view's default, and that moving its
first slider redraws the figure under it. Skips, saying what is missing, without the browser or its driver.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = "01_attention_masks.ipynb"
SERVER_START_S = 60
RUN_ALL_S = 240
REDRAW_S = 30


def _browser_and_driver() -> tuple[str, str]:
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    "(apt-get install -y chromium chromium-driver) to run the browser test")
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        pytest.skip("jupyterlab is not installed (pip install -e '.[notebooks]')")
    return browser, driver


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of notebook 01; yields (base url, token); always shut down."""
    _browser_and_driver()
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(REPO / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    port, token = _free_port(), uuid.uuid4().hex
    env = {**os.environ, "WORKBOOK_PROFILE": "smoke", "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
               "--port-retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={root / '.settings'}",
               f"--LabApp.workspaces_dir={root / '.workspaces'}", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = open(root / "server.log", "w")
    server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                json.loads(_get(f"{base}/api/status?token={token}"))
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: {(root / 'server.log').read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield base, token
    finally:
        try:  # shuts the kernels down with it
            request = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=5).close()
            server.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = _browser_and_driver()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, script: str, timeout: float, what: str):
    """Poll a JavaScript expression until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


PANEL = "const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
KERNEL_READY = PANEL + """
return !!(panel && panel.content && panel.sessionContext && panel.sessionContext.session
          && panel.sessionContext.session.kernel && panel.sessionContext.kernelDisplayStatus === 'idle');"""
ALL_RUN = PANEL + """
const cells = panel.content.widgets.filter(cell => cell.model.type === 'code');
if (cells.some(cell => cell.model.outputs.toJSON().some(output => output.output_type === 'error'))) return 'error';
const done = cells.every(cell => cell.model.executionCount !== null)
             && panel.sessionContext.kernelDisplayStatus === 'idle';
return done ? cells.length : 0;"""
ERRORS = PANEL + """
const found = [];
panel.content.widgets.forEach((cell, index) => {
  if (cell.model.type !== 'code') return;
  for (const output of cell.model.outputs.toJSON()) {
    if (output.output_type === 'error') found.push(`cell ${index}: ${output.ename}: ${output.evalue}`);
  }
});
for (const area of document.querySelectorAll('.jp-OutputArea-output')) {
  if (/Traceback \\(most recent call last\\)|Error Traceback/.test(area.textContent)) found.push(area.textContent.slice(0, 300));
}
return found;"""
MAGNET_WIDGET = """
const widget = Array.from(document.querySelectorAll('.widget-interact'))
  .find(w => Array.from(w.querySelectorAll('.widget-label')).some(l => l.textContent.trim() === 'span_start'));
if (!widget) return null;
const image = widget.querySelector('.widget-output img');
const readouts = Array.from(widget.querySelectorAll('.widget-slider')).map(s => {
  const label = s.querySelector('.widget-label'), readout = s.querySelector('.widget-readout');
  return [label && label.textContent.trim(), readout && (readout.value || readout.textContent).trim()];
});
return {image: image ? image.src : null, readouts: readouts};"""


def test_notebook_01_runs_in_jupyterlab_and_its_slider_redraws(lab, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base, token = lab
    browser.get(f"{base}/lab/tree/{NOTEBOOK}?token={token}&reset")
    _wait(browser, KERNEL_READY, 90, "the notebook to open with an idle kernel")
    browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
    time.sleep(1)
    cells = _wait(browser, ALL_RUN, RUN_ALL_S, "every cell to run")
    assert browser.execute_script(ERRORS) == []
    assert cells >= 10
    assert browser.execute_script(ERRORS) == []

    state = _wait(browser, f"const s = (function() {{{MAGNET_WIDGET}}})(); return s && s.image ? s : null;",
                  REDRAW_S, "the MAGNET widget to draw its figure")
    readouts = dict(state["readouts"])
    assert readouts["span_start"] == "3" and readouts["span_end"] == "7" and readouts["length"] == "12", readouts
    before = state["image"]

    handle = browser.execute_script("""
const widget = Array.from(document.querySelectorAll('.widget-interact'))
  .find(w => Array.from(w.querySelectorAll('.widget-label')).some(l => l.textContent.trim() === 'span_start'));
const handle = widget.querySelector('.widget-slider .noUi-handle');
handle.scrollIntoView({block: 'center'});
return handle;""")
    handle.click()
    handle.send_keys(Keys.ARROW_RIGHT)
    after = _wait(browser, f"const s = (function() {{{MAGNET_WIDGET}}})(); "
                           f"return s && s.image && s.image !== {json.dumps(before)} ? s : null;",
                  REDRAW_S, "the figure to change after moving span_start")
    assert dict(after["readouts"])["span_start"] == "4"
    assert browser.execute_script(ERRORS) == []
    assert browser.find_elements(By.CSS_SELECTOR, ".widget-interact .widget-message") == []
