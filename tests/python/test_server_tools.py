"""OpenAI tools through `sluice serve` and the official `openai` SDK (docs/tools.md).

On the tiny Gemma 4 model (random weights, native call syntax spelled in bytes: its 512-token
vocabulary has no tool tokens) and the real Gemma 3 270M (the JSON convention): `required`
and a named tool_choice always come back as a call whose arguments validate against the
tool's schema (`jsonschema`, a validator we did not write); `none` never does; streamed calls
reassemble to the non-streamed ones; the prompts of tool conversations equal jinja2's
rendering of the template (tests/data/chat/openai/tools.json, python/make_tool_chat_golden.py)."""
import hashlib
import json

import httpx2 as httpx
import jsonschema
import openai
import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY3 = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
TINY4 = ROOT / "tests/data/golden/tiny-gemma4.q8_0.gguf"
GOLDEN = ROOT / "tests/data/chat/openai/tools.json"

# Bounded strings and numbers: random weights end every value within max_tokens.
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city", "strict": True,
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 8},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"$ref": "#/$defs/Unit"}},
        "required": ["city", "days"], "additionalProperties": False,
        "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "maxLength": 6},
        "safe": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
        "required": ["query", "safe"], "additionalProperties": False}}}
TOOLS = [WEATHER, SEARCH]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_call(call, names):
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in names
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return call.function.name, args


@pytest.fixture(scope="module")
def tiny4(sluice_bin):
    s = Server(sluice_bin, TINY4, "-c", 1024, "--parallel", 4)
    yield s
    assert_clean_exit(s)


@pytest.fixture(scope="module")
def client4(tiny4):
    return openai.OpenAI(base_url=tiny4.base_url, api_key="none", max_retries=0, timeout=60)


def ask(client, model="tiny-gemma4", **kw):
    kw.setdefault("max_tokens", 200)
    kw.setdefault("temperature", 1.0)
    return client.chat.completions.create(model=model, messages=MSGS, tools=TOOLS, **kw)


@pytest.mark.parametrize("seed", range(6))
def test_required_and_named_return_a_valid_call(client4, seed):
    r = ask(client4, tool_choice="required", seed=seed)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert len(c.message.tool_calls) >= 1 and not c.message.content  # parallel_tool_calls: one or more
    for call in c.message.tool_calls:
        check_call(call, SCHEMAS)
    named = ask(client4, tool_choice={"type": "function", "function": {"name": "search"}}, seed=seed)
    assert named.choices[0].finish_reason == "tool_calls"
    assert check_call(named.choices[0].message.tool_calls[0], {"search"})[0] == "search"


def test_none_never_calls(client4):
    for seed in range(4):
        r = ask(client4, tool_choice="none", seed=seed, max_tokens=40)
        assert not r.choices[0].message.tool_calls and r.choices[0].finish_reason != "tool_calls"


def test_streamed_call_reassembles_to_the_non_streamed_one(client4):
    kw = dict(tool_choice="required", seed=11, temperature=1.0)
    whole = ask(client4, **kw).choices[0].message.tool_calls
    chunks = list(ask(client4, stream=True, **kw))
    calls, finish, fragments = {}, None, 0
    for ch in chunks:
        d = ch.choices[0].delta if ch.choices else None
        if d is not None:
            assert not d.content or "<|" not in d.content  # no markup as content
            for tc in d.tool_calls or []:
                if tc.id:  # the first delta of a call: index, id, type, name
                    assert tc.index not in calls and tc.type == "function" and tc.function.name
                    calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
                calls[tc.index]["arguments"] += tc.function.arguments or ""
                fragments += bool(tc.function.arguments)
        if ch.choices and ch.choices[0].finish_reason:
            finish = ch.choices[0].finish_reason
    assert finish == "tool_calls"
    assert fragments > 2  # an enforced call's arguments stream as they are generated
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (t.function.name, t.function.arguments) for t in whole]


def stream_calls(chunks):
    """The calls of a streamed reply ({index: {id, name, arguments}}), how many deltas carried
    argument text, and the finish reason."""
    calls, finish, fragments = {}, None, 0
    for ch in chunks:
        d = ch.choices[0].delta if ch.choices else None
        if d is not None:
            for tc in d.tool_calls or []:
                if tc.id:
                    calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
                calls[tc.index]["arguments"] += tc.function.arguments or ""
                fragments += bool(tc.function.arguments)
        if ch.choices and ch.choices[0].finish_reason:
            finish = ch.choices[0].finish_reason
    return calls, fragments, finish


def test_required_with_parallel_calls_makes_several(client4):
    """The grammar of `required` under parallel_tool_calls allows a list of calls. The random
    model is scripted into a second one by min_tokens (longer than any one call): while it holds, the end is
    banned, so once the first call closes the only way on is another call. Each call is valid
    and has its own id. With parallel_tool_calls false the grammar ends after one call, so
    the same request makes exactly one."""
    for seed in range(4):
        kw = dict(tool_choice="required", seed=seed, max_tokens=600, extra_body={"min_tokens": 120})
        r = ask(client4, parallel_tool_calls=True, **kw)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c
        assert len(c.message.tool_calls) >= 2, c.message.tool_calls
        for call in c.message.tool_calls:
            check_call(call, SCHEMAS)
        assert len({call.id for call in c.message.tool_calls}) == len(c.message.tool_calls)
        one = ask(client4, parallel_tool_calls=False, **kw).choices[0]
        assert one.finish_reason == "tool_calls" and len(one.message.tool_calls) == 1
        check_call(one.message.tool_calls[0], SCHEMAS)


NOTE = {"type": "function", "function": {
    "name": "note", "description": "Write a note down",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
LONG = "the quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun"


def test_an_unenforced_call_streams_its_arguments_as_they_come(client4):
    """tool_choice auto with a non-strict tool enforces nothing (and the tiny vocabulary has no
    <|tool_call> token): the model's text is forced through a plain `grammar` instead, a native
    call with a long argument. Its arguments arrive in many deltas that concatenate to the
    non-streamed reply's arguments."""
    gbnf = 'root ::= "<|tool_call>call:note{text:<|\\"|>' + LONG + '<|\\"|>}<tool_call|>"'
    kw = dict(model="tiny-gemma4", messages=MSGS, tools=[NOTE], max_tokens=300, seed=3, extra_body={"grammar": gbnf})
    whole = client4.chat.completions.create(**kw).choices[0]
    assert whole.finish_reason == "tool_calls", whole
    [call] = whole.message.tool_calls
    assert call.function.name == "note" and json.loads(call.function.arguments) == {"text": LONG}
    calls, fragments, finish = stream_calls(client4.chat.completions.create(stream=True, **kw))
    assert finish == "tool_calls"
    assert fragments >= 2, fragments  # incremental, not one piece at the end
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [("note", call.function.arguments)]


def test_n_choices_and_single_call(client4):
    r = ask(client4, tool_choice="required", seed=5, n=3, parallel_tool_calls=False)
    for c in r.choices:
        assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
        check_call(c.message.tool_calls[0], SCHEMAS)


def test_tool_errors_are_400(client4, tiny4):
    with pytest.raises(openai.BadRequestError, match="not in tools"):
        ask(client4, tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(openai.BadRequestError, match="matches no earlier"):
        client4.chat.completions.create(model="tiny-gemma4", messages=MSGS + [
            {"role": "tool", "tool_call_id": "x", "content": "1"}], max_tokens=2)
    bad = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "dependentSchemas": {"a": {"required": ["b"]}}}}}
    with pytest.raises(openai.BadRequestError, match="'dependentSchemas' at #/dependentSchemas/a"):
        client4.chat.completions.create(model="tiny-gemma4", messages=MSGS, tools=[bad], tool_choice="required")
    with pytest.raises(openai.BadRequestError, match="one constraint per request"):
        ask(client4, tool_choice="required", response_format={"type": "json_object"})
    assert tiny4.wait_blocks_free()


def test_auto_and_a_tool_conversation_run(client4):
    r = ask(client4, tool_choice="auto", seed=1, max_tokens=30)
    assert r.choices[0].finish_reason in ("length", "stop", "tool_calls")
    conv = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 1})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp": 21})}]
    r = client4.chat.completions.create(model="tiny-gemma4", messages=conv, tools=TOOLS, max_tokens=5)
    assert r.usage.completion_tokens >= 1


@pytest.mark.parametrize("arch", ["gemma4", "gemma3"])
def test_tool_prompts_match_jinja2(sluice_bin, arch):
    cases = [c for c in json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"] if c["arch"] == arch]
    assert cases
    for c in cases:  # the fixture was rendered from the template as it is now
        sha = hashlib.sha256((ROOT / c["template_file"]).read_bytes()).hexdigest()
        assert sha == c["template_sha256"], f"{c['template_file']} changed: rerun python/make_tool_chat_golden.py"
    s = Server(sluice_bin, TINY4 if arch == "gemma4" else TINY3, "-c", 256)
    try:
        for c in cases:
            r = httpx.post(s.url + "/apply-template", json=c["request"], timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["prompt"] == c["expected"]
    finally:
        assert_clean_exit(s)


# ---- the real Gemma 3 270M: the JSON convention, enforced --------------------------------------

@pytest.fixture(scope="module")
def client270(sluice_bin, gemma3_path):
    s = Server(sluice_bin, gemma3_path, "-c", 2048, "--parallel", 2, "--alias", "g3")
    yield openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0, timeout=120)
    assert_clean_exit(s)


def test_real_270m_required_named_none_and_stream(client270):
    for seed in range(2):
        r = ask(client270, model="g3", tool_choice="required", seed=seed, max_tokens=120)
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
        check_call(r.choices[0].message.tool_calls[0], SCHEMAS)
    kw = dict(tool_choice={"type": "function", "function": {"name": "get_weather"}}, seed=7, max_tokens=120)
    whole = ask(client270, model="g3", **kw).choices[0]
    assert check_call(whole.message.tool_calls[0], {"get_weather"})[0] == "get_weather"
    args = ""
    for ch in ask(client270, model="g3", stream=True, **kw):
        for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            args += tc.function.arguments or ""
    assert args == whole.message.tool_calls[0].function.arguments
    r = ask(client270, model="g3", tool_choice="none", seed=0, max_tokens=40)
    assert not r.choices[0].message.tool_calls
