// An error the server answers with: an HTTP status and OpenAI's error body
// {"error": {"message", "type", "param", "code"}}. Request parsing, the
// session store and the scheduler throw it; the routes turn it into the
// response, so that no bad request ever reaches the engine.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ssm::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)),
        type_(std::move(type)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, type_, code_;
};

// OpenAI's error document for a status and message.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "",
                          const std::string& type = "", const std::string& code = "");
inline nlohmann::json error_body(const ApiError& e) {
  return error_body(e.status(), e.what(), e.param(), e.type(), e.code());
}

}  // namespace ssm::serve
