"""Deterministic tokenizer test corpus (used by make_tokenizer_golden.py).

make_corpus(seed) returns a list of >= 2000 valid UTF-8 strings covering what tokenizers get
wrong: many scripts, code, whitespace runs (spaces, tabs, newlines, "\\n\\n\\n", " \\n "),
leading/trailing whitespace, emoji (ZWJ sequences, flags, skin tones, keycaps), characters
that need byte fallback (rare CJK extension B, control characters, U+FFFD, private use),
Gemma 3 / Gemma 4 special-token strings mid-text, digit and punctuation runs, the empty
string and very long lines. Only the standard library is used, so the same seed gives the
same corpus on every machine.
"""
import random

SP = "\u2581"

WORDS = {
    "en": "the quick brown fox jumps over lazy dog hello world tokenizer model weights cache "
          "attention layer token prompt answer question because although however it's don't "
          "we're they've I'll she'd you'm cannot".split(),
    "fr": "le la les une des être avoir français élève où déjà naïve garçon hôtel cœur "
          "ça très à côté Noël".split(),
    "de": "der die das und über Straße Mädchen schön Größe Fußball Äpfel Öl Übung heißen".split(),
    "es": "el niño año mañana corazón canción ¿qué? ¡hola! pingüino señor jalapeño".split(),
    "pl": "zażółć gęślą jaźń źdźbło chrząszcz brzmi w trzcinie łódź".split(),
    "vi": "Tiếng Việt người được những không phải thì của chúng tôi".split(),
    "ru": "привет мир съешь ещё этих мягких французских булок да выпей чаю Москва".split(),
    "uk": "Україна їжак ґанок єнот щастя".split(),
    "el": "Γειά σου κόσμε ξεσκεπάζω την ψυχοφθόρα βδελυγμία αλφάβητο".split(),
    "zh": "你好 世界 中文 分词 测试 语言 模型 人工智能 北京 上海 的 是 了 我们".split(),
    "ja": "こんにちは 世界 カタカナ ひらがな 日本語 東京 です ます トークナイザー".split(),
    "ko": "안녕하세요 세계 한국어 토크나이저 서울 감사합니다 사랑".split(),
    "ar": "مرحبا بالعالم اللغة العربية كتاب مدرسة السلام عليكم".split(),
    "he": "שלום עולם עברית ספר תודה רבה ירושלים".split(),
    "hi": "नमस्ते दुनिया हिन्दी भाषा किताब धन्यवाद भारत".split(),
    "th": "สวัสดี ชาวโลก ภาษาไทย ขอบคุณ กรุงเทพ".split(),
}

EMOJI = ["😀", "😂", "🥲", "🤖", "🚀", "❤️", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇯🇵",
         "🇩🇪", "1️⃣", "#️⃣", "🧑🏿‍🚀", "🫠", "✨", "☕", "🐍", "🦀", "👁️‍🗨️", "🧔‍♀️"]

# Characters Gemma's vocabularies probably lack (byte fallback), all valid UTF-8 scalars.
RARE = ["\U00020000", "\U0002A6A5", "\U0002B740", "\U00013000", "\U0001D11E", "\U0001F9FF",
        "\uE000", "\uF8FF", "\U000F0000", "\U0010FFFD", "\uFFFD", "\uFFFF", "\uFEFF", "\u200B",
        "\u200D", "\u2028", "\u2029", "\u00A0", "\u3000", "\u0301", "\u0007", "\u001B", "\u007F",
        "\u0000", "\u0001", "\u001F", "\u0085", "\U0001F3FB", "\u0E3F", "\u2581", "\u2581\u2581",
        "\U0001F004", "\u0F00"]

GEMMA3_SPECIAL = ["<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>",
                  "<unused0>", "<unused42>", "</s>", "[multimodal]", "<start_of_image>",
                  "<end_of_image>", "<table>", "<tr>", "<td>", "</td>", "<h1>"]
GEMMA4_SPECIAL = ["<|turn>", "<turn|>", "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>",
                  "<|tool_response>", "<tool_response|>", '<|"|>', "<|think|>", "<|channel>",
                  "<channel|>", "<|image>", "<image|>", "<|image|>", "<|audio|>", "<|video|>"]

PUNCT_RUNS = ["...", "!!!", "???", "?!", "--", "---", "===", "***", "___", "~~~", "###", "@@",
              "$$$", "%%", "^^", "&&", "||", "<<", ">>", "//", "\\\\", "''", '""', "``", ",,",
              ";;", "::", "()", "[]", "{}", "<>", " ?", " !", " .", " ,", " ' ", " 's", " 're"]


def _sentence(rng, lang):
    words = [rng.choice(WORDS[lang]) for _ in range(rng.randint(1, 12))]
    if lang in ("zh", "ja", "th") and rng.random() < 0.6:
        s = "".join(words)
    else:
        s = " ".join(words)
    if rng.random() < 0.5:
        s = s[0].upper() + s[1:] if s else s
    end = rng.choice(["", ".", "!", "?", "。", "؟", "…", " .", ",", ":"])
    return s + end


def _python(rng):
    name = rng.choice(["foo", "bar", "compute_logits", "x", "tok", "run"])
    ind = rng.choice(["    ", "\t", "  "])
    return (f"def {name}(a, b={rng.randint(0, 99)}):\n{ind}\"\"\"Docstring.\"\"\"\n"
            f"{ind}if a > b:\n{ind}{ind}return a ** 2  # square\n{ind}return [i for i in range(b)]\n")


def _c(rng):
    n = rng.randint(1, 64)
    return (f"#include <stdio.h>\nint main(void) {{\n\tint x[{n}] = {{0}};\n"
            f"\tfor (int i = 0; i < {n}; ++i) x[i] = i * 2;\n\tprintf(\"%d\\n\", x[0]);\n"
            f"\treturn 0;\n}}\n")


def _json(rng):
    k = rng.choice(["name", "id", "值", "ключ"])
    return ('{"%s": %d, "list": [1, 2.5, -3e10, null, true], "nested": {"a": "b\\n"},\n'
            '  "emoji": "%s"}' % (k, rng.randint(0, 10**6), rng.choice(EMOJI)))


def _html(rng):
    return ("<!DOCTYPE html>\n<html>\n<head><title>%s</title></head>\n<body>\n"
            "  <table><tr><td>%d</td></tr></table>\n  <p class=\"x\">&amp; &lt;tag&gt;</p>\n"
            "</body>\n</html>" % (_sentence(rng, "en"), rng.randint(0, 999)))


def _whitespace(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        ws = rng.choice([" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", " \n ", "\r\n", " \t ",
                         " " * rng.randint(4, 40), "\n" * rng.randint(4, 40), "\t" * rng.randint(2, 9)])
        parts.append(ws)
        if rng.random() < 0.7:
            parts.append(rng.choice(WORDS[rng.choice(list(WORDS))]))
    return "".join(parts)


def _digits(rng):
    return rng.choice([
        str(rng.randint(0, 10**rng.randint(1, 20))),
        f"{rng.random() * 10**rng.randint(0, 8):.{rng.randint(0, 6)}f}",
        f"{rng.randint(1, 9)},{rng.randint(100, 999)},{rng.randint(100, 999)}",
        f"+1 ({rng.randint(100, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
        "".join(rng.choice(PUNCT_RUNS) for _ in range(rng.randint(1, 6))),
        f"{rng.randint(1, 31)}/{rng.randint(1, 12)}/{rng.randint(1900, 2100)}",
        "0x" + "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(rng.randint(1, 16))),
    ])


def _emoji(rng):
    return "".join(rng.choice(EMOJI + [" ", "", "a", "中"]) for _ in range(rng.randint(1, 10)))


def _rare(rng):
    return "".join(rng.choice(RARE + ["a", " ", "é", "\n"]) for _ in range(rng.randint(1, 8)))


def _random_codepoints(rng):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
              (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF), (0xE000, 0xF8FF), (0x2000, 0x206F)]
    out = []
    for _ in range(rng.randint(1, 30)):
        lo, hi = rng.choice(blocks)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def _chat3(rng):
    turns = []
    for i in range(rng.randint(1, 3)):
        role = "user" if i % 2 == 0 else "model"
        turns.append(f"<start_of_turn>{role}\n{_sentence(rng, rng.choice(list(WORDS)))}<end_of_turn>\n")
    prefix = "<bos>" if rng.random() < 0.5 else ""
    return prefix + "".join(turns) + ("<start_of_turn>model\n" if rng.random() < 0.7 else "")


def _chat4(rng):
    s = "<bos><|turn>system\n<|think|>Be brief.<turn|>\n" if rng.random() < 0.4 else "<bos>"
    s += f"<|turn>user\n{_sentence(rng, rng.choice(list(WORDS)))}<turn|>\n<|turn>model\n"
    r = rng.random()
    if r < 0.3:
        s += "<|channel>thought\n<channel|>"
    elif r < 0.6:
        s += '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|><|tool_response>'
        s += 'response:get_weather{temp:21}<tool_response|>'
    else:
        s += "\n\n<|image|>\n\n" + _sentence(rng, "en") + "<turn|>"
    return s


def _special_mid(rng):
    sp = rng.choice(GEMMA3_SPECIAL + GEMMA4_SPECIAL)
    a = _sentence(rng, rng.choice(list(WORDS)))
    b = _sentence(rng, rng.choice(list(WORDS)))
    glue = rng.choice(["", " ", "\n"])
    return a + glue + sp + glue + b


def _multiline(rng):
    gens = [lambda r: _sentence(r, r.choice(list(WORDS))), _python, _digits, _emoji, _whitespace,
            _rare, _special_mid]
    lines = [rng.choice(gens)(rng) for _ in range(rng.randint(2, 8))]
    return rng.choice(["\n", "\n\n", "\n\n\n", " \n ", "\r\n"]).join(lines)


def _pad(rng, s):
    lead = rng.choice(["", "", " ", "  ", "\n", "\t", " \n", "\n\n"])
    trail = rng.choice(["", "", " ", "   ", "\n", "\t", "\n\n", " \n"])
    return lead + s + trail


FIXED = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", " \n ", "\r\n", "\n \n", " \t\n",
    "a", "hello world", "Hello, World!", "hello world \u00e9", "hello world\n\n\u00e9",
    " leading space", "trailing space ", "  both  ", "\n\nleading newlines", "trailing newlines\n\n\n",
    "multiple   spaces   here", "tab\tseparated\tvalues", "line1\nline2\r\nline3\rline4",
    "<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n",
    "text<bos>mid<eos>end", "<bos>", "<bos><bos>", "<eos>", "<pad><unk><mask>", "<unused0><unused98>",
    "</s>", "a</s>b", "<start_of_turn", "start_of_turn>", "<<start_of_turn>>", "<end_of_turn><end_of_turn>",
    "[multimodal]", "<start_of_image>", "<table><tr><td>1</td></tr></table>",
    "<bos><|turn>user\nHi!<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
    '<|tool_call>call:f{a:<|"|>x<|"|>,b:2}<tool_call|><|tool_response>response:f{ok:1}<tool_response|>',
    "<|turn><turn|><|turn|>", "<|image|><|audio|><|video|>", "<|think|>",
    "\U0001F600", "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466", "\U0001F1FA\U0001F1F8",
    "\U00020000\U0002A6A5", "\uFFFD", "\u0000", "\u0001\u0002\u0003", "\u007F", "\u2581", "a\u2581b",
    "\u2581\u2581hello", "e\u0301", "\u00A0nbsp\u00A0", "\u3000ideographic\u3000space", "zero\u200Bwidth",
    "\uFEFFbom", "I'm here, you're there. It's 'quoted' . Done !", "a ' b", "x ' ' y", "he 's",
    "0", "1234567890", "3.14159265358979", "1,000,000", "!!!???...", "----====****",
    "\n" * 31, "\n" * 32, "\n" * 40, " " * 31, " " * 32, " " * 45, "\t" * 20, " \n" * 10,
    "a" * 100, "ab" * 300, "\u4e2d" * 200,
]


def make_corpus(seed=20250517, n_random=2400):
    rng = random.Random(seed)
    out = list(FIXED)
    gens = [
        (lambda r: _sentence(r, r.choice(list(WORDS))), 30),
        (_multiline, 14), (_python, 4), (_c, 3), (_json, 3), (_html, 3), (_whitespace, 10),
        (_digits, 6), (_emoji, 6), (_rare, 6), (_random_codepoints, 6), (_chat3, 5), (_chat4, 5),
        (_special_mid, 8),
    ]
    fns = [g for g, w in gens for _ in range(w)]
    for _ in range(n_random):
        s = rng.choice(fns)(rng)
        if rng.random() < 0.3:
            s = _pad(rng, s)
        out.append(s)
    # Very long lines: a single line of mixed text, and a long multi-line document.
    for k in range(4):
        line = " ".join(_sentence(rng, rng.choice(list(WORDS))) for _ in range(300 + 200 * k))
        out.append(line.replace("\n", " "))
    out.append("\n".join(_multiline(rng) for _ in range(60)))
    for s in out:
        s.encode("utf-8")   # every entry must be valid UTF-8 (no lone surrogates)
    return out
