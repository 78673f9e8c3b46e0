// Encode time of a Gemma 4 audio tower (models/gemma4/audio.cpp) on one clip, and its soft
// tokens for an outside comparison (python/audio_bench.py runs transformers on the same input).
//
//   audio_bench MMPROJ MEL.f32 FRAMES [--threads N] [--runs R] [--out SOFT.f32]
//
// MEL.f32: FRAMES × 128 little-endian floats (all frames valid). Prints the median and the best
// wall time of R encodes (the first, which repacks nothing but warms the caches, included).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"

namespace {

std::vector<float> read_floats(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v(n);
  if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float))))
    sluice::fail("%s: cannot read %zu floats", path.c_str(), n);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MMPROJ MEL.f32 FRAMES [--threads N] [--runs R] [--out SOFT.f32]\n", argv[0]);
    return 2;
  }
  int threads = 2, runs = 3;
  std::string out;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    if (a == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--out") out = argv[i + 1];
  }
  try {
    const int32_t frames = std::atoi(argv[3]);
    sluice::ThreadPool pool(std::max(1, threads));
    const auto file = sluice::gguf::GgufFile::open(argv[1]);
    sluice::models::LoadOptions opt;
    opt.pool = &pool;
    const auto enc = sluice::models::load_audio_encoder(*file, opt);
    const std::vector<float> mel = read_floats(argv[2], static_cast<size_t>(frames) * enc->n_mel());
    const int32_t n = enc->n_tokens(nullptr, frames);
    std::vector<float> soft(static_cast<size_t>(n) * enc->text_width());
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      enc->encode(mel.data(), nullptr, frames, soft.data());
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("audio_bench: %d frames (%.2f s) -> %d tokens, %d threads: median %.1f ms, best %.1f ms (%d runs)\n",
                frames, frames / 100.0, n, threads, ms[ms.size() / 2], ms[0], runs);
    if (!out.empty())
      std::ofstream(out, std::ios::binary)
          .write(reinterpret_cast<const char*>(soft.data()), static_cast<std::streamsize>(soft.size() * sizeof(float)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "audio_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
