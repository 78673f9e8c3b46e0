"""Benchmark (not a test) of the chat page in Debian's headless chromium: first contentful
paint of the page and time to first token as the page shows it (Enter pressed -> the first
reply text in the DOM), over a few rounds against `sluice serve`.

  .venv/bin/python python/bench_ui.py --sluice build/apps/sluice/sluice --model models/gemma-3-270m-q4_k_m.gguf
"""
import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
from server_util import Server  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TTFT_JS = """
const done = arguments[arguments.length - 1];
const box = document.getElementById('messages');
const before = document.querySelectorAll('.msg.assistant').length;
let t0 = 0;
const obs = new MutationObserver(() => {
  const a = document.querySelectorAll('.msg.assistant .content');
  if (t0 && a.length > before && a[a.length - 1].textContent.length) { obs.disconnect(); done(performance.now() - t0); }
});
obs.observe(box, {childList: true, subtree: true, characterData: true});
const input = document.getElementById('input');
input.value = arguments[0];
t0 = performance.now();
document.getElementById('composer').requestSubmit();
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sluice", default=str(ROOT / "build/apps/sluice/sluice"))
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    srv = Server(a.sluice, a.model)
    o = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,860"]:
        o.add_argument(arg)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    d.set_script_timeout(120)
    fcp, ttft = [], []
    try:
        d.get(srv.url + "/")
        d.execute_script("localStorage.setItem('sluice.settings', JSON.stringify({max_tokens: 4}))")
        for i in range(a.rounds):
            d.get(srv.url + "/?round=" + str(i))
            WebDriverWait(d, 60).until(lambda _: d.execute_script("return document.body.dataset.ready === '1'"))
            fcp.append(d.execute_script(
                "const p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? p.startTime : null"))
            ttft.append(d.execute_async_script(TTFT_JS, f"The river begins {i}"))
            WebDriverWait(d, 60).until(lambda _: not d.execute_script("return document.body.classList.contains('running')"))
    finally:
        d.quit()
        srv.stop()
    fcp = [x for x in fcp if x is not None]   # headless chromium sometimes records no paint entry
    res = {"first_contentful_paint_ms": statistics.median(fcp) if fcp else float("nan"), "ttft_ms": statistics.median(ttft),
           "rounds": a.rounds, "model": pathlib.Path(a.model).name}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"{res['model']}: first contentful paint {res['first_contentful_paint_ms']:.0f} ms, "
              f"time to first token in the page {res['ttft_ms']:.0f} ms (median of {a.rounds})")


if __name__ == "__main__":
    main()
