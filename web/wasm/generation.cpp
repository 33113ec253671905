// generate(): the module's own generation, `ssm generate --session` on the
// model's one session, streaming the text as it completes.
#include <algorithm>
#include <optional>

#include "model_module.h"

namespace ssm::web {

// request: {prompt | promptIds, maxTokens, temperature, topK, topP, minP,
// repeatPenalty, repeatLastN, seed, stop, stopIds, ignoreEos, noSpecial}
// with the CLI's defaults; on_piece(json) gets the text as it completes,
// as a JSON string. Continues the model's session.
val Model::generate(const std::string& request, val on_piece) {
  return guarded([&] {
    check_loaded();
    GenerationConfig cfg;
    const std::vector<int64_t> prompt = parse_request(request, cfg);
    Generator gen(*model_, *ctx_);
    std::optional<cli::TextOut> out;  // none without a tokenizer: ids only
    if (tok_) {
      gen.set_token_text([&](int64_t id) { return token_bytes(id); });
      out.emplace(*tok_, cfg.stop_strings, nullptr);
    }
    size_t sent = 0;
    const auto send_text = [&] {
      // As a JSON string: bytes that are not UTF-8 become U+FFFD exactly
      // as in the result's text.
      if (!out) return;
      if (out->text().size() > sent)
        on_piece(
            Json(out->text().substr(sent)).dump(-1, ' ', false, Json::error_handler_t::replace));
      sent = out->text().size();
    };
    const SequenceOutput result = gen.generate(session_, {prompt}, cfg, [&](int64_t, int64_t id) {
      if (!out ||
          std::find(cfg.stop_tokens.begin(), cfg.stop_tokens.end(), id) != cfg.stop_tokens.end())
        return;
      out->push(id);
      send_text();
    })[0];
    if (out) out->finish(result.finish == FinishReason::kStopString);
    send_text();
    const GenerationStats& s = gen.stats();
    Json doc = {{"promptIds", prompt},
                {"ids", result.tokens},
                {"text", out ? out->text() : std::string()},
                {"finish", finish_reason_name(result.finish)},
                {"seed", cfg.seed},
                {"stats",
                 {{"prefillTokens", s.prefill_tokens},
                  {"prefillSeconds", s.prefill_seconds},
                  {"decodeTokens", s.decode_tokens},
                  {"decodeSeconds", s.decode_seconds}}},
                {"consumed", session_.consumed[0]}};
    return json_value(doc);
  });
}

}  // namespace ssm::web
