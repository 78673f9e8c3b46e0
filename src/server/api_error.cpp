#include "server/api_error.h"

namespace sluice::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message_}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return {{"error", e}};
}

void bad_param(const std::string& param, const std::string& message) {
  throw ApiError(400, param + ": " + message, "invalid_request_error", param);
}

void bad_part(const std::string& where, const std::string& message) {
  throw ApiError(400, where + ": " + message, "invalid_request_error", "messages");
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sluice::server
