// Generated text, printed as it completes: whole UTF-8 characters only, and
// never a byte of a stop string (bytes that could still begin one are held
// back until the next token tells). Everything printed is also kept, for
// --json.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ssm/tokenizer/streaming_decoder.h"

namespace ssm::cli {

class TextOut {
 public:
  // out: where the text streams to; nullptr keeps it only.
  TextOut(const Tokenizer& tokenizer, const std::vector<std::string>& stops, std::FILE* out);

  // --echo: the prompt, printed as given before the generated text.
  void echo(const std::string& prompt);
  void push(int64_t id);
  // The held-back bytes, cut before the first stop string when generation
  // stopped at one. On a terminal a newline follows text that lacks one, so
  // the shell's prompt starts on its own line; elsewhere the bytes are
  // exactly the model's.
  void finish(bool stopped_by_string);

  const std::string& text() const { return text_; }
  // Whether what was printed (if anything) ends with a newline.
  bool ends_line() const { return !printed_ || last_ == '\n'; }
  // The errno of the first write to out that failed (a full disk), 0 while
  // none has; nothing more is written after one.
  int write_error() const { return write_error_; }

 private:
  void emit(size_t n);
  void write(const char* data, size_t n);
  size_t first_stop() const;

  StreamingDecoder decoder_;
  const std::vector<std::string>& stops_;
  std::FILE* out_;
  size_t hold_ = 0;
  std::string held_, text_;
  bool stopped_ = false;
  bool printed_ = false;
  char last_ = 0;
  int write_error_ = 0;
};

}  // namespace ssm::cli
