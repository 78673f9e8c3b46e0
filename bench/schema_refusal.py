#!/usr/bin/env python3
"""Issue 41: how long an over-limit json_schema (120,000 keys, ~1.7 MB) takes to be refused, beside a
control body of the same size refused for max_tokens (what reading the body costs). Tiny model,
release build:  .venv/bin/python bench/schema_refusal.py  (prints medians of 10 posts after 2)."""
import json, sys, time, statistics
sys.path.insert(0, "tests/python")
import httpx2 as httpx
from server_util import Server
s = Server("build/apps/sluice/sluice", "tests/data/golden/tiny-gemma3.q8_0.gguf", "-c", 256)
MODEL = json.loads(httpx.get(s.url + "/v1/models").text)["data"][0]["id"]
props = {f"k{i}": {} for i in range(120_000)}
body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                   "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": props}}}}).encode()
ctl = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * (len(body) - 80)}], "max_tokens": -1}).encode()
print("body", len(body))
with httpx.Client(timeout=30) as c:
    for name, b in (("over-limit", body), ("control (same size, bad max_tokens)", ctl)):
        ts = []
        for i in range(12):
            t = time.monotonic(); r = c.post(s.url + "/v1/chat/completions", content=b, headers={"Content-Type": "application/json"}); ts.append((time.monotonic() - t) * 1e3)
        print(name, r.status_code, r.text[:100], "median %.1f ms, min %.1f" % (statistics.median(ts[2:]), min(ts)))
s.stop()
