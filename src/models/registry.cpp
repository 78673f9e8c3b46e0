// The only place that knows every architecture.
#include <string>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/gemma/gemma_model.h"

namespace sluice::models {

namespace {
struct Factory {
  const char* arch;
  std::unique_ptr<Model> (*load)(const gguf::GgufFile&, const LoadOptions&);
};
constexpr Factory kFactories[] = {
    {"gemma3", &load_gemma3},
    {"gemma4", &load_gemma4},
};
}  // namespace

std::unique_ptr<Model> load_model(const gguf::GgufFile& f, const LoadOptions& opt) {
  if (!opt.pool) fail("load_model: no thread pool");
  const std::string arch(f.get_string("general.architecture"));
  for (const Factory& fac : kFactories)
    if (arch == fac.arch) return fac.load(f, opt);
  fail("%s: architecture '%s' is not supported (sluice runs gemma3 and gemma4)", f.name().c_str(), arch.c_str());
}

}  // namespace sluice::models
