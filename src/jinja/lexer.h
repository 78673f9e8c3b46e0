// Template source -> tokens, with jinja2's whitespace rules for chat templates
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::jinja {

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  std::string text;  // Data text, Name, String value (escapes resolved), Op spelling
  int64_t ival = 0;
  double fval = 0;
  int line = 1, col = 1;
};

// Throws sluice::Error ("chat template syntax error at line L, column C: ...").
std::vector<Token> tokenize(std::string_view source);

[[noreturn]] void syntax_error(int line, int col, const std::string& msg);

}  // namespace sluice::jinja
