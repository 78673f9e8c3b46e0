"""Writes tests/data/grammar/json_cases.json: for every schema in tests/data/schemas/, valid
and invalid values in their canonical serialisation (compact JSON, properties in the
schema's order), each classified by the `jsonschema` package with its format checker — the
reference the grammar tests compare against.

Valid candidates come from a random generator that follows the schema; invalid ones are
mutations of valid values (a part replaced, a key dropped or added, an item added or
removed). Whatever the generator meant, only jsonschema's verdict decides the list a value
lands in. Patterns are sampled from the schema's own "examples".

    python python/make_grammar_cases.py   (needs jsonschema[format] and rfc3339-validator)
"""
import copy
import importlib.metadata
import json
import math
import pathlib
import random

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "tests/data/schemas"
OUT = ROOT / "tests/data/grammar/json_cases.json"


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


class Gen:
    def __init__(self, root, rng):
        self.root, self.rng = root, rng

    def resolve(self, s):
        while isinstance(s, dict) and "$ref" in s:
            node = self.root
            for part in s["$ref"][1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                node = node[int(part)] if isinstance(node, list) else node[part]
            s = node
        return s

    def merge(self, s):
        if "allOf" not in s:
            return s
        out = {k: v for k, v in s.items() if k != "allOf"}
        for sub in s["allOf"]:
            sub = self.merge(self.resolve(sub))
            for k, v in sub.items():
                if k == "properties":
                    out.setdefault(k, {}).update(v)
                elif k == "required":
                    out[k] = list(dict.fromkeys(out.get(k, []) + v))
                else:
                    out.setdefault(k, v)
        return out

    def value(self, s, depth=0):
        s = self.merge(self.resolve(s))
        r = self.rng
        if s is True or s == {}:
            return r.choice([1, "x", None, True, [1, "y"], {"k": False}])
        if "const" in s:
            return s["const"]
        if "enum" in s:
            return r.choice(s["enum"])
        for k in ("anyOf", "oneOf"):
            if k in s:
                rest = {x: y for x, y in s.items() if x not in (k, "nullable")}
                branch = self.merge(self.resolve(s[k][0] if depth > 5 else r.choice(s[k])))
                both = {**rest, **branch}
                if "properties" in rest and "properties" in branch:
                    both["properties"] = {**rest["properties"], **branch["properties"]}
                if "required" in rest and "required" in branch:
                    both["required"] = list(dict.fromkeys(rest["required"] + branch["required"]))
                return self.value(both, depth + 1)
        t = s.get("type")
        if t is None:
            t = ("object" if "properties" in s or "additionalProperties" in s else
                 "array" if "items" in s or "prefixItems" in s or "maxItems" in s else
                 "string" if any(k in s for k in ("pattern", "format", "maxLength", "minLength")) else
                 "number" if any(k in s for k in ("minimum", "maximum", "multipleOf")) else None)
        if t is None:
            return r.choice([1, "x", None, True])
        if isinstance(t, list):
            t = r.choice(t)
        return getattr(self, "gen_" + t)(s, depth)

    def gen_null(self, s, depth):
        return None

    def gen_boolean(self, s, depth):
        return self.rng.random() < 0.5

    def gen_string(self, s, depth):
        r = self.rng
        if "examples" in s:
            return r.choice(s["examples"])
        f = s.get("format")
        if f == "date":
            return "%04d-%02d-%02d" % (r.randint(1000, 9999), r.randint(1, 12), r.randint(1, 28))
        if f == "time":
            return "%02d:%02d:%02d%s" % (r.randint(0, 23), r.randint(0, 59), r.randint(0, 59), r.choice(["Z", "+02:00", ".5Z"]))
        if f == "date-time":
            return self.gen_string({"format": "date"}, depth) + "T" + self.gen_string({"format": "time"}, depth)
        if f == "uuid":
            h = "%032x" % r.getrandbits(128)
            return "-".join([h[:8], h[8:12], h[12:16], h[16:20], h[20:]])
        if f == "email":
            return r.choice(["a@b.co", "john.doe@example.com", "x+y@mail.example.org"])
        if f == "ipv4":
            return ".".join(str(r.randint(0, 255)) for _ in range(4))
        if f == "ipv6":
            return ":".join("%x" % r.randint(0, 65535) for _ in range(8))
        if f == "duration":
            return r.choice(["P3D", "PT5M", "P1Y2M3DT4H5M6S", "P2W", "PT0S"])
        if f == "hostname":
            return r.choice(["example.com", "localhost", "a-b.c.example.org"])
        if f in ("uri", "uri-reference"):
            return r.choice(["https://example.com/a", "http://h:8080/x/y?q=1", "ftp://a.b.c/"])
        if f == "json-pointer":
            return r.choice(["", "/a/b", "/0"])
        lo, hi = s.get("minLength", 0), min(s.get("maxLength", 8), 8)
        alphabet = "abcXYZ 09_-\"\\\n/é日"
        return "".join(r.choice(alphabet) for _ in range(r.randint(lo, max(lo, hi))))

    def bounds(self, s, integer):
        def num(k, default):
            v = s.get(k, default)
            return default if isinstance(v, bool) else v
        lo = num("minimum", num("exclusiveMinimum", -1000))
        hi = num("maximum", num("exclusiveMaximum", 1000))
        if "exclusiveMinimum" in s:
            lo += 1 if integer else 0.001
        if "exclusiveMaximum" in s:
            hi -= 1 if integer else 0.001
        return lo, hi

    def gen_integer(self, s, depth):
        lo, hi = self.bounds(s, True)
        if "minimum" in s and "maximum" not in s and "exclusiveMaximum" not in s:
            hi = lo + 1000
        if "maximum" in s and "minimum" not in s and "exclusiveMinimum" not in s:
            lo = hi - 1000
        x = self.rng.randint(math.ceil(lo), max(math.ceil(lo), math.floor(hi)))
        m = s.get("multipleOf")
        if isinstance(m, int) and m > 1:
            x -= x % m
        return x

    def gen_number(self, s, depth):
        lo, hi = self.bounds(s, False)
        if self.rng.random() < 0.3 or hi - lo > 100:
            return self.gen_integer(s, depth)
        x = round(self.rng.uniform(lo, hi), self.rng.choice([1, 2, 3]))
        return round(x, 2) if s.get("multipleOf") == 0.01 else x

    def gen_array(self, s, depth):
        r = self.rng
        prefix = s.get("prefixItems", [])
        items = s.get("items", {})
        if isinstance(items, list):  # draft 4-2019 tuple form
            prefix, items = items, s.get("additionalItems", {})
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", max(lo, 3 if depth < 6 else 0) + (len(prefix) if items is not False else 0))
        if items is False:
            hi = min(hi, len(prefix))
        n = r.randint(lo, max(lo, min(hi, lo + 3)))
        return [self.value(prefix[i] if i < len(prefix) else items, depth + 1) for i in range(n)]

    def gen_object(self, s, depth):
        r = self.rng
        req = set(s.get("required", []))
        out = {}
        for name, ps in s.get("properties", {}).items():
            if name in req or (r.random() < 0.5 and depth < 7):
                out[name] = self.value(ps, depth + 1)
        add = s.get("additionalProperties", True)
        for name in s.get("required", []):
            if name not in out:
                out[name] = self.value(add if isinstance(add, dict) else {}, depth + 1)
        for pat, ps in s.get("patternProperties", {}).items():
            if r.random() < 0.6:
                out[pat.lstrip("^") + r.choice("abc")] = self.value(ps, depth + 1)
        if add is not False and r.random() < 0.3:
            out["extra_%d" % r.randint(0, 9)] = self.value(add if add is not True else {}, depth + 1)
        return out


def paths(v, at=()):
    yield at
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, at + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, at + (i,))


def mutate(v, rng):
    v = copy.deepcopy(v)
    ps = list(paths(v))
    at = rng.choice(ps)
    repl = rng.choice([None, True, 0, -7, 1.5, 10**9, "x", "", "2023-02-30", "1.2.3.4.5", [], {}, [1], {"zz": 1}])
    if not at:
        return repl
    parent = v
    for k in at[:-1]:
        parent = parent[k]
    k = at[-1]
    op = rng.random()
    if isinstance(parent, dict) and op < 0.25:
        del parent[k]
    elif isinstance(parent, dict) and op < 0.4:
        parent["unexpected"] = 1
    elif isinstance(parent, list) and op < 0.3:
        parent.append(copy.deepcopy(parent[k]))
    elif isinstance(parent, list) and op < 0.45:
        del parent[k]
    else:
        parent[k] = repl
    return v


def main():
    rng = random.Random(1234)
    cases = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        strict = cls(schema, format_checker=cls.FORMAT_CHECKER)   # the draft's own format set

        class validator:  # the fqdn checker raises on a non-string instead of passing it on
            @staticmethod
            def is_valid(v):
                try:
                    return strict.is_valid(v)
                except ValueError:
                    return False
        gen = Gen(schema, rng)
        valid, invalid = {}, {}
        for _ in range(60):
            v = gen.value(schema)
            if validator.is_valid(v):
                valid.setdefault(dumps(v), v)
            else:
                print(f"{path.name}: generated value is invalid, skipped: {dumps(v)}")
        for v in list(valid.values()) * 4:
            m = mutate(v, rng)
            if not validator.is_valid(m):
                invalid.setdefault(dumps(m), m)
        cases.append({"name": path.stem, "schema": schema, "valid": sorted(valid)[:12], "invalid": sorted(invalid)[:12]})
    version = importlib.metadata.version("jsonschema")
    OUT.write_text(json.dumps({"generator": "python/make_grammar_cases.py", "jsonschema": version, "cases": cases},
                              ensure_ascii=False, indent=1) + "\n")
    print(f"{len(cases)} schemas -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
