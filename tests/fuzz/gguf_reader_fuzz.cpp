// libFuzzer target for the GGUF reader (src/gguf/reader.cpp).
//
// Each input is parsed with GgufFile::parse(span, "fuzz"), once strictly and once with
// ReadOptions::allow_unsupported_types. sluice::Error is the only accepted failure: any
// other exception, sanitizer report or abort is a finding. After a successful parse every
// KV is read through the typed accessors and every tensor's first and last data byte is
// read (so ASan checks every view the reader hands out), and the result is re-checked by
// check_invariants() (gguf_corpus.cpp); an inconsistent accepted file aborts.
//
// Seeds: `gguf_reader_fuzz --write-seeds=DIR` writes the malformed corpus and the valid seed
// files of tests/unit/gguf/gguf_corpus.cpp to DIR/*.gguf and exits (tests/tools'
// sluice_gguf_corpus_tool DIR does the same without a fuzz build). tests/fuzz/run.sh BUILD_DIR SECONDS does both steps:
//   tests/fuzz/run.sh build-fuzz 60
// libFuzzer ignores flags that start with "--", so the option never reaches it.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"
#include "gguf/reader.h"
#include "unit/gguf/gguf_corpus.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  constexpr std::string_view kFlag = "--write-seeds=";
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = (*argv)[i];
    if (arg.substr(0, kFlag.size()) != kFlag) continue;
    const std::string dir(arg.substr(kFlag.size()));
    try {
      const size_t n = sluice::gguf::write_corpus(dir);
      std::printf("wrote %zu GGUF seed files to %s\n", n, dir.c_str());
      std::exit(0);
    } catch (const sluice::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::exit(1);
    }
  }
  return 0;
}

static void check(std::span<const uint8_t> bytes, sluice::gguf::ReadOptions opt) {
  using namespace sluice::gguf;
  std::unique_ptr<GgufFile> f;
  try {
    f = GgufFile::parse(bytes, "fuzz", opt);
  } catch (const sluice::Error&) {
    return;  // rejected: fine
  }
  volatile uint64_t sink = touch_everything(*f);
  (void)sink;
  const std::string bad = check_invariants(*f, bytes);
  if (!bad.empty()) {
    std::fprintf(stderr, "accepted file violates an invariant: %s\n", bad.c_str());
    std::abort();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  check(bytes, {});
  check(bytes, sluice::gguf::ReadOptions{.allow_unsupported_types = true});
  return 0;
}
