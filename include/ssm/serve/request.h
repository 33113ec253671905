// The bodies of POST /v1/completions and /v1/chat/completions, parsed and
// checked before anything runs: every type, range and unknown field is an
// ApiError 400 naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ssm::serve {

struct RequestLimits {
  int64_t vocab_size = 0;             // token ids must lie in [0, vocab_size)
  int64_t max_tokens = 4096;          // the largest max_tokens accepted
  int64_t default_max_tokens = 16;    // OpenAI's default for completions
  int64_t max_prompt_tokens = 8192;   // checked after tokenisation too
};

struct ChatMessage {
  std::string role, content;
};

struct CompletionRequest {
  bool chat = false;
  std::optional<std::string> prompt_text;  // completions: a string prompt
  std::vector<int64_t> prompt_ids;         // completions: an array of ids
  std::vector<ChatMessage> messages;       // chat
  std::string model;
  int64_t max_tokens = 16;
  float temperature = 1.f;
  float top_p = 1.f;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  bool stream = false;
  std::string session;  // empty: none
};

CompletionRequest parse_completion_request(const nlohmann::json& body, bool chat, const RequestLimits& limits);

// Throws ApiError 400 unless id is a session id: 1 to 128 characters from
// [A-Za-z0-9_.-], the first a letter or digit (so no path, dot file or
// traversal can be named).
void check_session_id(const std::string& id, const std::string& param = "session");

// The chat template (models here are base models, trained on plain text):
// each message as "<role>: <content>\n", then "assistant:" for the reply.
std::string render_chat(const std::vector<ChatMessage>& messages);

}  // namespace ssm::serve
