// An error answered in OpenAI's JSON shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with the HTTP status that goes with it. Request handlers throw it; the HTTP layer turns it
// into the response, so a bad request never reaches the engine.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace sluice::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        message_(std::move(message)),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  // The whole message: what() stops at the first NUL, and request text quoted in a message
  // (a role, a model name) may hold one.
  const std::string& message() const { return message_; }
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string message_, type_, param_, code_;
};

// 400 for a parameter: "param: message".
[[noreturn]] void bad_param(const std::string& param, const std::string& message);
// 400 for a part of a message's content (an image or an audio part): "where: message", param
// "messages"; `where` names the part, e.g. "messages[0].content[1]".
[[noreturn]] void bad_part(const std::string& where, const std::string& message);

// JSON text as we send it: invalid UTF-8 (a token piece can end inside a character) is
// replaced by U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);

}  // namespace sluice::server
