#include "cli/text_source.h"

#include <iostream>
#include <iterator>

#include "cli/flags.h"
#include "cli/usage_error.h"
#include "ssm/io/atomic_file.h"

namespace ssm::cli {

std::string TextSource::read() const {
  if (file_flag->count() == 0) return text;
  if (file != "-") return read_file(file);
  std::cin >> std::noskipws;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

void add_text_source(CLI::App& cmd, TextSource& source, const std::string& text_names,
                     const std::string& description, const std::string& noun, bool required) {
  source.text_flag = cmd.add_option(text_names, source.text, description)->type_name("TEXT");
  source.file_flag = cmd.add_option("-f,--file", source.file, "read the " + noun + " from this file ('-': standard input)")
                         ->type_name("FILE")
                         ->check(input_file(/*allow_stdin=*/true));
  source.text_flag->excludes(source.file_flag);
  if (!required) {
    source.text_flag->default_str("none");
    source.file_flag->default_str("none");
    return;
  }
  const std::string text_name = source.text_flag->get_name();
  source.text_flag->description(description + " (required, or -f)");
  source.file_flag->description(source.file_flag->get_description() + " (required, or " + text_name + ")");
  add_parse_check(cmd, [&source, text_name] {
    if (!source.given()) throw UsageError("no " + text_name.substr(2) + ": give " + text_name + " or -f FILE ('-': standard input)");
  });
}

}  // namespace ssm::cli
