"""Starting and stopping `sluice serve` for the server tests.

Every server is started on 127.0.0.1 with --port 0 (the port is read from its log), waited
for on /health, and stopped with SIGTERM; stop() returns the exit code and the log. With
SLUICE_ASAN=1 (make test-server-asan) the binary is the ASan build and LeakSanitizer runs
at exit: a leak makes the exit code non-zero and the log mention LeakSanitizer."""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

ASAN = os.environ.get("SLUICE_ASAN") == "1"


class Server:
    def __init__(self, sluice_bin, model, *args, startup_timeout=120):
        env = dict(os.environ)
        if ASAN:
            env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
        self.log_path = f"/tmp/sluice-serve-{os.getpid()}-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([str(sluice_bin), "serve", "-m", str(model), "--port", "0", *map(str, args)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + startup_timeout
        self.port = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluice serve exited with {self.proc.returncode}:\n{self.text()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("sluice serve did not start:\n" + self.text())
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.url + "/v1"

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.read().decode()

    def metric(self, name):
        m = re.search(rf"^{re.escape(name)} (\S+)$", self.get("/metrics"), re.M)
        return float(m.group(1)) if m else None

    def wait_blocks_free(self, timeout=10):
        """KV blocks in use drop to 0 once every request is done (or cancelled)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.metric("sluice_kv_blocks_used") == 0 and self.metric("sluice_requests_running") == 0:
                return True
            time.sleep(0.05)
        return False

    def rss_anon_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"RssAnon:\s+(\d+) kB", f.read()).group(1))

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("sluice serve did not stop on SIGTERM:\n" + self.text())
        out = self.text()
        self.log.close()
        os.unlink(self.log_path)
        return self.proc.returncode, out


def completion_texts(server, bodies, timeout=300):
    """The choices[0].text of each /v1/completions body, all sent at once (a thread each)."""
    def ask(body):
        req = urllib.request.Request(server.base_url + "/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)["choices"][0]["text"]
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as ex:
        return list(ex.map(ask, bodies))


def assert_clean_exit(server):
    rc, log = server.stop()
    assert rc == 0 and "LeakSanitizer" not in log and "AddressSanitizer" not in log, log[-4000:]
