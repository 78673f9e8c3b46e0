// Shared helpers of the golden tests: the committed reference data of tests/data/golden
// (python/make_golden.py) and a fresh-cache run of a token sequence.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "models/model.h"

namespace sluice::golden {

extern const std::string kDir;  // tests/data/golden/

// The GGUFs are not committed: `make fixtures` rebuilds them from the manifest's seeds and
// checks their sha256 (python/make_fixtures.py).
std::unique_ptr<gguf::GgufFile> open_fixture(const std::string& name);
nlohmann::json manifest();
std::vector<float> read_f32(const std::string& path);
std::vector<uint8_t> read_bytes(const std::string& path);

// A taps file (format SLTP v1, make_golden.py): name → values, row-major.
std::map<std::string, std::vector<float>> read_taps(const std::string& path);

// Runs ids through a fresh cache in steps of `chunk` (all logits wanted); returns [n × V]
// logits. `adjust` edits the spec before weights are bound; `tap` receives every TapView.
std::vector<float> run(const gguf::GgufFile& f, const std::vector<int32_t>& ids, size_t chunk,
                       std::function<void(models::ModelSpec&)> adjust = {}, models::Tap tap = {});

// Runs `ids` through a fresh cache in chunks of `chunk`, with `embd` (one entry per token,
// nullptr or a soft-token row of the model's width) as SeqSlice::embd and `blocks` as
// SeqSlice::embd_blocks; all logits [n × V].
std::vector<float> run_with_soft_tokens(models::Model& m, const std::vector<int32_t>& ids,
                                        const std::vector<const float*>& embd, size_t chunk, bool blocks = false);

}  // namespace sluice::golden
