// ssm tokenize MODEL_OR_TOKENIZER --text T | -f FILE [--decode] [--json] [--no-special]:
// text -> comma-separated ids (with the post-processor's special tokens, as
// HF encodes by default), or with --decode, comma-separated ids -> text.
#include <cstdio>
#include <string_view>

#include "cli/commands.h"
#include "cli/id_list.h"
#include "cli/json_out.h"
#include "cli/text_source.h"
#include "ssm/core/error.h"
#include "ssm/tokenizer/tokenizer.h"

namespace ssm::cli {
namespace {

struct TokenizeArgs {
  std::string path;
  TextSource text;
  bool decode = false, json = false, no_special = false, skip_special = false;
};

int run_tokenize(const TokenizeArgs& a) {
  const auto tokenizer = load_tokenizer_for_model(a.path);
  const std::string input = a.text.read();
  if (a.decode) {
    const std::vector<int64_t> ids = parse_id_list(input, a.text.flag(), [&](int64_t id) -> std::string {
      if (id >= 0 && id < tokenizer->vocab_size() && tokenizer->has_token(static_cast<int32_t>(id))) return "";
      return cat("is not in the tokenizer (vocab size ", tokenizer->vocab_size(), ")");
    });
    const std::string text = tokenizer->decode(std::vector<int32_t>(ids.begin(), ids.end()), a.skip_special);
    if (a.json) print_json({{"text", text}});
    else std::fwrite((text + "\n").data(), 1, text.size() + 1, stdout);
    return 0;
  }
  const std::vector<int32_t> ids = a.no_special ? tokenizer->encode(input) : tokenizer->encode_with_special(input);
  if (a.json) {
    OrderedJson pieces = OrderedJson::array();
    for (const int32_t id : ids) pieces.push_back(std::string(tokenizer->token_bytes(id)));
    print_json({{"ids", ids}, {"tokens", pieces}});
    return 0;
  }
  std::string out;
  for (const int32_t id : ids) out += cat(out.empty() ? "" : ",", id);
  std::printf("%s\n", out.c_str());
  return 0;
}

void setup_tokenize(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("tokenize", "encode text to token ids, or decode ids to text");
  static TokenizeArgs a;
  add_model_argument(*cmd, a.path, "model directory (its tokenizer.json, or raw bytes for a byte-level model) "
                     "or a tokenizer.json file", WithoutModel::builtin, model_or_tokenizer());
  add_text_source(*cmd, a.text, "--text", "text to encode (with --decode: comma-separated ids)", "text or ids", /*required=*/true);
  auto* decode = cmd->add_flag("--decode", a.decode, "decode ids to text instead");
  cmd->add_flag("--no-special", a.no_special,
                "encode without the special tokens the tokenizer's post-processor adds (e.g. the BOS <s> "
                "of Llama-style tokenizers); HF's add_special_tokens=False")
      ->excludes(decode);
  cmd->add_flag("--skip-special", a.skip_special, "with --decode: leave special tokens out of the text")
      ->needs(decode);
  cmd->add_flag("--json", a.json, "print JSON: {ids, tokens} (each token's text), or {text} with --decode");
  cmd->callback([&action] { action = [] { return run_tokenize(a); }; });
}

}  // namespace

SSM_COMMAND(tokenize, setup_tokenize);

}  // namespace ssm::cli
