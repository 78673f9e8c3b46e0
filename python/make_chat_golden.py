"""Golden fixtures for sluice's chat-template engine, rendered by Python jinja2.

Renders chat templates exactly the way Hugging Face `apply_chat_template` does
(jinja2.sandbox.ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, a `{% generation %}` tag, HF's `tojson` override, `raise_exception`
and `strftime_now`) over generated conversations, and writes one JSON fixture per template to
tests/data/chat/. tests/python/test_chat_templates.py then renders the same cases with
sluice and requires byte-identical output (or an error wherever jinja2 raised).

Run from the golden environment (jinja2 pinned in python/requirements-golden.txt):
    .venv-golden/bin/python python/make_chat_golden.py
"""
import argparse
import datetime
import json
import pathlib
import random

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOW = datetime.datetime(2026, 1, 15, 9, 5, 7)  # what strftime_now() returns in every fixture
BOS, EOS = "<bos>", "<eos>"

TEMPLATES = {  # fixture name -> template file
    "builtin_gemma3": ROOT / "src/chat/templates/gemma3.jinja",
    "builtin_gemma4": ROOT / "src/chat/templates/gemma4.jinja",
    "chatml_tools": ROOT / "tests/data/chat/templates/chatml_tools.jinja",
    "ns_macros_tools": ROOT / "tests/data/chat/templates/ns_macros_tools.jinja",
    "filters_mix": ROOT / "tests/data/chat/templates/filters_mix.jinja",
    "loop_vars": ROOT / "tests/data/chat/templates/loop_vars.jinja",
}


# ---------------------------------------------------------------------------------------------
# The environment HF renders chat templates in (transformers' _compile_jinja_template).

class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker: `{% generation %}...{% endgeneration %}` renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment(now=NOW):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, case):
    """What apply_chat_template passes: messages, tools, documents, add_generation_prompt,
    the special tokens, then the extra kwargs."""
    kwargs = dict(case["kwargs"])
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    # jinja2 may mutate inputs in place (e.g. `list|indent` extends the list): render a copy.
    messages = json.loads(json.dumps(case["messages"]))
    return template.render(messages=messages, tools=tools, documents=documents,
                           add_generation_prompt=case["add_generation_prompt"],
                           bos_token=BOS, eos_token=EOS, **kwargs)


# ---------------------------------------------------------------------------------------------
# Conversations

TEXTS = [
    "Hello!", "What's the weather in Paris?", "Summarize this in one line.", "ok", "Thanks.",
    "  leading spaces", "trailing spaces   ", "\n\nsurrounded by newlines\n\n", "tab\there",
    " \t mixed \n whitespace \t ", "", " ", "\n", "日本語のテキストです。", "emoji 😀👍🏽 mix",
    "Ünïcödé çåsé", "עברית ומספרים 123", "مرحبا بالعالم", "zero\u200bwidth", "nbsp\u00a0inside\u00a0",
    "\u3000ideographic space\u3000", "combining e\u0301 accent", 'quotes "double" and \'single\'',
    "backslash \\ and C:\\tmp\\file", "{{ not_a_template }} {% nor this %}", "<end_of_turn> <|turn>",
    "line1\r\nline2\rline3", "x" * 120, 'JSON {"a": 1, "b": [true, null]}', "1 < 2 && 3 > 2",
    "<b>bold</b> &amp; <i>", "multi\nline\n\ntext", "ß straße İstanbul ΣΑΣ", "%s %d {0} {}",
]
THOUGHTS = [
    "<|channel>thought\nLet me think about it.<channel|>The answer is 4.",
    "Sure.<|channel>thought\nhidden<channel|> Visible part.",
    "<|channel>unterminated thinking",
]
NAMES = ["get_weather", "search_web", "calculator", "Lookup_User", "send_email", "zeta"]
WORDS = ["city", "query", "unit", "count", "flag", "tags", "options", "Limit", "b_key", "a_key"]


def rtext(r):
    return r.choice(TEXTS)


def rschema(r, depth=0):
    kind = r.choice(["string", "string", "integer", "number", "boolean", "array", "object"]
                    if depth < 2 else ["string", "integer", "boolean"])
    s = {"type": kind}
    if r.random() < 0.6:
        s["description"] = r.choice(["The city name", "how many", "Search text é", "A flag", "x"])
    if kind == "string" and r.random() < 0.3:
        s["enum"] = r.sample(["celsius", "fahrenheit", "kelvin", "auto"], r.randint(1, 3))
    if kind == "array":
        s["items"] = rschema(r, depth + 1) if r.random() < 0.5 else {"type": "string"}
    if kind == "object":
        props = {w: rschema(r, depth + 1) for w in r.sample(WORDS, r.randint(1, 3))}
        s["properties"] = props
        if r.random() < 0.5:
            s["required"] = r.sample(list(props), 1)
    if r.random() < 0.1:
        s["nullable"] = True
    if r.random() < 0.08:
        s["type"] = [kind, "null"]
    return s


def rtool(r):
    props = {w: rschema(r) for w in r.sample(WORDS, r.randint(1, 4))}
    fn = {"name": r.choice(NAMES), "description": r.choice(TEXTS[:6] + ["Looks things up in a very long description that goes on"])}
    if r.random() < 0.92:
        fn["parameters"] = {"type": "object", "properties": props}
        if r.random() < 0.6:
            fn["parameters"]["required"] = r.sample(list(props), r.randint(1, len(props)))
    if r.random() < 0.1:
        fn["response"] = {"type": "object", "description": "result"}
    return {"type": "function", "function": fn}


def rargs(r):
    args = {}
    for w in r.sample(WORDS, r.randint(0, 3)):
        args[w] = r.choice([rtext(r), 3, 2.5, True, False, None, ["a", 1], {"k": "v", "n": [1, 2]}])
    return args if r.random() < 0.8 else json.dumps(args)


def rcontent(r, role):
    c = r.random()
    if c < 0.62:
        return rtext(r)
    if c < 0.85:
        parts = []
        for _ in range(r.randint(1, 3)):
            kind = r.choice(["text", "text", "text", "image"] + (["audio", "video"] if role == "user" else []))
            parts.append({"type": kind, "text": rtext(r)} if kind == "text" else {"type": kind})
        return parts
    if c < 0.9 and role == "assistant":
        return r.choice(THOUGHTS)
    if c < 0.97 or role != "assistant":
        return ""
    return None


def message(r, role, content=None, **extra):
    m = {"role": role, "content": rcontent(r, role) if content is None else content}
    m.update(extra)
    if r.random() < 0.2:  # key order is the sender's: keep some messages content-first
        m = dict(reversed(list(m.items())))
    return m


def conversation(r, profile):
    """profile: 'alternating' (strict user/assistant), 'tools' (tool calls and results),
    'loose' (any mix)."""
    msgs = []
    if r.random() < 0.45:
        msgs.append(message(r, r.choice(["system", "system", "developer"]) if profile != "alternating" else "system"))
    n = r.choice([1, 1, 2, 3, 4, 5, 7, 9]) if r.random() > 0.03 else 0
    role = "user"
    for k in range(n):
        if profile == "tools" and role == "assistant" and r.random() < 0.35:
            calls = [{"type": "function", "function": {"name": r.choice(NAMES), "arguments": rargs(r)}}
                     for _ in range(r.choice([1, 1, 1, 2]))]
            msgs.append(message(r, "assistant", content=r.choice([None, "", "Calling a tool."]), tool_calls=calls))
            if r.random() < 0.5:
                msgs.append(message(r, "tool", content=r.choice([rtext(r), '{"temp": 21}', {"temp": 21, "unit": "C"}])))
            else:
                resp = r.choice([{"temp": 21, "ok": True, "tags": ["a", "b"]}, "plain text result", 42, None])
                msgs.append({"role": "tool", "tool_responses": [{"name": r.choice(NAMES), "response": resp}]})
            role = "assistant" if r.random() < 0.5 else "user"
            continue
        msgs.append(message(r, role))
        if profile == "alternating" and r.random() > 0.05:
            role = "assistant" if role == "user" else "user"
        elif profile != "alternating":
            role = r.choice(["user", "assistant", "assistant"] if role == "user" else ["user", "user", "assistant", "tool"])
        else:  # a deliberate violation of the alternation
            role = r.choice(["user", "assistant", "tool"])
    case = {"messages": msgs, "add_generation_prompt": r.random() < 0.6, "kwargs": {}}
    kw = case["kwargs"]
    if r.random() < 0.5:
        kw["enable_thinking"] = r.random() < 0.5
    if profile == "tools" and r.random() < 0.6:
        kw["tools"] = [rtool(r) for _ in range(r.randint(1, 3))]
    elif r.random() < 0.08:
        kw["tools"] = []
    if r.random() < 0.1:
        kw["tools_in_user_message"] = r.random() < 0.5
    if r.random() < 0.1:
        kw["numbered"] = True
    if r.random() < 0.08:
        kw["default_system"] = rtext(r)
    return case


PROFILES = {  # which conversations each template gets (mostly ones it can render)
    "builtin_gemma3": ["alternating"] * 9 + ["loose"],
    "builtin_gemma4": ["alternating", "tools", "tools", "loose"],
    "chatml_tools": ["alternating", "tools", "tools", "loose"],
    "ns_macros_tools": ["alternating", "tools", "tools", "loose"],
    "filters_mix": ["alternating", "tools", "loose"],
    "loop_vars": ["alternating", "alternating", "loose"],
}


def build(name, path, n_cases, seed):
    source = path.read_text(encoding="utf-8")
    template = hf_environment().from_string(source)
    r = random.Random(f"{seed}:{name}")
    cases, errors = [], 0
    for _ in range(n_cases):
        case = conversation(r, r.choice(PROFILES[name]))
        try:
            case["expected"] = render(template, case)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = f"{type(e).__name__}: {e}"
            errors += 1
        except (TypeError, ValueError, AttributeError) as e:
            case["error"] = f"{type(e).__name__}: {e}"
            errors += 1
        cases.append(case)
    fixture = {
        "name": name,
        "template_file": str(path.relative_to(ROOT)),
        "template": source,
        "bos_token": BOS,
        "eos_token": EOS,
        "now": [NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second],
        "generator": f"python/make_chat_golden.py --seed {seed} (jinja2 {jinja2.__version__})",
        "cases": cases,
    }
    return fixture, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tests/data/chat")
    ap.add_argument("--cases", type=int, default=130)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, path in TEMPLATES.items():
        fixture, errors = build(name, path, args.cases, args.seed)
        out = args.out / f"{name}.json"
        out.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{out}: {len(fixture['cases'])} cases, {errors} raise in jinja2, "
              f"{out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
