// base/json_read: the one reader for client JSON. Values are compared with nlohmann's own
// parser (an implementation we did not write); limits and depth are checked on texts far past
// what a recursive reader or converter survives.
#include <gtest/gtest.h>
#include <chrono>
#include <functional>
#include <iterator>
#include <random>
#include <string>

#include "base/json_read.h"
#include "unit/small_stack.h"

namespace sluice {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string nested(size_t depth) { return "{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}"; }

// A random JSON text with duplicate keys, nesting, every scalar kind.
std::string random_json(std::mt19937& rng, int depth) {
  const int kind = depth > 4 ? rng() % 5 : rng() % 7;
  switch (kind) {
    case 0: return "null";
    case 1: return rng() % 2 ? "true" : "false";
    case 2: return std::to_string(static_cast<int64_t>(rng()) - (1ll << 31));
    case 3: return std::to_string(rng() % 1000) + "." + std::to_string(rng() % 1000) + "e" + std::to_string(rng() % 40);
    case 4: return "\"s" + std::to_string(rng() % 5) + "\\u00e9\"";
    case 5: {
      std::string s = "[";
      for (int i = 0, n = rng() % 4; i < n; ++i) s += (i ? "," : "") + random_json(rng, depth + 1);
      return s + "]";
    }
    default: {
      std::string s = "{";
      for (int i = 0, n = rng() % 40; i < n; ++i)  // past the size an object gets an index at
        s += (i ? ",\"k" : "\"k") + std::to_string(rng() % 25) + "\":" + random_json(rng, depth + 1);
      return s + "}";
    }
  }
}

TEST(JsonRead, SameValuesAsNlohmannsParserInBothKeyOrders) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_json(rng, 0);
    const ordered_json o = read_json<ordered_json>(text, {}, "t");
    const json j = read_json<json>(text, {}, "t");
    ASSERT_EQ(o.dump(), ordered_json::parse(text).dump()) << text;  // document order, duplicates as nlohmann
    ASSERT_EQ(j.dump(), json::parse(text).dump()) << text;
    ASSERT_EQ(convert_json<json>(o).dump(), j.dump()) << text;
    ASSERT_EQ(convert_json<ordered_json>(j).dump(), j.dump()) << text;  // sorted stays sorted
  }
}

TEST(JsonRead, DuplicateKeyKeepsFirstPlaceAndLastValue) {
  std::string text = "{";
  for (int i = 0; i < 40; ++i) text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  text += "\"k3\":\"again\",\"b\":1,\"k39\":null}";
  const ordered_json o = read_json<ordered_json>(text, {}, "t");
  EXPECT_EQ(o.dump(), ordered_json::parse(text).dump());
  EXPECT_EQ(o.size(), 41u);
  EXPECT_EQ(std::next(o.begin(), 3).value(), "again");
}

TEST(JsonRead, DepthLimitCountsOpenContainers) {
  JsonLimits l;
  l.max_depth = 4;
  EXPECT_NO_THROW(read_json<json>("[[[[1]]]]", l, "t"));
  try {
    read_json<json>("[[[[[1]]]]]", l, "the field");
    FAIL();
  } catch (const JsonReadError& e) {
    EXPECT_TRUE(e.limit());
    EXPECT_STREQ(e.what(), "the field is nested deeper than 4 levels of arrays and objects");
  }
}

TEST(JsonRead, TenMillionLevelsAreRefusedAtTheLimitWithoutBuildingThem) {
  JsonLimits l;
  l.max_bytes = size_t{32} << 20;
  const std::string text = nested(10'000'000);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(read_json<ordered_json>(text, l, "t"), JsonReadError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));  // stops at level 128
}

TEST(JsonRead, SizeAndValueLimits) {
  JsonLimits l;
  l.max_bytes = 10;
  EXPECT_THROW(read_json<json>("[1,2,3,4,5,6]", l, "t"), JsonReadError);
  l = JsonLimits{};
  l.max_values = 5;
  EXPECT_NO_THROW(read_json<json>("[1,2,3,4]", l, "t"));  // the array and four numbers
  try {
    read_json<json>("[1,2,3,4,5]", l, "t");
    FAIL();
  } catch (const JsonReadError& e) {
    EXPECT_TRUE(e.limit());
  }
}

TEST(JsonRead, SyntaxErrorsCarryTheParsersMessage) {
  try {
    read_json<json>("{\"a\":1} x", {}, "the request body");
    FAIL();
  } catch (const JsonReadError& e) {
    EXPECT_FALSE(e.limit());
    EXPECT_EQ(std::string(e.what()).rfind("the request body is not valid JSON: [json.exception.parse_error.101]", 0),
              0u)
        << e.what();
  }
}

TEST(JsonRead, ManyKeysTakeLinearTime) {
  // ordered_map's own insertion searches the keys so far: 80k keys would take seconds.
  auto keys = [](int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
    return s + "}";
  };
  const std::string text = keys(200'000);
  const auto t0 = std::chrono::steady_clock::now();
  const ordered_json o = read_json<ordered_json>(text, {}, "t");
  EXPECT_EQ(o.size(), 200'000u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));  // quadratic: minutes
}

// The bug this reader replaces: nlohmann's conversion between json and ordered_json recurses
// once per level. 100,000 levels overflow a small stack (a worker's 8 MiB at ~1M levels);
// convert_json does not recurse.
TEST(JsonReadDeathTest, NlohmannsConversionOverflowsTheStackWhereConvertJsonDoesNot) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const json deep = json::parse(nested(100'000));  // its parser and destructor do not recurse
        test_util::on_small_stack(256 << 10, [&] { ordered_json o(deep); });
      },
      "");
  const json deep = json::parse(nested(100'000));
  size_t depth = 0;
  test_util::on_small_stack(256 << 10, [&] {
    const ordered_json o = convert_json<ordered_json>(deep);
    const json back = convert_json<json>(o);
    for (const json* p = &back; p->is_structured() && !p->empty(); ++depth)  // == recurses: walk instead
      p = p->is_object() ? &p->begin().value() : &p->front();
  });
  EXPECT_EQ(depth, 100'000u);
}

}  // namespace
}  // namespace sluice
