#include "ssm/serve/request.h"

#include <cmath>
#include <set>

#include "ssm/core/error.h"
#include "ssm/serve/api_error.h"

namespace ssm::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, cat("'", param, "': ", message), param);
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

int64_t get_int(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  // 16.0 is an integer in JSON's eyes; 16.5 is not.
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 9e15)
    return get_int(json(static_cast<int64_t>(v.get<double>())), param, lo, hi);
  if (!v.is_number_integer()) bad(param, cat("expected an integer, got ", type_name(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(param, cat(v.get<uint64_t>(), " is out of range [", lo, ", ", hi, "]"));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(param, cat(x, " is out of range [", lo, ", ", hi, "]"));
  return x;
}

float get_float(const json& v, const std::string& param, double lo, double hi, bool lo_excluded = false) {
  if (!v.is_number()) bad(param, cat("expected a number, got ", type_name(v)));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi) || (lo_excluded && x == lo))
    bad(param, cat(x, " is out of range ", lo_excluded ? "(" : "[", lo, ", ", hi, "]"));
  return static_cast<float>(x);
}

std::vector<int64_t> get_ids(const json& v, const std::string& param, const RequestLimits& limits) {
  std::vector<int64_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer()) bad(param, cat("element ", i, " is ", type_name(v[i]), ", not a token id"));
    if (v[i].is_number_unsigned() && v[i].get<uint64_t>() >= static_cast<uint64_t>(limits.vocab_size))
      bad(param, cat("token id ", v[i].get<uint64_t>(), " is outside the vocabulary [0, ", limits.vocab_size, ")"));
    const int64_t id = v[i].get<int64_t>();
    if (id < 0 || id >= limits.vocab_size)
      bad(param, cat("token id ", id, " is outside the vocabulary [0, ", limits.vocab_size, ")"));
    ids.push_back(id);
  }
  return ids;
}

void parse_prompt(const json& v, CompletionRequest& r, const RequestLimits& limits) {
  if (v.is_string()) {
    r.prompt_text = v.get<std::string>();
  } else if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    r.prompt_text = v[0].get<std::string>();  // a batch of one prompt
  } else if (v.is_array() && v.size() == 1 && v[0].is_array()) {
    r.prompt_ids = get_ids(v[0], "prompt", limits);
  } else if (v.is_array() && !v.empty() && (v[0].is_string() || v[0].is_array())) {
    bad("prompt", "several prompts in one request are not supported; send one request per prompt");
  } else if (v.is_array()) {
    r.prompt_ids = get_ids(v, "prompt", limits);
  } else {
    bad("prompt", cat("expected a string or an array of token ids, got ", type_name(v)));
  }
  if (static_cast<int64_t>(r.prompt_ids.size()) > limits.max_prompt_tokens)
    bad("prompt", cat(r.prompt_ids.size(), " tokens, more than the limit of ", limits.max_prompt_tokens));
}

void parse_messages(const json& v, CompletionRequest& r) {
  if (!v.is_array()) bad("messages", cat("expected an array of messages, got ", type_name(v)));
  if (v.empty()) bad("messages", "the array is empty");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = cat("messages[", i, "]");
    if (!v[i].is_object()) bad(p, cat("expected an object, got ", type_name(v[i])));
    for (const auto& [key, _] : v[i].items())
      if (key != "role" && key != "content" && key != "name") bad(cat(p, ".", key), "unknown field");
    if (!v[i].contains("role") || !v[i]["role"].is_string()) bad(p + ".role", "expected a string");
    const std::string role = v[i]["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad(p + ".role", cat("'", role, "' is not one of system, developer, user, assistant"));
    if (!v[i].contains("content") || !v[i]["content"].is_string())
      bad(p + ".content", "expected a string (content parts are not supported)");
    r.messages.push_back({role, v[i]["content"].get<std::string>()});
  }
}

void parse_stop(const json& v, CompletionRequest& r) {
  if (v.is_null()) return;
  if (v.is_string()) {
    r.stop.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > 4) bad("stop", cat(v.size(), " stop sequences, at most 4 are allowed"));
    for (const json& s : v) {
      if (!s.is_string()) bad("stop", cat("expected strings, got ", type_name(s)));
      r.stop.push_back(s.get<std::string>());
    }
  } else {
    bad("stop", cat("expected a string or an array of strings, got ", type_name(v)));
  }
  for (const std::string& s : r.stop)
    if (s.empty()) bad("stop", "a stop sequence is empty");
}

// OpenAI fields this server knows but does not implement: accepted at their
// neutral value only, so that a client relying on them hears about it.
bool neutral(const std::string& key, const json& v) {
  if (v.is_null()) return true;
  if (key == "logprobs" || key == "echo") return v.is_boolean() ? !v.get<bool>() : false;
  if (key == "presence_penalty" || key == "frequency_penalty") return v.is_number() && v.get<double>() == 0;
  if (key == "best_of") return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "user") return v.is_string();
  if (key == "logit_bias") return v.is_object() && v.empty();
  if (key == "suffix") return v.is_string() && v.get<std::string>().empty();
  if (key == "stream_options") return v.is_object();
  return false;
}

}  // namespace

void check_session_id(const std::string& id, const std::string& param) {
  if (id.empty() || id.size() > 128) bad(param, "a session id has 1 to 128 characters");
  for (const char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      bad(param, "a session id has only letters, digits, '_', '-' and '.'");
  if (!std::isalnum(static_cast<unsigned char>(id[0]))) bad(param, "a session id starts with a letter or digit");
}

CompletionRequest parse_completion_request(const json& body, bool chat, const RequestLimits& limits) {
  if (!body.is_object()) throw ApiError(400, cat("the request body must be a JSON object, got ", type_name(body)));
  CompletionRequest r;
  r.chat = chat;
  r.max_tokens = limits.default_max_tokens;
  static const std::set<std::string> ignored = {"logprobs", "echo", "presence_penalty", "frequency_penalty",
                                                "best_of", "user", "logit_bias", "suffix", "stream_options",
                                                "top_logprobs"};
  for (const auto& [key, v] : body.items()) {
    if (key == "model") {
      if (!v.is_string()) bad(key, cat("expected a string, got ", type_name(v)));
      r.model = v.get<std::string>();
    } else if (key == "prompt" && !chat) {
      parse_prompt(v, r, limits);
    } else if (key == "messages" && chat) {
      parse_messages(v, r);
    } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
      if (!v.is_null()) r.max_tokens = get_int(v, key, 0, limits.max_tokens);
    } else if (key == "temperature") {
      if (!v.is_null()) r.temperature = get_float(v, key, 0, 2);
    } else if (key == "top_p") {
      if (!v.is_null()) r.top_p = get_float(v, key, 0, 1, true);
    } else if (key == "n") {
      if (!v.is_null() && get_int(v, key, 1, 1 << 20) != 1) bad(key, "only n = 1 is supported");
    } else if (key == "stop") {
      parse_stop(v, r);
    } else if (key == "seed") {
      if (!v.is_null()) r.seed = static_cast<uint64_t>(get_int(v, key, INT64_MIN, INT64_MAX));
    } else if (key == "stream") {
      if (!v.is_boolean() && !v.is_null()) bad(key, cat("expected a boolean, got ", type_name(v)));
      r.stream = v.is_boolean() && v.get<bool>();
    } else if (key == "session") {
      if (!v.is_string()) bad(key, cat("expected a string, got ", type_name(v)));
      r.session = v.get<std::string>();
      check_session_id(r.session);
    } else if (ignored.count(key) != 0) {
      if (!neutral(key, v)) bad(key, "is not supported by this server (only its default value is accepted)");
    } else {
      bad(key, "unknown field");
    }
  }
  if (!chat && !body.contains("prompt")) bad("prompt", "is required");
  if (chat && !body.contains("messages")) bad("messages", "is required");
  return r;
}

std::string render_chat(const std::vector<ChatMessage>& messages) {
  std::string text;
  for (const ChatMessage& m : messages) text += cat(m.role, ": ", m.content, "\n");
  return text + "assistant:";
}

nlohmann::json error_body(int status, const std::string& message, const std::string& param,
                          const std::string& type, const std::string& code) {
  std::string t = type;
  if (t.empty()) t = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
  return {{"error",
           {{"message", message}, {"type", t}, {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

}  // namespace ssm::serve
