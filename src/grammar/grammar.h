// A byte-level context-free grammar: the one representation every front end (JSON Schema,
// GBNF, regex) compiles to, and the one the matcher runs.
//
// Shape: rules of alternatives; an alternative is a flat run of elements in `Grammar::elems`
// ended by a kEnd element. An element is a byte class (256-bit set: one byte of input), a
// reference to another rule, or a token terminal (one vocabulary id, e.g. Gemma 4's
// `<|tool_call>`, matched by id and never by bytes). A *position* is an index into `elems`;
// the matcher's pushdown stacks are chains of positions.
//
// Front ends build `Expr` trees (sequence, alternation, repetition, ...) and hand them to
// `GrammarBuilder`, which lowers nested alternations and repetitions into helper rules.
// `GrammarBuilder::finish` rejects grammars the matcher cannot run: undefined or
// unproductive rules (no finite string) and left recursion (a rule reaching itself without
// consuming input), and enforces the size limits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::grammar {

inline constexpr uint32_t kInf = UINT32_MAX;

// A set of bytes.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  ByteSet inverted() const { return ByteSet{{~w[0], ~w[1], ~w[2], ~w[3]}}; }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
  static ByteSet of(uint8_t b) {
    ByteSet s;
    s.add(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return s;
  }
};

// An expression tree, the front ends' output.
struct Expr {
  enum Kind : uint8_t { kSeq, kAlt, kBytes, kRule, kToken, kRepeat };
  Kind kind = kSeq;
  std::vector<Expr> kids;     // kSeq / kAlt: the parts; kRepeat: one
  ByteSet bytes;              // kBytes
  uint32_t id = 0;            // kRule: rule id; kToken: token id
  uint32_t min = 0, max = 0;  // kRepeat: {min, max}, max may be kInf
};

Expr empty();                  // matches ""
Expr lit(std::string_view s);  // the bytes of s
Expr bytes(const ByteSet& s);
Expr ref(uint32_t rule);
Expr token(int32_t id);
Expr seq(std::vector<Expr> parts);
Expr alt(std::vector<Expr> parts);
Expr repeat(Expr e, uint32_t min, uint32_t max);
inline Expr opt(Expr e) { return repeat(std::move(e), 0, 1); }
inline Expr star(Expr e) { return repeat(std::move(e), 0, kInf); }
inline Expr plus(Expr e) { return repeat(std::move(e), 1, kInf); }

struct Elem {
  enum Kind : uint8_t { kBytes, kRule, kToken, kEnd };
  Kind kind;
  uint32_t arg;  // kBytes: index into Grammar::sets; kRule: rule id; kToken: token id
};

struct Rule {
  std::string name;
  std::vector<uint32_t> alts;  // start positions
};

// Limits on what a request may make us build (over them: sluice::Error naming the limit).
struct Limits {
  size_t max_positions = 200000;  // grammar elements
  size_t max_rules = 50000;
  size_t max_stacks_per_state = 2048;  // parallel parses the matcher follows at once
  size_t max_states = 1 << 16;         // distinct states per matcher/compile (1 KiB of transitions each)
  double max_compile_ms = 5000;        // grammar compile, including the mask tables
  double eager_compile_ms = 20;        // mask tables built at compile; the rest on first use
  size_t max_schema_bytes = 1 << 20;   // JSON Schema text
  size_t max_repeat = 10000;           // bound of one counted repetition (maxLength, ...)
  // Alternatives one JSON value may start with (anyOf/oneOf branches, enum values, types),
  // multiplied along nested unions: each is a parallel parse the matcher follows and a mask
  // table analysed on first use, so a wider union is refused at compile time.
  size_t max_union_branches = 1024;
};

struct Grammar {
  std::vector<Elem> elems;
  std::vector<ByteSet> sets;
  std::vector<Rule> rules;
  uint32_t root = 0;
  // What a lenient front end dropped ("'dependentSchemas' at #/dependentSchemas/a"), for the caller
  // to report.
  std::vector<std::string> warnings;
  // Positions of the delimiters (',' / ']' and the whitespace before them) after an item of
  // a `uniqueItems` array, ascending: the matcher drops the parses at one of them (top frame
  // or the frame below it) when the item equals an earlier one (ItemTracker).
  std::vector<uint32_t> unique_close;
  // A `uniqueItems` array whose items are one of a finite set of values (enum/const items, too
  // many for the grammar to list every set of values written): the matcher drops the parse of
  // a value already written at its literal's first byte, and the ',' once no value is left.
  struct UniqueValues {
    std::vector<std::string> canonical;  // per value: canonical_json of it
    std::vector<uint32_t> first;         // per value: position of its literal's first byte
    uint32_t comma = 0;                  // position of the ',' between items
  };
  std::vector<UniqueValues> unique_values;
  // Milliseconds the front end took to build this grammar: the compile's eager mask analysis
  // (Limits::eager_compile_ms) counts them, so a schema that is slow to read defers more.
  double build_ms = 0;
  // GBNF-like text, for messages and tests.
  std::string to_string() const;
};

class GrammarBuilder {
 public:
  explicit GrammarBuilder(Limits limits = {}) : limits_(limits) {}
  // Declares a rule (defined later, so rules can refer to each other and to themselves).
  uint32_t declare(std::string name);
  void define(uint32_t rule, const Expr& e);
  uint32_t add(std::string name, const Expr& e) {
    const uint32_t r = declare(std::move(name));
    define(r, e);
    return r;
  }
  size_t n_rules() const { return g_.rules.size(); }
  const std::string& rule_name(uint32_t r) const { return g_.rules[r].name; }
  bool defined(uint32_t r) const { return defined_[r]; }
  // The rule's alternatives start with the delimiter that closes a unique array item
  // (Grammar::unique_close).
  void mark_unique_close(uint32_t rule) { unique_rules_.push_back(rule); }
  // A unique array over a finite set of values (Grammar::unique_values): per value its
  // canonical text and a rule of one alternative (its literal); the rule that is the ','.
  void mark_unique_values(std::vector<std::string> canonical, std::vector<uint32_t> value_rules, uint32_t comma_rule) {
    unique_value_rules_.push_back({std::move(canonical), std::move(value_rules), comma_rule});
  }
  // Validates (see the file comment) and returns the grammar rooted at `root`.
  Grammar finish(uint32_t root);

 private:
  void lower_alt(const Expr& e, std::vector<uint32_t>& alts, const std::string& base);
  void lower_seq(const Expr& e, std::vector<Elem>& out, const std::string& base);
  uint32_t helper(const std::string& base, const Expr& e);
  uint32_t repeat_rule(const Expr& e, const std::string& base);
  uint32_t set_index(const ByteSet& s);
  void check_size() const;

  Limits limits_;
  Grammar g_;
  std::vector<bool> defined_;
  std::vector<std::pair<ByteSet, uint32_t>> set_ids_;
  std::vector<uint32_t> unique_rules_;
  struct ValueRules {
    std::vector<std::string> canonical;
    std::vector<uint32_t> rules;
    uint32_t comma;
  };
  std::vector<ValueRules> unique_value_rules_;
};

// Validation used by finish(), exposed for tests: every rule productive, no left recursion.
void validate(const Grammar& g);

}  // namespace sluice::grammar
