// Checks of command-line values, run by CLI11 before a value is converted, so
// that every bad value is refused with a message naming the flag (CLI11
// prefixes "NAME: ") and saying what is wrong, in the program's own words.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace ssm::cli {

// An integer in [min, max] (no sign wrapping, no clamping, no fractions).
CLI::Validator whole_number(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());
// Any integer in [0, 2^64 - 1], for seeds.
CLI::Validator unsigned_number();
// A finite number in [min, max]; min_excluded: above min, max_excluded: below max.
CLI::Validator real_number(double min, double max, bool min_excluded = false, bool max_excluded = false);
// parse_memory_size's syntax (2G, 512M, 1.5GiB).
CLI::Validator memory_size();
CLI::Validator one_of(const std::vector<std::string>& values);

// A readable regular file; with allow_stdin also "-".
CLI::Validator input_file(bool allow_stdin = false);
// A directory holding config.json.
CLI::Validator model_directory();
// A model directory, or a tokenizer.json file.
CLI::Validator model_or_tokenizer();
// A file that can be written atomically: not a directory, in a writable
// directory that exists.
CLI::Validator output_file();
// A directory that exists and is writable, or can be created.
CLI::Validator output_directory();

// Runs check once cmd's command line is parsed, before its values are
// used; a command may have several (CLI11 keeps one callback).
void add_parse_check(CLI::App& cmd, std::function<void()> check);

// Whether a command without MODEL is refused or runs the built-in model
// (what a new user's first `ssm generate` ran, so `ssm info` describes it).
enum class WithoutModel { refuse, builtin };

// The model directory as MODEL or -m/--model DIR (llama.cpp's spelling).
// With WithoutModel::builtin, an empty model becomes the installed built-in
// model's directory once the command line is parsed.
void add_model_argument(CLI::App& cmd, std::string& model, const std::string& description,
                        WithoutModel without, const CLI::Validator& check = model_directory());

}  // namespace ssm::cli
