#include "cli/flags.h"

#include <unistd.h>

#include <charconv>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <map>

#include "cli/install_paths.h"
#include "cli/usage_error.h"
#include "ssm/core/error.h"
#include "ssm/io/atomic_file.h"
#include "ssm/model/memory_budget.h"

namespace ssm::cli {
namespace {

namespace fs = std::filesystem;

// from_chars accepts neither a leading '+' nor spaces; a user may type '+'.
std::string_view number_text(const std::string& text) {
  std::string_view s(text);
  if (s.size() > 1 && s[0] == '+') s.remove_prefix(1);
  return s;
}

template <typename T>
std::optional<T> parse_whole(const std::string& text, std::errc* error) {
  const std::string_view s = number_text(text);
  T value{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  *error = ec;
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

std::string range_text(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max()) return cat("a whole number from ", min, " up");
  return cat("a whole number from ", min, " to ", max);
}

std::string errno_message() { return std::strerror(errno); }

}  // namespace

CLI::Validator whole_number(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::errc ec{};
        const std::optional<int64_t> v = parse_whole<int64_t>(text, &ec);
        if (!v && ec == std::errc::result_out_of_range)
          return cat("'", text, "' is out of range: give ", range_text(min, max));
        if (!v) return cat("'", text, "' is not a whole number: give ", range_text(min, max));
        if (*v < min || *v > max) return cat(text, " is out of range: give ", range_text(min, max));
        return "";
      },
      "");
}

CLI::Validator unsigned_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::errc ec{};
        if (!text.empty() && text[0] == '-')
          return cat(text, " is negative: give a whole number from 0 to 18446744073709551615");
        if (!parse_whole<uint64_t>(text, &ec))
          return cat("'", text, "' is not a whole number from 0 to 18446744073709551615");
        return "";
      },
      "");
}

CLI::Validator real_number(double min, double max, bool min_excluded, bool max_excluded) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::string_view s = number_text(text);
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const std::string range =
            cat(min_excluded ? "greater than " : "from ", min, max_excluded ? " to less than " : " to ", max);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty() || !std::isfinite(v))
          return cat("'", text, "' is not a number: give one ", range);
        if ((min_excluded ? v <= min : v < min) || (max_excluded ? v >= max : v > max)) return cat(text, " is out of range: give a number ", range);
        return "";
      },
      "");
}

namespace {
// A check that throws ssm::Error, as a validator returning its message.
CLI::Validator throwing_check(const std::function<void(const std::string&)>& check) {
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        try {
          check(text);
          return "";
        } catch (const Error& e) {
          return e.what();
        }
      },
      "");
}
}  // namespace

CLI::Validator memory_size() {
  return throwing_check([](const std::string& text) { parse_memory_size(text); });
}

CLI::Validator one_of(const std::vector<std::string>& values) {
  return CLI::Validator(
      [values](std::string& text) -> std::string {
        if (std::find(values.begin(), values.end(), text) != values.end()) return "";
        std::string list;
        for (const std::string& v : values) list += (list.empty() ? "" : ", ") + v;
        return cat("'", text, "' is not one of this build's choices: ", list);
      },
      "");
}

CLI::Validator input_file(bool allow_stdin) {
  return CLI::Validator(
      [allow_stdin](std::string& text) -> std::string {
        if (allow_stdin && text == "-") return "";
        if (text.empty()) return "the path is empty";
        std::error_code ec;
        const fs::file_status st = fs::status(text, ec);
        if (!fs::exists(st)) return cat(text, ": no such file");
        if (fs::is_directory(st)) return cat(text, ": is a directory, not a file");
        if (::access(text.c_str(), R_OK) != 0) return cat(text, ": cannot read: ", errno_message());
        return "";
      },
      "");
}

CLI::Validator model_directory() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return "the path is empty";
        std::error_code ec;
        const fs::file_status st = fs::status(text, ec);
        if (!fs::exists(st)) return cat(text, ": no such directory");
        if (!fs::is_directory(st)) return cat(text, ": is a file; a model is a directory holding config.json");
        // A directory that cannot be searched is not one without config.json.
        if (::access(text.c_str(), R_OK | X_OK) != 0) return cat(text, ": cannot read: ", errno_message());
        if (!fs::exists(fs::path(text) / "config.json", ec))
          return cat(text, ": holds no config.json (not a model directory)");
        return "";
      },
      "");
}

CLI::Validator model_or_tokenizer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::error_code ec;
        if (fs::is_directory(text, ec)) return "";
        return input_file()(text);
      },
      "");
}

CLI::Validator output_file() {
  return throwing_check([](const std::string& text) {
    // An empty path would otherwise pass as "a file in the current directory".
    if (text.empty()) throw UsageError("the path is empty");
    check_writable_file_path(text);
  });
}

CLI::Validator output_directory() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return "the path is empty";
        std::error_code ec;
        fs::path p = fs::absolute(text, ec);
        if (fs::exists(p, ec) && !fs::is_directory(p, ec)) return cat(text, ": is a file, not a directory");
        // The nearest existing ancestor is where the directories get created.
        while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
        if (!fs::is_directory(p, ec)) return cat(text, ": ", p.string(), " is not a directory");
        if (::access(p.c_str(), W_OK | X_OK) != 0) return cat(text, ": cannot write in ", p.string(), ": ", errno_message());
        return "";
      },
      "");
}

void add_parse_check(CLI::App& cmd, std::function<void()> check) {
  static std::map<const CLI::App*, std::vector<std::function<void()>>> checks;
  std::vector<std::function<void()>>& list = checks[&cmd];
  if (list.empty()) cmd.parse_complete_callback([&list] {
      for (const auto& c : list) c();
    });
  list.push_back(std::move(check));
}

void add_model_argument(CLI::App& cmd, std::string& model, const std::string& description, WithoutModel without,
                        const CLI::Validator& check) {
  const bool builtin = without == WithoutModel::builtin;
  CLI::Option* positional =
      cmd.add_option("MODEL", model, description + "; also as -m DIR")->type_name("DIR")->check(check);
  CLI::Option* option = cmd.add_option("-m,--model", model, "the same as MODEL")->type_name("DIR")->check(check);
  if (builtin) {
    positional->default_str("the built-in model");
    option->default_str("the built-in model");
  } else {
    option->description("the same as MODEL (required, or MODEL)");
  }
  add_parse_check(cmd, [positional, option, builtin, &model] {
    if (positional->count() > 0 && option->count() > 0)
      throw UsageError("MODEL given twice: as MODEL and as -m/--model; give it once");
    if (!model.empty()) return;
    if (!builtin) throw UsageError("MODEL is required: a model directory (or -m DIR)");
    model = default_model_dir().string();
    if (!std::filesystem::is_regular_file(std::filesystem::path(model) / "config.json"))
      throw Error(cat("no MODEL given and the built-in model is not installed at ", model));
  });
}

}  // namespace ssm::cli
