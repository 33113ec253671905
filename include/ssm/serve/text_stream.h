// The text of one completion as its tokens arrive: finds stop strings
// (which end the text, unsent) and tells which bytes can be streamed now:
// never a tail that could still become a stop string, nor half a UTF-8
// character.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ssm::serve {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends a token's bytes; true once the text holds a stop string.
  bool push(std::string_view bytes);
  bool stopped() const { return stop_at_ != std::string::npos; }
  // The bytes that are final and not yet taken.
  std::string take_ready();
  // Everything not yet taken, at the end of the completion.
  std::string take_rest();
  // The completion's text: up to the stop string, if one was found.
  std::string text() const { return full_.substr(0, end()); }

 private:
  size_t end() const { return stopped() ? stop_at_ : full_.size(); }
  size_t ready_end() const;

  std::vector<std::string> stops_;
  std::string full_;
  size_t taken_ = 0;
  size_t stop_at_ = std::string::npos;
};

// A string safe to put in JSON: invalid UTF-8 bytes become U+FFFD.
std::string json_text(const std::string& bytes);

}  // namespace ssm::serve
