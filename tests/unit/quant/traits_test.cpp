// The traits table and the checked wrappers: which types are served, and the errors for
// wrong element counts and unsupported types.
#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "quant/quant.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::quant {
namespace {

TEST(Traits, TableMatchesDTypeSupport) {
  for (uint32_t id = 0; id < kDTypeIdCount; ++id) {
    const DTypeInfo* info = dtype_info(id);
    const QuantTraits* tr = traits(static_cast<DType>(id));
    const bool supported = info != nullptr && info->supported;
    EXPECT_EQ(tr != nullptr, supported) << "type id " << id;
    if (tr != nullptr) {
      EXPECT_EQ(static_cast<uint32_t>(tr->type), id);
      EXPECT_NE(tr->to_f32_ref, nullptr);
    }
  }
  EXPECT_EQ(testing::supported_types().size(), 15u);
  for (DType t : testing::supported_types()) EXPECT_NE(traits(t), nullptr) << dtype_name(t);
  EXPECT_EQ(traits(static_cast<DType>(4)), nullptr);     // removed Q4_2
  EXPECT_EQ(traits(static_cast<DType>(1000)), nullptr);  // beyond the table
}

TEST(Traits, QuantizersPresent) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                  DType::Q6_K}) {
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::IQ4_NL, DType::IQ4_XS, DType::Q8_K,
                  DType::Q8_1, DType::IQ2_XXS}) {
    EXPECT_FALSE(can_quantize(t)) << dtype_name(t);
  }
}

TEST(Traits, WrongElementCountThrows) {
  std::vector<float> f(1024, 0.0f);
  std::vector<uint8_t> raw(4096, 0);
  EXPECT_THROW(dequantize_ref(DType::Q4_0, raw.data(), f.data(), 33), Error);
  EXPECT_THROW(dequantize_ref(DType::Q6_K, raw.data(), f.data(), 128), Error);
  EXPECT_THROW(dequantize_ref(DType::Q8_0, raw.data(), f.data(), -32), Error);
  EXPECT_THROW(quantize_ref(DType::Q8_0, f.data(), raw.data(), 48), Error);
  EXPECT_THROW(quantize_ref(DType::Q6_K, f.data(), raw.data(), 255), Error);
  EXPECT_THROW(quantize_row_q8_k_ref(f.data(), raw.data(), 100), Error);
  EXPECT_THROW(dequantize_row_q8_k_ref(raw.data(), f.data(), 300), Error);
  try {
    dequantize_ref(DType::Q4_K, raw.data(), f.data(), 300);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
  // Zero elements and exact multiples are fine; scalar types take any count.
  EXPECT_NO_THROW(dequantize_ref(DType::Q4_0, raw.data(), f.data(), 0));
  EXPECT_NO_THROW(dequantize_ref(DType::Q4_0, raw.data(), f.data(), 64));
  EXPECT_NO_THROW(dequantize_ref(DType::F16, raw.data(), f.data(), 7));
  EXPECT_NO_THROW(quantize_ref(DType::BF16, f.data(), raw.data(), 13));
}

TEST(Traits, UnsupportedTypeThrows) {
  std::vector<float> f(256, 0.0f);
  std::vector<uint8_t> raw(1024, 0);
  EXPECT_THROW(dequantize_ref(DType::IQ2_XXS, raw.data(), f.data(), 256), Error);
  EXPECT_THROW(dequantize_ref(DType::Q8_K, raw.data(), f.data(), 256), Error);  // activation-only
  EXPECT_THROW(dequantize_ref(DType::I8, raw.data(), f.data(), 4), Error);
  EXPECT_THROW(dequantize_ref(static_cast<DType>(5), raw.data(), f.data(), 32), Error);  // removed id
  EXPECT_THROW(quantize_ref(DType::MXFP4, f.data(), raw.data(), 32), Error);
  EXPECT_THROW(quantize_ref(DType::Q4_K, f.data(), raw.data(), 256), Error);  // decodable, no quantizer
  try {
    dequantize_ref(DType::IQ2_XXS, raw.data(), f.data(), 256);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::quant
