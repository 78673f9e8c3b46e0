"""Golden prompts for OpenAI tool requests, rendered by Python jinja2 on the built-in templates.

Each case is an OpenAI chat request (tools, assistant tool_calls, role "tool" results). This
script shapes it for the template as docs/tools.md describes (written here independently of
the C++ in src/chat/tool_prompt.cpp), renders it with jinja2 in Hugging Face's environment
(python/make_chat_golden.py) and stores the text. tests/python/test_server_tools.py asks the
server for the same requests' prompts (POST /apply-template) and requires identical text.

    .venv-golden/bin/python python/make_tool_chat_golden.py
"""
import hashlib
import json
import pathlib

import make_chat_golden as mcg

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests/data/chat/openai/tools.json"
TEMPLATES = {"gemma4": "src/chat/templates/gemma4.jinja", "gemma3": "src/chat/templates/gemma3.jinja"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "Forecast days"},
        "unit": {"$ref": "#/$defs/Unit"}},
        "required": ["city"], "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                   "required": ["query"]}}}

TWO_ROUNDS = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris and in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"Paris\", \"days\": 2}"}},
        {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
    {"role": "tool", "tool_call_id": "call_b", "content": "rain, 9 degrees"},
]
ANSWERED = TWO_ROUNDS + [
    {"role": "assistant", "content": "Paris: clear, 21. Oslo: rain, 9."},
    {"role": "user", "content": "Search for umbrellas."},
]

CASES = [
    {"arch": "gemma4", "request": {"messages": TWO_ROUNDS, "tools": [WEATHER, SEARCH]}},
    {"arch": "gemma4", "request": {"messages": ANSWERED, "tools": [WEATHER, SEARCH], "tool_choice": "required"}},
    {"arch": "gemma4", "request": {"messages": [{"role": "user", "content": "hi"}], "tools": [SEARCH]}},
    {"arch": "gemma3", "request": {"messages": TWO_ROUNDS, "tools": [WEATHER, SEARCH]}},
    {"arch": "gemma3", "request": {"messages": ANSWERED, "tools": [WEATHER, SEARCH],
                                   "tool_choice": {"type": "function", "function": {"name": "search"}}}},
]


# ---- the schema as the Gemma 4 declaration renders it ------------------------------------------

def merge_into(into, src):
    for k, v in src.items():
        if k == "properties" and isinstance(into.get(k), dict) and isinstance(v, dict):
            for pk, pv in v.items():
                into[k].setdefault(pk, pv)
        elif k == "required" and isinstance(into.get(k), list) and isinstance(v, list):
            into[k] += [x for x in v if x not in into[k]]
        elif k not in into:
            into[k] = v


def resolve(node, root, stack=()):
    if not isinstance(node, dict):
        return node
    out = {}
    if "$ref" in node:
        ref = node["$ref"]
        where, name = ref[2:].split("/", 1)
        out = {"type": "object"} if ref in stack else resolve(root[where][name], root, stack + (ref,))
    for k, v in node.items():
        if k in ("$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf"):
            continue
        if k == "properties" and isinstance(v, dict):
            out[k] = {pk: resolve(pv, root, stack) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = resolve(v, root, stack)
        else:
            out[k] = v
    for b in node.get("allOf", []):
        merge_into(out, resolve(b, root, stack))
    for key in ("anyOf", "oneOf"):
        kept = []
        for b in node.get(key, []):
            rb = resolve(b, root, stack)
            if rb.get("type") == "null":
                out["nullable"] = True
            else:
                kept.append(rb)
        if kept:
            types = []
            for b in kept:
                if isinstance(b.get("type"), str) and b["type"] not in types:
                    types.append(b["type"])
            if kept[0].get("nullable"):
                out["nullable"] = True
            merge_into(out, kept[0])
            if len(types) > 1:
                out["type"] = types
    if isinstance(out.get("type"), list):
        types = [t for t in out["type"] if t != "null"]
        if len(types) < len(out["type"]):
            out["nullable"] = True
        out["type"] = types[0] if len(types) == 1 else (types or "null")
    return out


# ---- messages ---------------------------------------------------------------------------------

def normalize(messages):
    names, out = {}, []
    for m in messages:
        role = "system" if m["role"] == "developer" else m["role"]
        n = {"role": role, "content": m.get("content") or ""}
        if m.get("tool_calls"):
            n["tool_calls"] = []
            for c in m["tool_calls"]:
                names[c["id"]] = c["function"]["name"]
                n["tool_calls"].append({"id": c["id"], "type": "function", "function": {
                    "name": c["function"]["name"],
                    # the server holds objects in key-sorted maps
                    "arguments": json.loads(c["function"]["arguments"], object_pairs_hook=lambda p: dict(sorted(p)))}})
        if role == "tool":
            n["tool_call_id"] = m["tool_call_id"]
            n["name"] = names[m["tool_call_id"]]
        out.append(n)
    return out


def native(messages):
    out = []
    for m in messages:
        last = out[-1] if out else None
        last_calls = last is not None and last["role"] == "assistant" and "tool_calls" in last
        if m["role"] == "tool" and last_calls:
            try:
                resp = json.loads(m["content"])
            except ValueError:
                resp = None
            last.setdefault("tool_responses", []).append(
                {"name": m["name"], "response": resp if isinstance(resp, dict) else m["content"]})
            continue
        if (m["role"] == "assistant" and "tool_calls" not in m and last_calls and "tool_responses" in last
                and last["content"] == ""):
            last["content"] = m["content"]
            continue
        out.append(m)
    return out


def convention_text(request):
    choice = request.get("tool_choice", "auto")
    s = ("You can call functions. To call one, reply with only a JSON object of this form, one object per call:\n"
         "{\"tool_call\": {\"name\": \"FUNCTION_NAME\", \"arguments\": {...}}}\n"
         "The functions (name: description; JSON Schema of the arguments):\n")
    for t in request["tools"]:
        f = t["function"]
        s += f"- {f['name']}: {f.get('description', '')}; " + json.dumps(
            f.get("parameters", {}), separators=(",", ":"), ensure_ascii=False) + "\n"
    if isinstance(choice, dict):
        return s + f"Call the function {choice['function']['name']} now."
    return s + ("Call one of the functions now." if choice == "required" else "Call a function only when it helps to answer.")


def json_convention(messages, request):
    out, last_result = [], False
    for m in messages:
        if m["role"] == "tool":
            line = f"Tool result ({m['name']}): {m['content']}"
            if last_result:
                out[-1]["content"] += "\n" + line
            else:
                out.append({"role": "user", "content": line})
            last_result = True
            continue
        last_result = False
        text = m["content"]
        for c in m.get("tool_calls", []):
            call = {"tool_call": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
            text += ("\n" if text else "") + json.dumps(call, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
        out.append({"role": m["role"], "content": text})
    if request.get("tools") and request.get("tool_choice") != "none":
        sys = convention_text(request)
        if out[0]["role"] == "system":
            out[0]["content"] += "\n\n" + sys
        else:
            out.insert(0, {"role": "system", "content": sys})
    return out


def template_input(arch, request):
    msgs = normalize(request["messages"])
    kwargs = {"enable_thinking": False}
    if arch == "gemma4":
        msgs = native(msgs)
        kwargs["tools"] = [{"type": "function", "function": {
            "name": t["function"]["name"], "description": t["function"].get("description", ""),
            "parameters": resolve(t["function"].get("parameters", {}), t["function"].get("parameters", {}))}}
            for t in request["tools"]]
    else:
        msgs = json_convention(msgs, request)
    return msgs, kwargs


def main():
    env = mcg.hf_environment()
    cases = []
    for case in CASES:
        arch, req = case["arch"], case["request"]
        tmpl = env.from_string((ROOT / TEMPLATES[arch]).read_text(encoding="utf-8"))
        msgs, kwargs = template_input(arch, json.loads(json.dumps(req)))
        expected = mcg.render(tmpl, {"messages": msgs, "kwargs": kwargs, "add_generation_prompt": True})
        sha = hashlib.sha256((ROOT / TEMPLATES[arch]).read_bytes()).hexdigest()
        cases.append({"arch": arch, "template_file": TEMPLATES[arch], "template_sha256": sha, "request": req,
                      "expected": expected})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"cases": cases}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
