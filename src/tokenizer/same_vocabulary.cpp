#include "tokenizer/same_vocabulary.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"

namespace sluice::tok {

int64_t first_vocab_difference(std::span<const std::string_view> a, std::span<const std::string_view> b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

namespace {
std::vector<std::string_view> token_texts(const gguf::GgufFile& f) {
  const gguf::KeyValue& kv = f.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  std::vector<std::string_view> out(kv.count);
  for (uint64_t i = 0; i < kv.count; ++i) out[i] = kv.string_at(i);
  return out;
}
}  // namespace

void check_same_vocabulary(const gguf::GgufFile& target, const gguf::GgufFile& draft) {
  const std::vector<std::string_view> a = token_texts(target), b = token_texts(draft);
  const int64_t id = first_vocab_difference(a, b);
  if (id < 0) return;
  auto text = [](const std::vector<std::string_view>& v, int64_t i) {
    if (i >= static_cast<int64_t>(v.size())) return std::string("(none)");
    const std::string_view t = v[static_cast<size_t>(i)];
    return strfmt("'%.*s'", static_cast<int>(t.size()), t.data());
  };
  fail(
      "draft model %s does not share the target's vocabulary (target %zu tokens, draft %zu): first difference at "
      "id %lld, target %s, draft %s",
      draft.name().c_str(), a.size(), b.size(), static_cast<long long>(id), text(a, id).c_str(), text(b, id).c_str());
}

}  // namespace sluice::tok
