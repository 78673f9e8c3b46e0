"""The chat page in a real browser: Debian's headless chromium driven through chromium-driver
and Selenium (python/requirements.txt pins it), against `sluice serve` on the tiny Gemma 4
(a file without a chat template, so the page opens in text mode) and against a scripted SSE
backend for what the tiny model will not write (markdown, math, reasoning, tool calls,
hostile payloads). The scripted backend serves the page by forwarding to a real sluice, so
the page, its headers and its CSP are the embedded ones.

Every test ends by checking the browser console for errors. Screenshots (desktop and phone
widths) go to $SLUICE_UI_ARTIFACTS (default: <build>/ui-artifacts)."""
import base64
import gzip
import http.server
import json
import pathlib
import queue
import shutil
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BUILD, ROOT
from server_util import Server

TINY = ROOT / "tests/data/golden/tiny-gemma4.q8_0.gguf"
PNG = ROOT / "tests/data/golden/vision/decode/png_rgb.png"
CLIP = ROOT / "tests/data/golden/audio/cli/clip.wav"
ARTIFACTS = pathlib.Path(__import__("os").environ.get("SLUICE_UI_ARTIFACTS", BUILD / "ui-artifacts"))
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT = 20   # seconds any one page condition may take

try:
    from selenium import webdriver
except ImportError:   # a venv from before selenium was pinned: `make venv` rebuilds it
    pytest.fail("selenium is not installed in this venv (python/requirements.txt pins it; run make venv)", pytrace=False)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY, "--parallel", "2")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    if not pathlib.Path(CHROMEDRIVER).exists():
        pytest.fail("chromium-driver is not installed (make deps installs chromium and chromium-driver)")
    o = webdriver.ChromeOptions()
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,860",
              "--disable-gpu", "--no-first-run", "--disable-extensions", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-default-apps",
              # a microphone for the Record button: Chromium's fake capture device (a beeping
              # tone), its permission prompt answered yes
              "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]:
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    o.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                        "download.prompt_for_download": False})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
    d.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    yield d
    d.quit()


@pytest.fixture
def page(browser):
    """The browser, with its console and network logs drained before the test and checked after."""
    browser.get_log("browser")
    browser.get_log("performance")
    browser.allowed_errors = []   # a test that expects an HTTP error status lists it here
    yield browser
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"
              and not any(a in e["message"] for a in browser.allowed_errors)]
    assert not errors, f"console errors: {errors}"


class Scripted(http.server.ThreadingHTTPServer):
    """Answers /props and /v1/chat/completions from a script; anything else (the page) is
    forwarded to a real sluice. `replies` holds, per request, a list of SSE event dicts or an
    int (an HTTP error status); `requests` records the JSON bodies received."""
    daemon_threads = True

    def __init__(self, upstream):
        super().__init__(("127.0.0.1", 0), ScriptedHandler)
        self.upstream = upstream
        self.replies = queue.Queue()
        self.requests = []
        self.props = {"model": "scripted test backend", "n_ctx": 2048, "max_tokens_cap": 0,
                      "default_generation_settings": {"temperature": 1.0, "top_k": 64, "top_p": 0.95},
                      "chat_template": {"in_file": True, "reasoning": True, "tools": True}}
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class ScriptedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/props":
            return self._json(200, self.server.props)
        try:
            with urllib.request.urlopen(self.server.upstream + self.path, timeout=10) as r:
                status, headers, body = r.status, r.headers.items(), r.read()
        except urllib.error.HTTPError as e:
            status, headers, body = e.code, e.headers.items(), e.read()
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "connection", "keep-alive", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        reply = self.server.replies.get_nowait()
        if isinstance(reply, int):
            msg = "the prompt does not fit the context (context_length_exceeded)" if reply == 400 else "busy"
            return self._json(reply, {"error": {"message": msg, "type": "invalid_request_error"}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for ev in reply:
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.03)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def chunks(content="", reasoning="", tool_calls=None, pieces=8, usage=(12, 30)):
    """A reply as chat.completion.chunk events: reasoning, then content cut into `pieces`."""
    evs = []

    def delta(d):
        evs.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
    step = max(1, len(reasoning) // pieces)
    for i in range(0, len(reasoning), step):
        delta({"reasoning_content": reasoning[i:i + step]})
    step = max(1, len(content) // pieces)
    for i in range(0, len(content), step):
        delta({"content": content[i:i + step]})
    if tool_calls:
        delta({"tool_calls": tool_calls})
    evs.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    evs.append({"object": "chat.completion.chunk", "choices": [],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}})
    return evs


@pytest.fixture(scope="module")
def real_server(sluice_bin, gemma3_path):
    s = Server(sluice_bin, gemma3_path, "--parallel", "1")
    yield s
    s.stop()


@pytest.fixture
def scripted(server):
    s = Scripted(server.url)
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield s
    s.shutdown()
    s.server_close()


# ---------------------------------------------------------------- helpers

def wait(d, cond, what, timeout=WAIT):
    return WebDriverWait(d, timeout, poll_frequency=0.05).until(lambda _: cond(), message=what)


def open_page(d, url):
    d.get(url + "/")
    d.execute_script("localStorage.clear(); indexedDB.deleteDatabase('sluice');")
    d.get(url + "/")
    wait(d, lambda: d.execute_script("return document.body.dataset.ready === '1'"), "page start-up")


def send(d, text):
    box = d.find_element(By.ID, "input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def assistant_texts(d):
    """The replies on screen, read in one script call (the list re-renders while it streams)."""
    return d.execute_script("return [...document.querySelectorAll('.msg.assistant .content')].map(e => e.innerText.trim())")


def wait_idle(d):
    wait(d, lambda: not d.execute_script("return document.body.classList.contains('running')"), "reply finished")


def set_settings(d, **fields):
    d.find_element(By.ID, "open-settings").click()
    form = d.find_element(By.ID, "settings-form")
    for k, v in fields.items():
        el = form.find_element(By.NAME, k)
        if el.get_attribute("type") == "checkbox":
            if el.is_selected() != bool(v):
                el.click()
        else:
            el.clear()
            el.send_keys(str(v))
    form.find_element(By.CSS_SELECTOR, "button[value=ok]").click()


def shot(d, name, width, height):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    d.set_window_size(width, height)
    time.sleep(0.2)
    d.save_screenshot(str(ARTIFACTS / name))
    d.set_window_size(1280, 860)


# ---------------------------------------------------------------- server side, no browser

def http_get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def http_post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_page_is_served_with_type_etag_gzip_and_csp(server):
    status, h, body = http_get(server.url + "/")
    assert status == 200 and h["Content-Type"].startswith("text/html") and b'type="module"' in body
    csp = h["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert http_get(server.url + "/", {"If-None-Match": h["ETag"]})[0] == 304
    status, h2, z = http_get(server.url + "/ui/vendor/katex.min.js", {"Accept-Encoding": "gzip"})
    assert status == 200 and h2["Content-Encoding"] == "gzip" and h2["Content-Type"].startswith("text/javascript")
    assert gzip.decompress(z).startswith(b"(function") or b"katex" in gzip.decompress(z)[:2000].lower()
    status, h3, font = http_get(server.url + "/ui/vendor/fonts/KaTeX_Main-Regular.woff2")
    assert status == 200 and h3["Content-Type"] == "font/woff2" and font[:4] == b"wOF2"
    assert http_get(server.url + "/ui/vendor/LICENSE-katex.txt")[0] == 200
    assert http_get(server.url + "/ui/nothing-here.js")[0] == 404
    # The page files share one metrics label: a client's path never becomes a label.
    metrics = http_get(server.url + "/metrics")[2].decode()
    assert 'endpoint="/ui",status="200"' in metrics and 'endpoint="/ui",status="404"' in metrics
    assert "nothing-here" not in metrics and 'endpoint="/"' not in metrics
    own = sum(p.stat().st_size for p in (ROOT / "src/server/ui").glob("*.js"))
    assert own <= 60 * 1024, f"the page's own JavaScript is {own} bytes (limit 60 KB)"


def test_props_and_origin_guard(server):
    status, props = http_post(server.url + "/tokenize", {"content": "x"}, {})   # no Origin: an SDK, passes
    assert status == 200
    status, h, body = http_get(server.url + "/props")
    p = json.loads(body)
    assert p["model"] == "tiny-gemma4" and p["n_ctx"] > 0 and p["chat_template"]["in_file"] is False
    host = f"127.0.0.1:{server.port}"
    ok = http_post(server.url + "/tokenize", {"content": "x"}, {"Origin": "http://" + host})
    assert ok[0] == 200
    cross = http_post(server.url + "/v1/completions", {"prompt": "x"}, {"Origin": "http://evil.example"})
    assert cross[0] == 403 and "cross-origin" in cross[1]["error"]["message"]
    rebound = http_post(server.url + "/v1/completions", {"prompt": "x"},
                        {"Origin": f"http://evil.example:{server.port}", "Host": f"evil.example:{server.port}"})
    assert rebound[0] == 403 and "rebinding" in rebound[1]["error"]["message"]


def test_no_ui_turns_the_page_off(sluice_bin):
    s = Server(sluice_bin, TINY, "--no-ui")
    try:
        assert http_get(s.url + "/")[0] == 404
        assert http_get(s.url + "/ui/main.js")[0] == 404
        assert http_get(s.url + "/props")[0] == 200
    finally:
        s.stop()


# ---------------------------------------------------------------- the tiny model

def test_base_model_streams_partially_and_stop_cancels_on_the_server(page, real_server):
    d, server = page, real_server
    open_page(d, server.url)
    assert d.find_element(By.ID, "banner").is_displayed() and "no chat template" in d.find_element(By.ID, "banner").text
    assert d.find_element(By.ID, "mode-text").is_selected()
    set_settings(d, max_tokens=3500, seed=3, extra='{"ignore_eos": true}')
    # Record every change of the streaming reply while the page says it is running.
    d.execute_script("""
      window.__partials = [];
      new MutationObserver(() => {
        const c = document.querySelectorAll('.msg.assistant .content');
        const n = c.length ? c[c.length - 1].textContent.length : 0;
        if (n && document.body.classList.contains('running')) window.__partials.push(n);
      }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});""")
    send(d, "The river begins")
    wait(d, lambda: len(set(d.execute_script("return window.__partials"))) >= 3, "three partial renders")
    assert server.metric("sluice_requests_running") == 1
    d.find_element(By.ID, "input").send_keys(Keys.ESCAPE)   # Esc stops
    wait_idle(d)
    deadline = time.monotonic() + 10
    while server.metric("sluice_requests_running") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.metric("sluice_requests_running") == 0
    stats = d.find_element(By.CSS_SELECTOR, ".msg.assistant .stats").text
    assert "tokens" in stats and "stopped" in stats
    partial = assistant_texts(d)[0]
    assert partial
    # Reload: the conversation is back from IndexedDB.
    d.refresh()
    wait(d, lambda: d.execute_script("return document.body.dataset.ready === '1'"), "reload")
    assert assistant_texts(d) == [partial]
    assert d.find_element(By.CSS_SELECTOR, ".msg.user .content").text == "The river begins"
    requests = [e for e in d.get_log("performance")
                if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"]
    urls = {json.loads(e["message"])["message"]["params"]["request"]["url"] for e in requests}
    outside = [u for u in urls if not u.startswith(server.url) and not u.startswith(("data:", "blob:"))]
    assert urls and not outside, f"requests left 127.0.0.1: {outside}"
    shot(d, "base-model-desktop.png", 1280, 860)


def test_api_key_flow(page, sluice_bin):
    page.allowed_errors = ["401 (Unauthorized)"]
    s = Server(sluice_bin, TINY, "--api-key", "s3cret")
    try:
        d = page
        d.get(s.url + "/")
        d.execute_script("localStorage.clear(); indexedDB.deleteDatabase('sluice');")
        d.get(s.url + "/")
        wait(d, lambda: d.find_element(By.ID, "key-dialog").is_displayed(), "the key dialog after a 401")
        d.find_element(By.ID, "key-input").send_keys("s3cret")
        d.find_element(By.ID, "key-ok").click()
        wait(d, lambda: d.find_element(By.ID, "model-name").text == "tiny-gemma4", "props with the key")
        set_settings(d, max_tokens=8)
        send(d, "Hello")
        wait_idle(d)
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, ".msg.assistant .stats"), "a reply with the key")
        assert "8 tokens" in d.find_element(By.CSS_SELECTOR, ".msg.assistant .stats").text
    finally:
        s.stop()


# ---------------------------------------------------------------- the scripted backend

RICH = ("## Results\n\n| name | value |\n|---|---|\n| alpha | 1 |\n| beta | 2 |\n\n"
        "```python\ndef square(x):\n    return x * x\n```\n\nInline $x^2 + y^2$ and display:\n\n$$\\int_0^1 x\\,dx = \\frac{1}{2}$$\n")


def one_scripted_turn(d, scripted, prompt, text, reasoning, call_name, arguments):
    """Opens the page, sends `prompt`, and lets the scripted backend answer with text, reasoning
    and one tool call; returns once the page is idle again."""
    calls = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": call_name, "arguments": arguments}}]
    scripted.replies.put(chunks(text, reasoning=reasoning, tool_calls=calls))
    open_page(d, scripted.url)
    assert not d.find_element(By.ID, "banner").is_displayed()
    send(d, prompt)
    wait_idle(d)


def test_markdown_code_math_reasoning_and_tool_calls(page, scripted):
    d = page
    one_scripted_turn(d, scripted, "Show me a table", RICH, "First I think about squares.", "get_weather",
                      "{\"city\": \"Paris\"}")
    msg = d.find_element(By.CSS_SELECTOR, ".msg.assistant")
    assert [c.text for c in msg.find_elements(By.CSS_SELECTOR, "td")] == ["alpha", "1", "beta", "2"]
    assert msg.find_elements(By.CSS_SELECTOR, "pre code .hljs-keyword"), "code is highlighted"
    assert msg.find_element(By.CSS_SELECTOR, "pre button.copy").text == "Copy"
    assert len(msg.find_elements(By.CSS_SELECTOR, ".katex")) == 2
    assert msg.find_elements(By.CSS_SELECTOR, ".katex-display")
    r = msg.find_element(By.CSS_SELECTOR, "details.reasoning")
    assert r.get_attribute("textContent").endswith("First I think about squares.")
    tool = msg.find_element(By.CSS_SELECTOR, ".tool-call")
    assert "get_weather" in tool.text and '"city": "Paris"' in tool.text
    assert "30 tokens" in msg.find_element(By.CSS_SELECTOR, ".stats").text
    assert d.find_element(By.ID, "ctx-text").text == "42/2048"
    shot(d, "chat-desktop.png", 1280, 860)
    shot(d, "chat-phone.png", 390, 844)
    d.find_element(By.ID, "theme").click()   # headless starts light: the button turns it dark
    assert d.execute_script("return document.documentElement.dataset.theme") == "dark"
    shot(d, "chat-desktop-dark.png", 1280, 860)


HOSTILE = ("<img src=x onerror=\"window.__pwned='img'\">\n\n<script>window.__pwned='script'</script>\n\n"
           "[click me](javascript:window.__pwned='link')\n\n[<img src=y onerror=window.__pwned='md'>](http://127.0.0.1:1/)\n\n"
           "<a href=\"javascript:window.__pwned='a'\">raw link</a> <svg onload=\"window.__pwned='svg'\"></svg>")


def test_hostile_reply_runs_nothing(page, scripted):
    d = page
    one_scripted_turn(d, scripted, "be evil", HOSTILE, "<img src=r onerror=window.__pwned='think'>",
                      "<img src=z onerror=window.__pwned='tool'>", "{}")
    msg = d.find_element(By.CSS_SELECTOR, ".msg.assistant")
    for a in msg.find_elements(By.CSS_SELECTOR, ".content a"):
        assert not (a.get_attribute("href") or "").startswith("javascript:")
    assert not msg.find_elements(By.CSS_SELECTOR, "img, script, svg, iframe")
    assert "<script>" in msg.find_element(By.CSS_SELECTOR, ".content").text   # shown as text
    time.sleep(0.3)
    assert d.execute_script("return window.__pwned === undefined"), d.execute_script("return window.__pwned")


def test_branches_export_import_and_settings_reach_the_server(page, scripted, downloads):
    d = page
    for i in range(3):
        scripted.replies.put(chunks(f"Answer number {i}."))
    open_page(d, scripted.url)
    set_settings(d, system="Be brief.", temperature=0.3, top_k=7, seed=42, thinking=True)
    d.find_element(By.ID, "open-settings").click()
    placeholder = d.find_element(By.CSS_SELECTOR, "#settings-form [name=top_p]").get_attribute("placeholder")
    d.find_element(By.CSS_SELECTOR, "#settings-form button[value=ok]").click()
    assert placeholder == "0.95"   # the model's default, from /props
    send(d, "Question")
    wait_idle(d)
    body = scripted.requests[0]
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Question"}]
    assert (body["temperature"], body["top_k"], body["seed"], body["stream"]) == (0.3, 7, 42, True)
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and "top_p" not in body
    # Regenerate: a second branch of the reply, switchable.
    d.find_element(By.XPATH, "//div[contains(@class,'assistant')]//button[text()='Regenerate']").click()
    wait(d, lambda: assistant_texts(d) == ["Answer number 1."], "the regenerated reply")
    wait_idle(d)
    assert d.find_element(By.CSS_SELECTOR, ".msg.assistant .branch").text.replace("\n", "").endswith("2/2›")
    d.find_element(By.CSS_SELECTOR, ".msg.assistant .branch button[aria-label='Previous branch']").click()
    assert assistant_texts(d) == ["Answer number 0."]
    # Edit the question: a branch of the user message with its own reply.
    d.find_element(By.XPATH, "//div[contains(@class,'user')]//button[text()='Edit']").click()
    ed = d.find_element(By.CSS_SELECTOR, "textarea.edit")
    ed.clear()
    ed.send_keys("Question, edited")
    d.find_element(By.XPATH, "//button[text()='Send edit']").click()
    wait(d, lambda: assistant_texts(d) == ["Answer number 2."], "the reply to the edit")
    wait_idle(d)
    assert scripted.requests[2]["messages"][-1] == {"role": "user", "content": "Question, edited"}
    d.find_element(By.CSS_SELECTOR, ".msg.user .branch button[aria-label='Previous branch']").click()
    assert assistant_texts(d) == ["Answer number 1."]   # a branch opens at its newest reply
    # Export, delete, import: the tree comes back.
    for f in downloads.glob("*.json"):
        f.unlink()
    d.find_element(By.ID, "export").click()
    wait(d, lambda: (downloads / "sluice-chats.json").exists() and (downloads / "sluice-chats.json").stat().st_size > 0, "download")
    exported = json.loads((downloads / "sluice-chats.json").read_text())
    assert len(exported["conversations"]) == 1 and len(exported["conversations"][0]["nodes"]) == 5
    d.find_element(By.CSS_SELECTOR, "#conv-list li button[aria-label=Delete]").click()
    wait(d, lambda: not d.find_elements(By.CSS_SELECTOR, "#conv-list li"), "the list empty")
    assert assistant_texts(d) == []
    d.find_element(By.ID, "import").send_keys(str(downloads / "sluice-chats.json"))
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#conv-list li")) == 1, "the imported conversation listed")
    d.find_element(By.CSS_SELECTOR, "#conv-list li .title").click()
    assert assistant_texts(d) == ["Answer number 1."]
    assert d.find_element(By.CSS_SELECTOR, ".msg.user .branch").text.replace("\n", "").endswith("1/2›")
    # Search and rename.
    d.find_element(By.ID, "search").send_keys("nothing like this")
    wait(d, lambda: not d.find_elements(By.CSS_SELECTOR, "#conv-list li"), "search hides it")
    d.find_element(By.ID, "search").clear()
    d.find_element(By.ID, "search").send_keys("edited")   # matches a message on another branch
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#conv-list li")) == 1, "search finds it")
    d.find_element(By.CSS_SELECTOR, "#conv-list li button[aria-label=Rename]").click()
    r = d.find_element(By.CSS_SELECTOR, "#conv-list input.rename")
    r.send_keys(Keys.CONTROL, "a")
    r.send_keys("Renamed chat", Keys.ENTER)
    wait(d, lambda: d.find_element(By.CSS_SELECTOR, "#conv-list li .title").text == "Renamed chat", "rename")


def test_busy_and_context_full_are_explained(page, scripted):
    page.allowed_errors = ["429", "400 (Bad Request)"]
    d = page
    scripted.replies.put(429)
    scripted.replies.put(400)
    open_page(d, scripted.url)
    send(d, "one")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, ".msg.error"), "the busy message")
    assert "busy" in d.find_element(By.CSS_SELECTOR, ".msg.error").text
    send(d, "two")
    wait(d, lambda: "no longer fits" in d.find_element(By.CSS_SELECTOR, ".msg.error").text, "the context message")


PASTE = """
const bytes = Uint8Array.from(atob(arguments[0]), c => c.charCodeAt(0));
const dt = new DataTransfer();
dt.items.add(new File([bytes], 'pasted.png', {type: 'image/png'}));
document.getElementById('input').dispatchEvent(
  new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true}));
"""


def test_an_attached_or_pasted_image_is_shown_and_sent_as_a_content_part(page, scripted):
    d = page
    open_page(d, scripted.url)
    assert not d.find_element(By.ID, "attach-label").is_displayed(), "a text-only model offers no image button"
    scripted.props["modalities"] = {"vision": True, "audio": False, "image_tokens": 280}
    open_page(d, scripted.url)
    assert d.find_element(By.ID, "attach-label").is_displayed()
    d.find_element(By.ID, "attach").send_keys(str(PNG))
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#attachments img")) == 1, "the picked image's thumbnail")
    png64 = base64.b64encode(PNG.read_bytes()).decode()
    d.execute_script(PASTE, png64)
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#attachments img")) == 2, "the pasted image's thumbnail")
    scripted.replies.put(chunks("Two striped pictures."))
    send(d, "What are these?")
    wait(d, lambda: assistant_texts(d) == ["Two striped pictures."], "the reply streamed")
    wait_idle(d)
    content = scripted.requests[-1]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["image_url", "image_url", "text"]
    assert all(p["image_url"]["url"] == "data:image/png;base64," + png64 for p in content[:2])
    assert content[2]["text"] == "What are these?"
    assert len(d.find_elements(By.CSS_SELECTOR, ".msg.user .images img")) == 2, "the images show in the conversation"
    assert not d.find_element(By.ID, "attachments").is_displayed(), "sent images leave the composer"
    shot(d, "chat-image.png", 1280, 860)


def test_a_recorded_and_an_attached_clip_are_sent_as_input_audio_parts(page, scripted):
    """Record (Chromium's fake microphone, captured by Web Audio and written as a WAV by the
    page), then attach a WAV file: both go as input_audio parts before the text, and the reply
    streams."""
    import io
    import wave
    d = page
    open_page(d, scripted.url)
    assert not d.find_element(By.ID, "record").is_displayed(), "a model that does not hear offers no Record button"
    scripted.props["modalities"] = {"vision": False, "audio": True}
    open_page(d, scripted.url)
    assert d.find_element(By.ID, "audio-label").is_displayed() and not d.find_element(By.ID, "attach-label").is_displayed()
    d.find_element(By.ID, "record").click()
    wait(d, lambda: d.find_element(By.ID, "record").text == "Stop recording", "recording started")
    time.sleep(1.0)
    d.find_element(By.ID, "record").click()
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#attachments .clip")) == 1, "the recording's chip")
    d.find_element(By.ID, "attach-audio").send_keys(str(CLIP))
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#attachments .clip")) == 2, "the attached clip's chip")
    scripted.replies.put(chunks("A beep, then speech."))
    send(d, "What do you hear?")
    wait(d, lambda: assistant_texts(d) == ["A beep, then speech."], "the reply streamed")
    wait_idle(d)
    content = scripted.requests[-1]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["input_audio", "input_audio", "text"]
    assert content[2]["text"] == "What do you hear?"
    rec, att = (base64.b64decode(p["input_audio"]["data"]) for p in content[:2])
    assert content[0]["input_audio"]["format"] == "wav" and content[1]["input_audio"]["format"] == "wav"
    assert att == CLIP.read_bytes()
    with wave.open(io.BytesIO(rec)) as w:   # the page's own WAV: mono 16-bit, most of a second of sound
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        assert w.getnframes() > 0.5 * w.getframerate(), (w.getnframes(), w.getframerate())
        import array
        samples = array.array("h", w.readframes(w.getnframes()))
        assert max(abs(x) for x in samples) > 1000, "the fake microphone's tone was captured"
    assert len(d.find_elements(By.CSS_SELECTOR, ".msg.user .clip")) == 2, "the clips show in the conversation"
    assert not d.find_element(By.ID, "attachments").is_displayed(), "sent clips leave the composer"
    shot(d, "chat-audio.png", 1280, 860)
