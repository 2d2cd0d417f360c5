"""The explorer in a real browser: JupyterLab served on 127.0.0.1, Debian's Chromium driven by Playwright.

The test writes a notebook that calls ``pte_lab.explore``, runs it in
JupyterLab, checks that the widget's parts render, moves the slider with the
keyboard, checks that what is shown changes, and saves a screenshot
(``PTE_LAB_SCREENSHOTS`` names a folder to keep it). Without Chromium it is
skipped, except under CI (``CI=true``), where a skip would hide a gap.

The documentation shows that screenshot (``docs/images/explorer.png``, on the landing page and in the README):
``PTE_LAB_DOCS_PICTURES=1`` makes a passing run write it there, the one way it is refreshed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
#: the documentation's copy of the explorer's screenshot (PTE_LAB_DOCS_PICTURES=1 refreshes it)
DOCS_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "explorer.png"


def _need(cond: bool, why: str):
    if not cond:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {why}")
        pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path, program_path):
    pytest.importorskip("jupyterlab")
    # the folder JupyterLab serves holds the notebook and the program, under a short name: the screenshot
    # shows what a user's folder would (the documentation shows it), not the test's files or cache paths
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(program_path("transformer"), root / "transformer.pte")
    notebook = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["import pte_lab\n", "e = pte_lab.explore('transformer.pte')\n", "e"]},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    (root / "explore.ipynb").write_text(json.dumps(notebook))
    port, token = _free_port(), "pte-lab-test"
    # no "get notified about Jupyter news?" toast over the widget
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "lab.log", "wb"), env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
    yield url, token, tmp_path
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_explorer_in_jupyterlab(lab):
    _need(Path(CHROMIUM).exists(), f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    url, token, tmp = lab
    shots = Path(os.environ.get("PTE_LAB_SCREENSHOTS") or tmp)
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
            viewport={"width": 1400, "height": 1000})
        try:
            page = ctx.new_page()
            page.goto(f"{url}/lab/tree/explore.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            # wait for the kernel, then Run > Run All Cells (does not depend on the focus); a run
            # asked for while JupyterLab is still settling can be dropped, so check it started
            page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=120_000)
            prompt = page.locator(".jp-Cell .jp-InputPrompt").first
            for _ in range(5):
                page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
                page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
                try:
                    page.wait_for_function(
                        "el => /\\[(\\*|\\d+)\\]/.test(el.innerText)", arg=prompt.element_handle(),
                        timeout=15_000)
                    break
                except sync_api.TimeoutError:
                    page.keyboard.press("Escape")
            try:
                page.wait_for_selector(".pte-lab-explorer", timeout=180_000)
            except sync_api.TimeoutError:
                page.screenshot(path=str(shots / "explorer-failed.png"), full_page=True)
                outputs = page.locator(".jp-OutputArea").all_inner_texts()
                pytest.fail(f"the explorer did not render; cell output: {outputs!r}; "
                            f"screenshot {shots / 'explorer-failed.png'}")
            # the widget's parts are on screen
            for sel in (".pte-lab-explorer .widget-dropdown", ".pte-lab-explorer .widget-slider",
                        ".pte-lab-explorer img", ".pte-lab-explorer .widget-select", ".pte-lab-explorer .lm-TabBar"):
                assert page.locator(sel).first.is_visible(), sel
            status = page.locator(".pte-lab-status").first
            status.wait_for(timeout=30_000)
            before_text = status.inner_text()
            before_img = page.locator(".pte-lab-explorer img").first.get_attribute("src")
            assert "instruction -1" in before_text.replace("\n", " ")
            handle = page.locator(".pte-lab-explorer .widget-slider .noUi-handle, "
                                  ".pte-lab-explorer .widget-slider .slider-container").first
            handle.click()
            for _ in range(12):
                page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "prev => { const s = document.querySelector('.pte-lab-status');"
                " return s && s.innerText !== prev; }", arg=before_text, timeout=30_000)
            after_text = status.inner_text()
            after_img = page.locator(".pte-lab-explorer img").first.get_attribute("src")
            assert after_text != before_text and after_img != before_img
            assert "tensors alive" in after_text
            page.screenshot(path=str(shots / "explorer.png"), full_page=True)
            assert (shots / "explorer.png").stat().st_size > 10_000
        finally:
            ctx.close()
    if os.environ.get("PTE_LAB_SCREENSHOTS"):
        shutil.copy(shots / "explorer.png", shots / "explorer-latest.png")
    if os.environ.get("PTE_LAB_DOCS_PICTURES") == "1":
        shutil.copy(shots / "explorer.png", DOCS_SCREENSHOT)


def test_one_view_shows_in_chromium_with_and_without_styles(program_path):
    """The CSS shows the rich view and hides the text fallback; with ``<style>`` stripped, the inline
    display:none hides the rich view and the fallback shows (a static notebook viewer)."""
    _need(Path(CHROMIUM).exists(), f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    import pte_lab
    from shown import strip_styles

    html = pte_lab.open(program_path("device_demo"))._repr_html_()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            for styled, rich in ((html, True), (strip_styles(html), False)):
                page.set_content(f"<html><body>{styled}</body></html>")
                assert page.locator(".pte-wrap").first.is_visible() is rich
                assert page.locator(".pte-text-fallback").first.is_visible() is not rich
                shown = page.inner_text("body")
                assert ("Load cost" in shown) is rich  # a rich section title
                assert ("load cost (planned arenas):" in shown) is not rich  # the text repr's line
        finally:
            browser.close()
