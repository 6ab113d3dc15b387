"""The report pages open in headless Chromium with every plot loaded.

Each report's ``index.html`` is copied with a small script appended that, once the
page has loaded, writes every image's ``complete`` flag and natural size into the
DOM; Chromium's ``--dump-dom`` returns that DOM. A plot that is missing or not a
decodable PNG has ``naturalWidth`` 0 and fails the test. A screenshot checks that
the page renders at all.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.conftest import each
from tests.whatif.conftest import INTERVALS, REPO, run_testbed

CHECK_JS = (
    "<script>window.addEventListener('load', () => {"
    "const r = [...document.images].map(i => [i.getAttribute('data-plot'), i.complete,"
    " i.naturalWidth, i.naturalHeight]);"
    "const p = document.createElement('pre'); p.id = 'image-check';"
    "p.textContent = JSON.stringify(r); document.body.appendChild(p);});</script>")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Chromium not found: apt-get install chromium (make setup does)")


def _images(html, profile) -> list:
    return _render(html, profile)[0]


def _render(html, profile) -> tuple[list, str]:
    """The images' load state and the text of the page as Chromium rendered it."""
    page = html.with_name("check-" + html.name)
    page.write_text(html.read_text().replace("</body>", CHECK_JS + "</body>"))
    out = subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}",
                          "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="image-check">(.*?)</pre>', out.stdout)
    assert m, f"Chromium did not render the page: {out.stderr[-1500:]}"
    return json.loads(m.group(1)), out.stdout


def _screenshot(html, profile, png) -> None:
    subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}",
                    "--window-size=1280,2400", f"--screenshot={png}", html.as_uri()],
                   capture_output=True, text=True, timeout=120)
    assert png.exists() and png.stat().st_size > 20_000, "no screenshot"


@pytest.mark.timeout(300)
def test_scenario_report_renders_every_plot(tmp_path):
    out = tmp_path / "report"
    proc = run_testbed("report", str(REPO / "scenarios" / "quickstart.yaml"), "-o", str(out),
                       "--json", timeout=240)
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)
    images, dom = _render(out / "index.html", tmp_path / "profile")
    plots = {name for name, *_ in images}
    # what the page tells the reader: the overhead as a share, the checkpoints binned,
    # the strategies that fit nowhere with their reason
    assert "in % of the useful compute" in dom and "checkpoints counted per" in dom
    assert "Strategies with no feasible configuration" in dom
    assert "filter parallelism over 256 GPUs &gt; 64 filters" in dom
    assert plots == {"breakdown", "ettr_interval", "interval_paired", "checkpoint_cost",
                     "timeline", "strategies"}
    assert "Which intervals are worse (paired differences)" in dom
    assert len(files["plots"]) == len(images)
    for name, complete, width, height in each(images):
        assert complete and width > 300 and height > 200, name
    for csv in ("summary.csv", "breakdown.csv", "ettr_interval.csv", "interval_paired.csv",
                "strategies.csv"):
        assert (out / csv).stat().st_size > 0
    _screenshot(out / "index.html", tmp_path / "profile2", tmp_path / "page.png")


@pytest.mark.timeout(300)
def test_sweep_report_renders_every_plot(tmp_path, sweep_scenario):
    db = tmp_path / "r.db"
    proc = run_testbed("sweep", str(sweep_scenario), "--grid", f"checkpoint.interval={INTERVALS}",
                       "--grid", "failures.mtbf=3h,6h", "-r", "20", "--store", str(db), "-q",
                       "--common-random-numbers")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "report"
    proc = run_testbed("report", str(db), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    images, dom = _render(out / "index.html", tmp_path / "profile")
    assert {name for name, *_ in images} == {"sweep_ettr", "sweep_breakdown", "sweep_paired"}
    assert "checkpoint.interval (min, as the grid gives it)" in dom   # the grid's unit
    assert "Paired differences (common random numbers)" in dom
    for name, complete, width, height in each(images):
        assert complete and width > 300 and height > 200, name
    lines = (out / "points.csv").read_text().splitlines()
    assert len(lines) == 1 + 40
