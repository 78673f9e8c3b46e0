#include "tune/tune_cache.h"

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"

namespace sluice::tune {

namespace {

using nlohmann::json;

// 2: the Q6_K prefetch default became 8 KiB, so a record that kept the old defaults (0) is stale.
constexpr int kFormatVersion = 2;
constexpr kernels::PackedFormat kPrefetchFormats[] = {kernels::PackedFormat::kQ4_0, kernels::PackedFormat::kQ5_0,
                                                      kernels::PackedFormat::kQ8_0, kernels::PackedFormat::kQ6_K};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

json key_json(const HostKey& k) {
  return {{"cpu_model", k.cpu_model},
          {"isa", k.isa},
          {"threads", k.threads},
          {"placement", k.placement},
          {"model", k.model}};
}

json tuning_json(const kernels::Tuning& t) {
  json wa = json::object();
  for (kernels::PackedFormat f : kPrefetchFormats)
    wa[kernels::packed_format_name(f)] = t.weight_ahead[static_cast<int>(f)];
  return {{"weight_ahead", wa},
          {"act_ahead", t.act_ahead},
          {"streams", t.streams},
          {"interleave", t.interleave},
          {"split_div", t.split_div}};
}

kernels::Tuning tuning_from(const json& j) {
  kernels::Tuning t;
  for (kernels::PackedFormat f : kPrefetchFormats)
    t.weight_ahead[static_cast<int>(f)] = j.at("weight_ahead").at(kernels::packed_format_name(f)).get<int32_t>();
  t.act_ahead = j.at("act_ahead").get<int32_t>();
  t.streams = j.at("streams").get<int32_t>();
  t.interleave = j.at("interleave").get<int32_t>();
  t.split_div = j.at("split_div").get<int32_t>();
  return t;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string HostKey::text() const {
  return strfmt("cpu=%s|isa=%s|threads=%d|placement=%s|model=%s", cpu_model.c_str(), isa.c_str(), threads,
                placement.c_str(), model.c_str());
}

std::string cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/sluice";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/sluice";
  return {};
}

std::string cache_path(const HostKey& key) {
  return cache_dir() + strfmt("/tune-%016llx.json", static_cast<unsigned long long>(fnv1a(key.text())));
}

std::string to_json_text(const TuneRecord& r) {
  json curve = json::array();
  for (const auto& [tokens, cost] : r.curve.points) curve.push_back({{"tokens", tokens}, {"relative", cost}});
  json j = {{"version", kFormatVersion},
            {"key", key_json(r.key)},
            {"tuning", tuning_json(r.tuning)},
            {"step_cost", {{"t1_ms", r.curve_t1_ms}, {"curve", curve}}},
            {"default_step_ms", r.default_step_ms},
            {"tuned_step_ms", r.tuned_step_ms},
            {"calibration_s", r.calibration_s},
            {"created", r.created.empty() ? utc_now() : r.created}};
  if (!r.failed.empty()) j["failed"] = r.failed;
  return j.dump(1) + "\n";
}

std::optional<TuneRecord> from_json_text(const std::string& text, std::string* error) {
  try {
    const json j = json::parse(text);
    if (j.at("version").get<int>() != kFormatVersion) {
      *error = strfmt("format version %d, expected %d", j.at("version").get<int>(), kFormatVersion);
      return std::nullopt;
    }
    TuneRecord r;
    const json& k = j.at("key");
    r.key = HostKey{k.at("cpu_model").get<std::string>(), k.at("isa").get<std::string>(), k.at("threads").get<int>(),
                    k.at("placement").get<std::string>(), k.at("model").get<std::string>()};
    r.tuning = tuning_from(j.at("tuning"));
    const std::string bad = kernels::tuning_error(r.tuning);
    if (!bad.empty()) {
      *error = "tuning: " + bad;
      return std::nullopt;
    }
    const json& curve = j.at("step_cost").at("curve");
    if (!curve.is_array() || (!curve.empty() && curve.size() != kCurveTokens.size())) {
      *error = strfmt("step_cost.curve must have %zu entries (or none: not measured)", kCurveTokens.size());
      return std::nullopt;
    }
    // Files written before the curve became points say "not measured" with all-zero costs.
    const bool zeros = !curve.empty() && curve[0].at("relative").get<double>() == 0;
    for (size_t i = 0; i < curve.size() && !zeros; ++i) {
      if (curve[i].at("tokens").get<int>() != kCurveTokens[i]) {
        *error = strfmt("step_cost.curve[%zu] must be for %d tokens", i, kCurveTokens[i]);
        return std::nullopt;
      }
      double cost = curve[i].at("relative").get<double>();
      if (!(cost > 0 && cost < 1e6)) {
        *error = strfmt("step_cost.curve[%zu].relative out of range", i);
        return std::nullopt;
      }
      // Non-decreasing, as the policy needs (older files kept the measured dips).
      if (i > 0) cost = std::max(cost, r.curve.points.back().second);
      r.curve.points.emplace_back(kCurveTokens[i], cost);
    }
    r.curve_t1_ms = j.at("step_cost").at("t1_ms").get<double>();
    r.default_step_ms = j.at("default_step_ms").get<double>();
    r.tuned_step_ms = j.at("tuned_step_ms").get<double>();
    r.calibration_s = j.at("calibration_s").get<double>();
    r.created = j.at("created").get<std::string>();
    r.failed = j.value("failed", std::string());
    return r;
  } catch (const json::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

void save_record(const std::string& path, const TuneRecord& r) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = strfmt("%s.tmp.%d", path.c_str(), static_cast<int>(getpid()));
  const std::string text = to_json_text(r);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write the tuning cache %s: %s", tmp.c_str(), std::strerror(errno));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::fsync(fd) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail("cannot write the tuning cache %s: %s", path.c_str(), why.c_str());
  }
}

std::optional<TuneRecord> load_record(const std::string& path, const HostKey& key, std::string* warning) {
  warning->clear();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (std::filesystem::exists(path)) *warning = "cannot read " + path;
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string why;
  std::optional<TuneRecord> r = from_json_text(ss.str(), &why);
  if (!r) {
    *warning = strfmt("ignoring the tuning cache %s: %s", path.c_str(), why.c_str());
    return std::nullopt;
  }
  if (!(r->key == key)) {
    *warning = strfmt("ignoring the tuning cache %s: it is for another host (%s)", path.c_str(), r->key.text().c_str());
    return std::nullopt;
  }
  return r;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, implementer, part;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (name == "model name" && !value.empty()) return value;
    if (name == "CPU implementer" && implementer.empty()) implementer = value;
    if (name == "CPU part" && part.empty()) part = value;
  }
  if (!implementer.empty()) return "implementer " + implementer + " part " + part;
  return "unknown";
}

}  // namespace sluice::tune
