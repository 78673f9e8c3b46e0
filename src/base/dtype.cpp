#include "base/dtype.h"

namespace sluice {

namespace {
// Index = ggml type id. Block sizes from gguf.md §8 (printed from ggml's built library).
constexpr DTypeInfo kTable[kDTypeIdCount] = {
    {"f32", 1, 4, true},         {"f16", 1, 2, true},        {"q4_0", 32, 18, true},      {"q4_1", 32, 20, true},
    {"", 0, 0, false},           {"", 0, 0, false},          {"q5_0", 32, 22, true},      {"q5_1", 32, 24, true},
    {"q8_0", 32, 34, true},      {"q8_1", 32, 36, false},    {"q2_K", 256, 84, true},     {"q3_K", 256, 110, true},
    {"q4_K", 256, 144, true},    {"q5_K", 256, 176, true},   {"q6_K", 256, 210, true},    {"q8_K", 256, 292, false},
    {"iq2_xxs", 256, 66, false}, {"iq2_xs", 256, 74, false}, {"iq3_xxs", 256, 98, false}, {"iq1_s", 256, 50, false},
    {"iq4_nl", 32, 18, true},    {"iq3_s", 256, 110, false}, {"iq2_s", 256, 82, false},   {"iq4_xs", 256, 136, true},
    {"i8", 1, 1, false},         {"i16", 1, 2, false},       {"i32", 1, 4, false},        {"i64", 1, 8, false},
    {"f64", 1, 8, false},        {"iq1_m", 256, 56, false},  {"bf16", 1, 2, true},        {"", 0, 0, false},
    {"", 0, 0, false},           {"", 0, 0, false},          {"tq1_0", 256, 54, false},   {"tq2_0", 256, 66, false},
    {"", 0, 0, false},           {"", 0, 0, false},          {"", 0, 0, false},           {"mxfp4", 32, 17, false},
    {"nvfp4", 64, 36, false},    {"q1_0", 128, 18, false},   {"q2_0", 64, 18, false},
};
}  // namespace

const DTypeInfo* dtype_info(uint32_t id) {
  if (id >= kDTypeIdCount || kTable[id].block_elems == 0) return nullptr;
  return &kTable[id];
}

}  // namespace sluice
