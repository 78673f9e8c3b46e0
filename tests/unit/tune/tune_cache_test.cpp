// tune/tune_cache.h: a record survives the JSON round trip and the file round trip bit for
// bit; the write is atomic (no temporary left behind, an old file replaced whole, a failed
// write removes its temporary); a corrupt, truncated, out-of-range or other host's file is
// ignored with a warning; the cache directory follows XDG_CACHE_HOME, then HOME.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "tune/tune_cache.h"

namespace sluice::tune {
namespace {

namespace fs = std::filesystem;

TuneRecord sample() {
  TuneRecord r;
  r.key = HostKey{"Intel(R) Xeon(R) Processor", "avx512gfni", 2, "close", "gemma4 1406908416 B/token"};
  r.tuning.streams = 2;
  r.tuning.interleave = 4;
  r.tuning.act_ahead = 8;
  r.tuning.split_div = 8;
  r.tuning.weight_ahead[static_cast<int>(kernels::PackedFormat::kQ4_0)] = 1024;
  r.tuning.weight_ahead[static_cast<int>(kernels::PackedFormat::kQ6_K)] = 4096;
  r.curve.points = {{1, 1.0}, {2, 1.0625}, {4, 1.1875}, {8, 1.5}, {16, 2.25}, {32, 3.875}};
  r.curve_t1_ms = 61.25;
  r.default_step_ms = 62.5;
  r.tuned_step_ms = 60.125;
  r.calibration_s = 12.5;
  r.created = "2026-12-05T09:00:00Z";
  return r;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("sluice_tune_test_" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

TEST(TuneCache, JsonRoundTripIsExact) {
  const TuneRecord r = sample();
  std::string err;
  const auto back = from_json_text(to_json_text(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(*back, r);
}

// A calibration that could not finish is kept with its reason; a finished one has no field.
TEST(TuneCache, AFailedCalibrationKeepsItsReason) {
  TuneRecord r = sample();
  EXPECT_EQ(to_json_text(r).find("\"failed\""), std::string::npos);
  r.failed = "calibration ran out of its 15 s budget (a step takes 900 ms)";
  r.curve = spec::StepCostCurve{};
  std::string err;
  const auto back = from_json_text(to_json_text(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->failed, r.failed);
  EXPECT_TRUE(back->curve.points.empty());
  EXPECT_EQ(*back, r);
}

TEST(TuneCache, FileRoundTripAndAtomicReplace) {
  TempDir d;
  const std::string path = (d.path / "sub" / "tune-x.json").string();  // the directory is created
  TuneRecord r = sample();
  save_record(path, r);
  std::string warning;
  auto back = load_record(path, r.key, &warning);
  ASSERT_TRUE(back) << warning;
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(*back, r);
  r.tuning.streams = 3;
  save_record(path, r);  // replaces the old file whole
  back = load_record(path, r.key, &warning);
  ASSERT_TRUE(back) << warning;
  EXPECT_EQ(back->tuning.streams, 3);
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path / "sub")) {
    ++files;
    EXPECT_EQ(e.path().filename(), "tune-x.json") << "temporary file left behind";
  }
  EXPECT_EQ(files, 1);
}

TEST(TuneCache, FailedWriteLeavesNoTemporary) {
  TempDir d;
  // The target is a non-empty directory: the rename fails after the temporary was written.
  fs::create_directories(d.path / "tune-x.json" / "inside");
  EXPECT_THROW(save_record((d.path / "tune-x.json").string(), sample()), Error);
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);  // only the directory in the way
}

TEST(TuneCache, MissingFileIsAMissWithoutWarning) {
  TempDir d;
  std::string warning = "x";
  EXPECT_FALSE(load_record((d.path / "none.json").string(), sample().key, &warning));
  EXPECT_TRUE(warning.empty());
}

TEST(TuneCache, UnusableFilesAreIgnoredWithAWarning) {
  TempDir d;
  const fs::path p = d.path / "tune-x.json";
  const TuneRecord r = sample();
  const std::string good = to_json_text(r);
  std::string streams_zero = good;
  streams_zero.replace(streams_zero.find("\"streams\": 2"), 12, "\"streams\": 0");
  HostKey other = r.key;
  other.placement = "far";
  const struct {
    std::string text, expect;
  } cases[] = {
      {"", "parse"},
      {good.substr(0, good.size() / 2), "parse"},  // truncated
      {"{\"version\": 2}", "key"},
      {"{\"version\": 1}", "format version 1"},  // written before the Q6_K prefetch default
      {"[1, 2, 3]", ""},
      {streams_zero, "streams"},
  };
  for (const auto& c : cases) {
    write(p, c.text);
    std::string warning;
    EXPECT_FALSE(load_record(p.string(), r.key, &warning)) << c.text;
    EXPECT_NE(warning.find("ignoring the tuning cache"), std::string::npos) << warning;
    EXPECT_NE(warning.find(c.expect), std::string::npos) << warning;
  }
  write(p, good);
  std::string warning;
  EXPECT_FALSE(load_record(p.string(), other, &warning));
  EXPECT_NE(warning.find("another host"), std::string::npos) << warning;
}

TEST(TuneCache, DirectoryAndPathFollowTheEnvironment) {
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old_xdg ? old_xdg : "";
  const std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(cache_dir(), "/tmp/xdg/sluice");
  const HostKey k = sample().key;
  HostKey far = k;
  far.placement = "far";
  EXPECT_EQ(cache_path(k).rfind("/tmp/xdg/sluice/tune-", 0), 0u) << cache_path(k);
  EXPECT_NE(cache_path(k), cache_path(far));
  setenv("XDG_CACHE_HOME", "", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(cache_dir(), "/home/someone/.cache/sluice");
  setenv("HOME", saved_home.c_str(), 1);
  if (old_xdg) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}

// The cached curve is the policy's own type: what `sluice tune` measured is what it prices.
TEST(TuneCache, TheCachedCurveIsThePolicys) {
  const spec::StepCostCurve c = sample().curve;
  EXPECT_NO_THROW(c.validate());
  EXPECT_DOUBLE_EQ(c.cost(1), 1.0);
  EXPECT_DOUBLE_EQ(c.cost(3), (1.0625 + 1.1875) / 2);
  EXPECT_DOUBLE_EQ(c.cost(64), 3.875 + (3.875 - 2.25) * 2);  // the last segment goes on
}

// A measured dip (noise) is levelled when read: the policy needs a non-decreasing curve.
TEST(TuneCache, ADipInTheFileIsLevelled) {
  TuneRecord r = sample();
  r.curve.points[2].second = 1.0;  // T = 4 below T = 2
  std::string err;
  const auto back = from_json_text(to_json_text(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_DOUBLE_EQ(back->curve.points[2].second, 1.0625);
  EXPECT_NO_THROW(back->curve.validate());
}

}  // namespace
}  // namespace sluice::tune
