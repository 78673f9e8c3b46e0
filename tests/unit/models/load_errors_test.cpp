// A model file that misses a tensor, or has one with a wrong shape, fails to load with a
// message naming that tensor.
#include <gtest/gtest.h>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "threading/thread_pool.h"
#include "tiny_model.h"

namespace sluice {
namespace {

std::string load_error(const test::TinyConfig& c) {
  const auto bytes = test::make_tiny_gguf(c);
  auto f = gguf::GgufFile::parse(bytes, "bad.gguf");
  ThreadPool pool(1);
  models::LoadOptions lo;
  lo.pool = &pool;
  try {
    models::load_model(*f, lo);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LoadErrors, MissingTensorsAreNamed) {
  for (const char* name :
       {"blk.3.attn_q.weight", "blk.0.attn_k.weight", "output_norm.weight", "per_layer_model_proj.weight",
        "blk.9.inp_gate.weight", "blk.2.ffn_down.weight", "blk.4.attn_k_norm.weight", "token_embd.weight"}) {
    test::TinyConfig c;
    c.omit = {name};
    const std::string err = load_error(c);
    EXPECT_NE(err.find(std::string("'") + name + "'"), std::string::npos) << name << ": " << err;
    EXPECT_NE(err.find("bad.gguf"), std::string::npos) << err;
  }
}

TEST(LoadErrors, WrongShapesAreNamed) {
  for (const char* name : {"blk.1.attn_output.weight", "blk.8.ffn_gate.weight", "blk.0.attn_norm.weight",
                           "per_layer_token_embd.weight", "blk.5.proj.weight"}) {
    test::TinyConfig c;
    c.wrong_shape = name;
    const std::string err = load_error(c);
    EXPECT_NE(err.find(std::string("'") + name + "' has shape"), std::string::npos) << name << ": " << err;
  }
}

TEST(LoadErrors, SharedLayersMayOmitOrKeepKv) {
  test::TinyConfig c;  // our converter omits K/V of shared layers: loads
  EXPECT_EQ(load_error(c), "");
  test::TinyConfig g3;  // Gemma 3 has no shared layers: every layer needs K/V
  g3.arch = "gemma3";
  g3.omit = {"blk.7.attn_v.weight"};
  EXPECT_NE(load_error(g3).find("'blk.7.attn_v.weight'"), std::string::npos);
}

TEST(LoadErrors, MixtureOfExpertsLoadsFusedOrSplit) {
  test::TinyConfig c = test::tiny_moe_config();
  EXPECT_EQ(load_error(c), "");
  c.split_gate_up = true;
  EXPECT_EQ(load_error(c), "");
}

TEST(LoadErrors, ExpertUsedCountOutOfRangeIsNamed) {
  for (int used : {0, 9}) {
    test::TinyConfig c = test::tiny_moe_config();
    c.n_expert_used = used;
    const std::string err = load_error(c);
    EXPECT_NE(err.find("key 'gemma4.expert_used_count' = " + std::to_string(used) +
                       " must be between 1 and 'gemma4.expert_count' = 8"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("bad.gguf"), std::string::npos) << err;
  }
}

TEST(LoadErrors, ExpertTensorsWithTheWrongExpertCountAreNamed) {
  for (const char* name : {"blk.2.ffn_gate_up_exps.weight", "blk.0.ffn_down_exps.weight"}) {
    test::TinyConfig c = test::tiny_moe_config();
    c.wrong_experts = name;
    const std::string err = load_error(c);
    EXPECT_NE(err.find(std::string("'") + name + "' has shape"), std::string::npos) << err;
    EXPECT_NE(err.find("third dimension 7 is not expert_count = 8"), std::string::npos) << err;
  }
  test::TinyConfig c = test::tiny_moe_config();
  c.split_gate_up = true;
  c.wrong_experts = "blk.1.ffn_up_exps.weight";
  EXPECT_NE(load_error(c).find("'blk.1.ffn_up_exps.weight' has shape [64, 32, 7]: its third dimension 7"),
            std::string::npos)
      << load_error(c);
}

TEST(LoadErrors, MissingExpertScalesAndTensorsAreNamed) {
  for (const char* name : {"blk.3.ffn_gate_inp.scale", "blk.0.ffn_down_exps.scale", "blk.1.ffn_gate_inp.weight",
                           "blk.4.pre_ffw_norm_2.weight", "blk.2.ffn_down_exps.weight"}) {
    test::TinyConfig c = test::tiny_moe_config();
    c.omit = {name};
    const std::string err = load_error(c);
    EXPECT_NE(err.find(std::string("missing tensor '") + name + "'"), std::string::npos) << name << ": " << err;
  }
  test::TinyConfig c = test::tiny_moe_config();
  c.omit = {"blk.1.ffn_gate_up_exps.weight"};
  EXPECT_NE(load_error(c).find("missing tensor 'blk.1.ffn_gate_up_exps.weight' (or the split"), std::string::npos)
      << load_error(c);
}

TEST(LoadErrors, GateUpWidthNotTwiceTheExpertWidthIsNamed) {
  test::TinyConfig c = test::tiny_moe_config();
  c.wrong_rows = "blk.2.ffn_gate_up_exps.weight";
  std::string err = load_error(c);
  EXPECT_NE(err.find("'blk.2.ffn_gate_up_exps.weight' has shape [64, 96, 8]: 96 rows per expert, expected 64 "
                     "(2 x expert_feed_forward_length"),
            std::string::npos)
      << err;
  c = test::tiny_moe_config();
  c.split_gate_up = true;
  c.wrong_rows = "blk.0.ffn_gate_exps.weight";
  err = load_error(c);
  EXPECT_NE(err.find("'blk.0.ffn_gate_exps.weight' has shape [64, 64, 8]: 64 rows per expert, expected 32 "
                     "(expert_feed_forward_length)"),
            std::string::npos)
      << err;
}

TEST(LoadErrors, OnlyGlobalLayersMayLackAV) {
  test::TinyConfig c;  // 31B-style: global layers take V from their K projection
  c.k_eq_v = true;
  EXPECT_EQ(load_error(c), "");
  test::TinyConfig s;  // a sliding layer without attn_v is a broken file
  s.omit = {"blk.1.attn_v.weight"};
  EXPECT_NE(load_error(s).find("'blk.1.attn_v.weight'"), std::string::npos);
}

}  // namespace
}  // namespace sluice
