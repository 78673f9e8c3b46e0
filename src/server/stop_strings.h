// Stop strings over streamed text. Text is held back while its tail could still become a
// stop string (a stop may span any number of tokens); once a stop string appears, the text
// before it is released and the rest — the stop string included — is never emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::server {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string emit;  // text that is safe to show now
    bool hit = false;  // a stop string completed; nothing after `emit` may be shown
  };
  Result push(std::string_view text);
  std::string flush();  // end of generation: the held-back tail (no stop string in it)
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool hit_ = false;
};

}  // namespace sluice::server
