// Reads the pipeline parts of tokenizer.json: normalizer, pre-tokenizer,
// decoder and post-processor. A type this engine does not implement is
// refused by name, never skipped: skipping one would give wrong ids silently.
#include "tokenizer_json_reader.h"

#include "ssm/tokenizer/regex.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm::tok_json {
namespace {

// The literal of a {"String": ...} pattern; Regex patterns are refused where
// only literals are implemented.
std::string string_pattern(const Reader& r, const Json& j, const std::string& where) {
  const Json& pattern = r.object(r.at(j, "pattern", where), where + ".pattern");
  if (pattern.contains("String")) return r.string(pattern["String"], where + ".pattern.String");
  if (pattern.contains("Regex")) r.fail(where + ".pattern", "a Regex pattern is not supported here, only String");
  r.fail(where + ".pattern", "expected 'String' or 'Regex'");
}

std::string one_char(const Reader& r, const Json& j, const char* key, const std::string& where) {
  const std::string& s = r.string(r.at(j, key, where), cat(where, ".", key));
  const tok::Utf8Char c = tok::decode_utf8(s);
  if (c.length == 0 || c.length != s.size())
    r.fail(cat(where, ".", key), cat("expected one character, got \"", s, "\""));
  return s;
}

size_t count(const Reader& r, const Json& j, const char* key, const std::string& where) {
  const Json& v = r.at(j, key, where);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 1024)
    r.fail(cat(where, ".", key), cat("expected a count from 0 to 1024, got ", v.dump()));
  return v.get<size_t>();
}

void read_normalizer_step(const Reader& r, const Json& j, const std::string& where,
                          std::vector<tok::NormalizerStep>& steps) {
  const std::string type = r.type_of(j, where);
  if (type == "NFC") steps.push_back(tok::NormalizerStep::of(tok::NormalForm::kNfc));
  else if (type == "NFD") steps.push_back(tok::NormalizerStep::of(tok::NormalForm::kNfd));
  else if (type == "NFKC") steps.push_back(tok::NormalizerStep::of(tok::NormalForm::kNfkc));
  else if (type == "NFKD") steps.push_back(tok::NormalizerStep::of(tok::NormalForm::kNfkd));
  else if (type == "Prepend")
    steps.push_back(tok::NormalizerStep::prepend(r.string(r.at(j, "prepend", where), where + ".prepend")));
  else if (type == "Replace")
    steps.push_back(tok::NormalizerStep::replace(string_pattern(r, j, where),
                                                 r.string(r.at(j, "content", where), where + ".content")));
  else
    r.fail(where, cat("unsupported normalizer type '", type, "'"));
}

std::string escape_regex(const std::string& literal) {
  std::string out;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#&~ ").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct PreTokenizerSpec {
  bool add_prefix_space = false;
  bool byte_level = false;
  std::vector<tok::Regex> splits;
};

void read_pre_step(const Reader& r, const Json& j, const std::string& where, PreTokenizerSpec& spec) {
  const std::string type = r.type_of(j, where);
  if (type == "ByteLevel") {
    if (spec.byte_level) r.fail(where, "a second ByteLevel step");
    spec.byte_level = true;
    if (r.boolean(j, "add_prefix_space", true, where)) {
      // The prefix goes onto each piece the step receives; only the whole
      // segment (a first step) is supported.
      if (!spec.splits.empty()) r.fail(where, "add_prefix_space after a Split is not supported");
      spec.add_prefix_space = true;
    }
    if (r.boolean(j, "use_regex", true, where)) spec.splits.emplace_back(tok::kGpt2SplitPattern);
  } else if (type == "Split") {
    const Json& pattern = r.object(r.at(j, "pattern", where), where + ".pattern");
    const std::string behavior = r.string(r.at(j, "behavior", where), where + ".behavior");
    if (behavior != "Isolated") r.fail(where, cat("unsupported split behavior '", behavior, "'"));
    if (r.boolean(j, "invert", false, where)) r.fail(where, "inverted splits are not supported");
    std::string regex;
    if (pattern.contains("Regex"))
      regex = r.string(pattern["Regex"], where + ".pattern.Regex");
    else if (pattern.contains("String"))
      regex = escape_regex(r.string(pattern["String"], where + ".pattern.String"));
    else
      r.fail(where + ".pattern", "expected 'Regex' or 'String'");
    try {
      spec.splits.emplace_back(regex);
    } catch (const Error& e) {
      r.fail(where + ".pattern", e.what());
    }
  } else if (type == "Metaspace") {
    r.fail(where, "Metaspace is supported only as the whole pre_tokenizer, not inside a Sequence");
  } else {
    r.fail(where, cat("unsupported pre_tokenizer type '", type, "'"));
  }
}

tok::Metaspace::Prepend prepend_scheme(const Reader& r, const Json& j, const std::string& where) {
  const Json& scheme = Reader::optional(j, "prepend_scheme");
  if (scheme.is_null()) {
    // Files older than prepend_scheme say add_prefix_space.
    return r.boolean(j, "add_prefix_space", true, where) ? tok::Metaspace::Prepend::kAlways
                                                         : tok::Metaspace::Prepend::kNever;
  }
  const std::string& s = r.string(scheme, where + ".prepend_scheme");
  if (s == "always") return tok::Metaspace::Prepend::kAlways;
  if (s == "first") return tok::Metaspace::Prepend::kFirst;
  if (s == "never") return tok::Metaspace::Prepend::kNever;
  r.fail(where + ".prepend_scheme", cat("expected \"always\", \"first\" or \"never\", got \"", s, "\""));
}

tok::DecoderStep read_decoder_step(const Reader& r, const Json& j, const std::string& where) {
  using Kind = tok::DecoderStep::Kind;
  const std::string type = r.type_of(j, where);
  tok::DecoderStep step;
  if (type == "Replace") {
    step.kind = Kind::kReplace;
    step.pattern = string_pattern(r, j, where);
    step.content = r.string(r.at(j, "content", where), where + ".content");
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.content = one_char(r, j, "content", where);
    step.start = count(r, j, "start", where);
    step.stop = count(r, j, "stop", where);
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.pattern = one_char(r, j, "replacement", where);
    step.prepend = prepend_scheme(r, j, where) != tok::Metaspace::Prepend::kNever;
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else {
    r.fail(where, cat("unsupported decoder type '", type, "'"));
  }
  return step;
}

}  // namespace

tok::Normalizer read_normalizer(const Reader& r, const Json& j) {
  if (j.is_null()) return {};
  std::vector<tok::NormalizerStep> steps;
  if (r.type_of(j, "normalizer") == "Sequence") {
    const Json& list = r.array(r.at(j, "normalizers", "normalizer"), "normalizer.normalizers");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = cat("normalizer.normalizers[", i, "]");
      if (r.type_of(list[i], where) == "Sequence") r.fail(where, "a nested Sequence is not supported");
      read_normalizer_step(r, list[i], where, steps);
    }
  } else {
    read_normalizer_step(r, j, "normalizer", steps);
  }
  return tok::Normalizer(std::move(steps));
}

PreTokenizerRead read_pre_tokenizer(const Reader& r, const Json& j) {
  // No pre-tokenizer: SentencePiece conversions (legacy) encode each piece
  // between added tokens as one word.
  if (j.is_null()) return {tok::PreTokenizer(), false};
  const std::string type = r.type_of(j, "pre_tokenizer");
  if (type == "Metaspace") {
    tok::Metaspace m;
    m.replacement = one_char(r, j, "replacement", "pre_tokenizer");
    m.prepend = prepend_scheme(r, j, "pre_tokenizer");
    m.split = r.boolean(j, "split", true, "pre_tokenizer");
    return {tok::PreTokenizer(std::move(m)), false};
  }
  PreTokenizerSpec spec;
  if (type == "Sequence") {
    const Json& list = r.array(r.at(j, "pretokenizers", "pre_tokenizer"), "pre_tokenizer.pretokenizers");
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_step(r, list[i], cat("pre_tokenizer.pretokenizers[", i, "]"), spec);
  } else {
    read_pre_step(r, j, "pre_tokenizer", spec);
  }
  if (!spec.byte_level)
    r.fail("pre_tokenizer", "Split without a ByteLevel step is not supported (byte-level BPE or Metaspace only)");
  return {tok::PreTokenizer(spec.add_prefix_space, std::move(spec.splits)), true};
}

tok::Decoder read_decoder(const Reader& r, const Json& j, bool byte_level) {
  std::vector<tok::DecoderStep> steps;
  if (j.is_null()) {
    // Without a decoder a byte-level vocab still reads as its bytes.
    if (byte_level) steps.push_back({tok::DecoderStep::Kind::kByteLevel});
    return tok::Decoder(std::move(steps));
  }
  if (r.type_of(j, "decoder") == "Sequence") {
    const Json& list = r.array(r.at(j, "decoders", "decoder"), "decoder.decoders");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = cat("decoder.decoders[", i, "]");
      if (r.type_of(list[i], where) == "Sequence") r.fail(where, "a nested Sequence is not supported");
      steps.push_back(read_decoder_step(r, list[i], where));
    }
  } else {
    steps.push_back(read_decoder_step(r, j, "decoder"));
  }
  return tok::Decoder(std::move(steps));
}

namespace {

using TokenId = std::function<int32_t(const std::string&, const std::string&)>;

// TemplateProcessing's "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}].
tok::PostProcessor read_template(const Reader& r, const Json& j, const std::string& where, const TokenId& token_id) {
  const Json& single = r.array(r.at(j, "single", where), where + ".single");
  const Json& specials = Reader::optional(j, "special_tokens");
  std::vector<tok::PostProcessor::Piece> pieces;
  bool has_text = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = cat(where, ".single[", i, "]");
    const Json& item = r.object(single[i], at);
    if (item.contains("Sequence")) {
      const std::string& id = r.string(r.at(r.object(item["Sequence"], at + ".Sequence"), "id", at), at + ".Sequence.id");
      if (id != "A") r.fail(at, cat("the single template names sequence '", id, "'; only A exists"));
      pieces.push_back({true, {}});
      has_text = true;
    } else if (item.contains("SpecialToken")) {
      const std::string& name =
          r.string(r.at(r.object(item["SpecialToken"], at + ".SpecialToken"), "id", at), at + ".SpecialToken.id");
      if (!specials.is_object() || !specials.contains(name))
        r.fail(at, cat("special token \"", name, "\" is not in ", where, ".special_tokens"));
      const std::string sat = cat(where, ".special_tokens[\"", name, "\"]");
      const Json& ids = r.array(r.at(r.object(specials[name], sat), "ids", sat), sat + ".ids");
      tok::PostProcessor::Piece piece;
      for (size_t k = 0; k < ids.size(); ++k) {
        const int32_t id = r.token_id(ids[k], cat(sat, ".ids[", k, "]"));
        piece.ids.push_back(id);
      }
      // The ids must name tokens of this file, or the model reads garbage.
      const Json& tokens = Reader::optional(specials[name], "tokens");
      if (tokens.is_array() && tokens.size() == ids.size())
        for (size_t k = 0; k < tokens.size(); ++k) {
          const std::string tat = cat(sat, ".tokens[", k, "]");
          if (token_id(r.string(tokens[k], tat), tat) != piece.ids[k])
            r.fail(tat, cat("token and id ", piece.ids[k], " disagree"));
        }
      pieces.push_back(std::move(piece));
    } else {
      r.fail(at, "expected 'Sequence' or 'SpecialToken'");
    }
  }
  if (!has_text) r.fail(where + ".single", "the template has no $A: the text would be dropped");
  return tok::PostProcessor(std::move(pieces));
}

// BertProcessing and RobertaProcessing: {"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}.
int32_t pair_id(const Reader& r, const Json& j, const char* key, const std::string& where, const TokenId& token_id) {
  const std::string at = cat(where, ".", key);
  const Json& pair = r.array(r.at(j, key, where), at);
  if (pair.size() != 2) r.fail(at, "expected [token, id]");
  const int32_t id = r.token_id(pair[1], at + "[1]");
  if (token_id(r.string(pair[0], at + "[0]"), at) != id) r.fail(at, cat("token and id ", id, " disagree"));
  return id;
}

tok::PostProcessor read_processor(const Reader& r, const Json& j, const std::string& where, const TokenId& token_id) {
  const std::string type = r.type_of(j, where);
  if (type == "ByteLevel") return {};
  if (type == "TemplateProcessing") return read_template(r, j, where, token_id);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const int32_t cls = pair_id(r, j, "cls", where, token_id);
    const int32_t sep = pair_id(r, j, "sep", where, token_id);
    return tok::PostProcessor({{false, {cls}}, {true, {}}, {false, {sep}}});
  }
  if (type == "Sequence") {
    const Json& list = r.array(r.at(j, "processors", where), where + ".processors");
    tok::PostProcessor all;
    for (size_t i = 0; i < list.size(); ++i)
      all = all.then(read_processor(r, list[i], cat(where, ".processors[", i, "]"), token_id));
    return all;
  }
  r.fail(where, cat("unsupported post_processor type '", type, "'"));
}

}  // namespace

tok::PostProcessor read_post_processor(const Reader& r, const Json& j, const TokenId& token_id) {
  if (j.is_null()) return {};
  return read_processor(r, j, "post_processor", token_id);
}

}  // namespace ssm::tok_json
