// Text a command reads: given on the command line (--prompt, --text) or read
// from a file with -f/--file, where "-" is standard input.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ssm::cli {

struct TextSource {
  std::string text, file;
  CLI::Option* text_flag = nullptr;
  CLI::Option* file_flag = nullptr;

  bool given() const { return text_flag->count() > 0 || file_flag->count() > 0; }
  // The flag the text came from, for messages.
  std::string flag() const { return file_flag->count() > 0 ? file_flag->get_name() : text_flag->get_name(); }
  // The text (the file's bytes as they are); empty when none was given.
  std::string read() const;
};

// text_names: e.g. "-p,--prompt"; noun: what the file holds, for --help.
// The two exclude each other; with required, one of them must be given.
void add_text_source(CLI::App& cmd, TextSource& source, const std::string& text_names,
                     const std::string& description, const std::string& noun, bool required);

}  // namespace ssm::cli
