#include "cli/parse_errors.h"

#include <string_view>

namespace ssm::cli {
namespace {

std::string command_names(const CLI::App& root) {
  std::string names;
  for (const CLI::App* sub : root.get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

// The chosen sub-command, or root itself when none was chosen.
const CLI::App& chosen(const CLI::App& root) {
  const std::vector<CLI::App*> subs = root.get_subcommands();
  return subs.empty() ? root : *subs.front();
}

std::string help_hint(const CLI::App& root) {
  const CLI::App& app = chosen(root);
  return &app == &root ? "see 'ssm --help'" : "see 'ssm help " + app.get_name() + "'";
}

// A single-valued option given more than once.
const CLI::Option* repeated_option(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() > 1 && opt->get_items_expected_max() == 1 && opt->get_type_size() != 0) return opt;
  return nullptr;
}

}  // namespace

std::optional<std::string> leftover_arguments_message(const CLI::App& root) {
  const std::vector<std::string> left = root.remaining(true);
  if (left.empty()) return std::nullopt;
  const std::string& first = left.front();
  const bool is_option = first.size() > 1 && first[0] == '-';
  if (&chosen(root) == &root && !is_option)
    return "'" + first + "' is not a command; the commands are " + command_names(root) + " (see 'ssm --help')";
  if (is_option) return "unknown option '" + first + "' (" + help_hint(root) + ")";
  return "unexpected argument '" + first + "' (" + help_hint(root) + ")";
}

std::string parse_error_message(const CLI::App& root, const CLI::ParseError& error) {
  const std::string what = error.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    for (const CLI::App* app : {&root, &chosen(root)})
      if (const CLI::Option* opt = repeated_option(*app))
        return opt->get_name() + " given " + std::to_string(opt->count()) + " times; give it once";
    // "--prompt: 1 required TEXT missing": the option ended the command line.
    if (what.find(" missing") != std::string::npos || what.find("Expected") == 0) {
      const size_t colon = what.find(':');
      if (colon != std::string::npos) return what.substr(0, colon) + " needs a value";
    }
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&error) != nullptr) {
    const size_t at = what.find(" excludes ");
    if (at != std::string::npos)
      return what.substr(0, at) + " and " + what.substr(at + 10) + " cannot be given together";
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) return what + " (" + help_hint(root) + ")";
  return what;
}

}  // namespace ssm::cli
