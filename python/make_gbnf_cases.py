"""Writes tests/data/grammar/gbnf_cases.json: a small corpus of GBNF grammars and strings,
each string classified (in the language or not) by Lark's Earley parser — a reference we
did not write — after a mechanical GBNF -> Lark translation.

    python python/make_gbnf_cases.py   (needs lark)
"""
import json
import pathlib
import re

import lark

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests/data/grammar/gbnf_cases.json"

GRAMMARS = {
    "arithmetic": (r'''
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
''', ["1", "12+3", "(1+2)*3", "((4))", "1+", "+1", "(1", "1*(2-3)/4", "", "1 + 2", "12a"]),
    "json_like": (r'''
root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( pair ( "," pair )* )? "}"
pair ::= string ":" value
array ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" [^"\\]* "\""
number ::= "-"? [0-9]+ ( "." [0-9]+ )?
''', ['{}', '[]', '{"a":1}', '{"a":[1,2,{"b":null}]}', '"x"', '-0.5', '{"a":}', '[1,]', '{"a" 1}', 'tru', '"héllo"', '[true,false]']),
    "repetition_counts": (r'''
root ::= [a-c]{2,4} "-" [0-9]{3} "x"?
''', ["ab-123", "abcc-000x", "a-123", "abcab-123", "ab-12", "ab-1234", "cc-999x", "ab-123xx"]),
    "alternation_prefixes": (r'''
root ::= "cat" | "cats" | "category" | "dog" ("s" | "gy")?
''', ["cat", "cats", "category", "categor", "dog", "dogs", "doggy", "dogy", "catss", "do"]),
    "comments_and_lines": (r'''
# a comment line
root ::= greeting " " name  # trailing comment
greeting ::= "hello" | "hi"
name ::= [A-Z] [a-z]*
''', ["hello World", "hi A", "hello world", "hey Bob", "hi  Bob", "hiBob", "hello Ann"]),
    "nested_optional": (r'''
root ::= "<" item? ( ";" item? )* ">"
item ::= key ( "=" val )?
key ::= [a-z]+
val ::= [0-9]+ | "'" [^']* "'"
''', ["<>", "<a>", "<a=1;b='x y';>", "<;;>", "<a=>", "<a='>", "<A>", "<a=1;b=2>", "<a b>"]),
    "escapes": (r'''
root ::= "tab\there" | "quote\"" | "nl\n" | [\x41-\x43]+
''', ["tab\there", 'quote"', "nl\n", "ABCA", "D", "tab here", "quote"]),
    "right_recursion": (r'''
root ::= list
list ::= "a" list | "b"
''', ["b", "ab", "aaab", "a", "aab b", "ba"]),
}


def to_lark(gbnf):
    out = []
    for line in gbnf.strip().splitlines():
        line = re.sub(r'\s+#.*$', '', line) if not line.startswith('#') else ''
        if not line.strip():
            continue
        line = re.sub(r'\{(\d+),(\d+)\}', r' ~ \1..\2', line)
        line = re.sub(r'\{(\d+)\}', r' ~ \1', line)
        line = re.sub(r'([a-z][a-z0-9-]*)(\s*::=)', lambda m: 'r_' + m.group(1).replace('-', '_') + ':', line)
        # Rule references: bare words outside strings and classes.
        parts = re.split(r'("(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\])', line)
        for i in range(0, len(parts), 2):
            parts[i] = re.sub(r'(?<![\w.])([a-z][a-z0-9-]*)(?![\w:])', lambda m: 'r_' + m.group(1).replace('-', '_'), parts[i])
        for i in range(1, len(parts), 2):
            if parts[i].startswith('['):
                parts[i] = '/' + parts[i].replace('/', '\\/') + '/'
        out.append(''.join(parts))
    return '\n'.join(out) + '\n'


def main():
    cases = []
    for name, (gbnf, strings) in GRAMMARS.items():
        parser = lark.Lark(to_lark(gbnf), start='r_root', parser='earley', lexer='dynamic_complete')
        accept, reject = [], []
        for s in strings:
            try:
                parser.parse(s)
                accept.append(s)
            except lark.exceptions.LarkError:
                reject.append(s)
        cases.append({"name": name, "gbnf": gbnf.strip() + "\n", "accept": accept, "reject": reject})
    OUT.write_text(json.dumps({"generator": "python/make_gbnf_cases.py", "cases": cases}, ensure_ascii=False, indent=1) + "\n")
    print(f"{len(cases)} grammars -> {OUT.relative_to(ROOT)}")
    for c in cases:
        print(c["name"], "accept", c["accept"], "reject", c["reject"])


if __name__ == "__main__":
    main()
