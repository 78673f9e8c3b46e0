// sluice_gguf_corpus_tool DIR: writes the malformed GGUF corpus (tests/unit/gguf/gguf_corpus.cpp,
// the source of truth the gtests check) to DIR/<name>.gguf, plus the valid seeds as
// DIR/valid_<name>.gguf, e.g. to seed a fuzzer or to inspect a case with other readers.
#include <cstdio>
#include <exception>

#include "unit/gguf/gguf_corpus.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sluice_gguf_corpus_tool DIR\n");
    return 2;
  }
  try {
    const size_t n = sluice::gguf::write_corpus(argv[1]);
    std::printf("wrote %zu GGUF corpus files to %s\n", n, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice_gguf_corpus_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
