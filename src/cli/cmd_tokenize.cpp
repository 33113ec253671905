// ssm tokenize MODEL_OR_TOKENIZER --text T [--decode]: text -> comma-separated
// ids, or with --decode, comma-separated ids -> text.
#include <charconv>
#include <cstdio>
#include <string_view>

#include "cli/commands.h"
#include "ssm/core/error.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm::cli {
namespace {

struct TokenizeArgs {
  std::string path;
  std::string text;
  bool decode = false;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<int32_t> parse_ids(std::string_view list, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  if (trim(list).empty()) return ids;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || end != item.data() + item.size() || item.empty())
      throw Error(cat("--text: '", item, "' is not a token id (expected e.g. 41,1096,334)"));
    if (id < 0 || id >= tokenizer.vocab_size() || !tokenizer.has_token(static_cast<int32_t>(id)))
      throw Error(cat("--text: token id ", id, " is not in the tokenizer (vocab size ",
                      tokenizer.vocab_size(), ")"));
    ids.push_back(static_cast<int32_t>(id));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return ids;
}

int run_tokenize(const TokenizeArgs& args) {
  const auto tokenizer = load_tokenizer_for_model(args.path);
  std::string out;
  if (args.decode) {
    out = tokenizer->decode(parse_ids(args.text, *tokenizer));
  } else {
    for (const int32_t id : tokenizer->encode(args.text)) {
      if (!out.empty()) out += ',';
      out += std::to_string(id);
    }
  }
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

void setup_tokenize(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("tokenize", "encode text to token ids, or decode ids to text");
  static TokenizeArgs args;
  cmd->add_option("MODEL_OR_TOKENIZER", args.path,
                  "model directory (its tokenizer.json, else raw bytes) or a tokenizer.json")
      ->required();
  cmd->add_option("--text", args.text, "text to encode; with --decode, comma-separated ids")
      ->required();
  cmd->add_flag("--decode", args.decode, "decode ids to text instead");
  cmd->callback([&action] { action = [] { return run_tokenize(args); }; });
}

}  // namespace

SSM_COMMAND(tokenize, setup_tokenize);

}  // namespace ssm::cli
