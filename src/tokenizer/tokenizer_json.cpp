// Reads HF tokenizer.json into a BpeTokenizer. Every structural problem
// becomes an ssm::Error naming the file and the JSON path; anything this
// engine does not implement is refused by name rather than half-applied.
#include <limits>

#include "ssm/core/error.h"
#include "ssm/core/log.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/tokenizer/bpe_tokenizer.h"
#include "ssm/tokenizer/byte_level.h"

namespace ssm {
namespace {

// Ids index a dense table, so a stray huge id must not become a huge allocation.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(cat(source_, ": ", where, ": ", what));
  }
  const Json& object(const Json& v, const std::string& where) const {
    if (!v.is_object()) fail(where, cat("expected an object, got ", v.type_name()));
    return v;
  }
  const Json& array(const Json& v, const std::string& where) const {
    if (!v.is_array()) fail(where, cat("expected an array, got ", v.type_name()));
    return v;
  }
  const std::string& string(const Json& v, const std::string& where) const {
    if (!v.is_string()) fail(where, cat("expected a string, got ", v.type_name()));
    return v.get_ref<const std::string&>();
  }
  // A required key of an object.
  const Json& at(const Json& obj, const char* key, const std::string& where) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where, cat("missing key '", key, "'"));
    return *it;
  }
  // null when absent.
  static const Json& optional(const Json& obj, const char* key) {
    static const Json kNull;
    const auto it = obj.find(key);
    return it == obj.end() ? kNull : *it;
  }
  bool boolean(const Json& obj, const char* key, bool fallback, const std::string& where) const {
    const Json& v = optional(obj, key);
    if (v.is_null()) return fallback;
    if (!v.is_boolean()) fail(cat(where, ".", key), cat("expected true or false, got ", v.dump()));
    return v.get<bool>();
  }
  int32_t token_id(const Json& v, const std::string& where) const {
    if (!v.is_number_integer()) fail(where, cat("expected a token id, got ", v.dump()));
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > kMaxTokenId) fail(where, cat("token id ", id, " is out of range"));
    return static_cast<int32_t>(id);
  }
  std::string type_of(const Json& obj, const std::string& where) const {
    return string(at(object(obj, where), "type", where), cat(where, ".type"));
  }

 private:
  std::string source_;
};

tok::NormalForm normal_form(const Reader& r, const std::string& type, const std::string& where) {
  if (type == "NFC") return tok::NormalForm::kNfc;
  if (type == "NFD") return tok::NormalForm::kNfd;
  if (type == "NFKC") return tok::NormalForm::kNfkc;
  if (type == "NFKD") return tok::NormalForm::kNfkd;
  r.fail(where, cat("unsupported normalizer type '", type, "'"));
}

tok::Normalizer read_normalizer(const Reader& r, const Json& j) {
  if (j.is_null()) return {};
  const std::string type = r.type_of(j, "normalizer");
  std::vector<tok::NormalForm> forms;
  if (type == "Sequence") {
    const Json& list = r.array(r.at(j, "normalizers", "normalizer"), "normalizer.normalizers");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = cat("normalizer.normalizers[", i, "]");
      forms.push_back(normal_form(r, r.type_of(list[i], where), where));
    }
  } else {
    forms.push_back(normal_form(r, type, "normalizer"));
  }
  return tok::Normalizer(std::move(forms));
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

void read_pre_step(const Reader& r, const Json& j, const std::string& where,
                   PreTokenizerSpec& spec) {
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
  } else {
    r.fail(where, cat("unsupported pre_tokenizer type '", type, "'"));
  }
}

tok::PreTokenizer read_pre_tokenizer(const Reader& r, const Json& j) {
  if (j.is_null()) r.fail("pre_tokenizer", "missing; only byte-level BPE is supported");
  PreTokenizerSpec spec;
  if (r.type_of(j, "pre_tokenizer") == "Sequence") {
    const Json& list =
        r.array(r.at(j, "pretokenizers", "pre_tokenizer"), "pre_tokenizer.pretokenizers");
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_step(r, list[i], cat("pre_tokenizer.pretokenizers[", i, "]"), spec);
  } else {
    read_pre_step(r, j, "pre_tokenizer", spec);
  }
  if (!spec.byte_level)
    r.fail("pre_tokenizer", "no ByteLevel step; only byte-level BPE is supported");
  return tok::PreTokenizer(spec.add_prefix_space, std::move(spec.splits));
}

void check_decoder(const Reader& r, const Json& j) {
  if (j.is_null()) return;  // tokens are byte strings either way
  const std::string type = r.type_of(j, "decoder");
  if (type != "ByteLevel") r.fail("decoder", cat("unsupported decoder type '", type, "'"));
}

void check_post_processor(const Reader& r, const Json& j, const std::string& source) {
  if (j.is_null()) return;
  const std::string type = r.type_of(j, "post_processor");
  if (type != "ByteLevel")
    log_warning(source, ": post_processor '", type,
                "' is ignored: no tokens are added around the text");
}

std::unordered_map<std::string, int32_t> read_vocab(const Reader& r, const Json& model) {
  const Json& vocab = r.object(r.at(model, "vocab", "model"), "model.vocab");
  std::unordered_map<std::string, int32_t> out;
  out.reserve(vocab.size());
  for (const auto& [key, value] : vocab.items())
    out.emplace(key, r.token_id(value, cat("model.vocab[\"", key, "\"]")));
  return out;
}

std::vector<tok::MergeRule> read_merges(const Reader& r, const Json& model,
                                        const std::unordered_map<std::string, int32_t>& vocab) {
  const Json& merges = r.array(r.at(model, "merges", "model"), "model.merges");
  std::vector<tok::MergeRule> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string where = cat("model.merges[", i, "]");
    const Json& m = merges[i];
    std::string left;
    std::string right;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        r.fail(where, cat("expected two tokens separated by one space, got \"", s, "\""));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2) {
      left = r.string(m[0], where + "[0]");
      right = r.string(m[1], where + "[1]");
    } else {
      r.fail(where, cat("expected \"a b\" or [\"a\", \"b\"], got ", m.dump()));
    }
    auto id_of = [&](const std::string& token, const char* role) {
      const auto it = vocab.find(token);
      if (it == vocab.end()) r.fail(where, cat(role, " token \"", token, "\" is not in the vocab"));
      return it->second;
    };
    out.push_back({id_of(left, "first"), id_of(right, "second"), id_of(left + right, "merged")});
  }
  return out;
}

std::vector<tok::AddedToken> read_added_tokens(const Reader& r, const Json& j) {
  std::vector<tok::AddedToken> out;
  if (j.is_null()) return out;
  r.array(j, "added_tokens");
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = cat("added_tokens[", i, "]");
    const Json& t = r.object(j[i], where);
    tok::AddedToken token;
    token.id = r.token_id(r.at(t, "id", where), where + ".id");
    token.content = r.string(r.at(t, "content", where), where + ".content");
    token.special = r.boolean(t, "special", false, where);
    token.normalized = r.boolean(t, "normalized", !token.special, where);
    token.lstrip = r.boolean(t, "lstrip", false, where);
    token.rstrip = r.boolean(t, "rstrip", false, where);
    token.single_word = r.boolean(t, "single_word", false, where);
    out.push_back(std::move(token));
  }
  return out;
}

void check_model_options(const Reader& r, const Json& model, const std::string& source) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json& v = Reader::optional(model, key);
    if (!v.is_null() && !(v.is_string() && v.get_ref<const std::string&>().empty()))
      r.fail(cat("model.", key), "is not supported for byte-level BPE");
  }
  const Json& dropout = Reader::optional(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0))
    log_warning(source, ": model.dropout is ignored: encoding is deterministic");
}

BpeTokenizer::Parts read_parts(const Reader& r, const Json& root, const std::string& source) {
  r.object(root, "top level");
  const Json& model = r.object(r.at(root, "model", "top level"), "model");
  const Json& type = Reader::optional(model, "type");
  if (!type.is_null() && r.string(type, "model.type") != "BPE")
    r.fail("model.type", cat("unsupported model type '", type.get<std::string>(), "'"));
  check_model_options(r, model, source);

  BpeTokenizer::Parts parts;
  parts.normalizer = read_normalizer(r, Reader::optional(root, "normalizer"));
  parts.pre_tokenizer = read_pre_tokenizer(r, Reader::optional(root, "pre_tokenizer"));
  check_decoder(r, Reader::optional(root, "decoder"));
  check_post_processor(r, Reader::optional(root, "post_processor"), source);

  std::unordered_map<std::string, int32_t> vocab = read_vocab(r, model);
  parts.model.merges = read_merges(r, model, vocab);
  parts.model.ignore_merges = r.boolean(model, "ignore_merges", false, "model");
  const Json& unk = Reader::optional(model, "unk_token");
  if (!unk.is_null()) {
    const auto it = vocab.find(r.string(unk, "model.unk_token"));
    if (it == vocab.end())
      r.fail("model.unk_token", cat("\"", unk.get<std::string>(), "\" is not in the vocab"));
    parts.model.unk_id = it->second;
  } else {
    parts.model.unk_id = -1;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(tok::to_byte_level(std::string(1, static_cast<char>(b))));
    parts.model.byte_ids[b] = it == vocab.end() ? -1 : it->second;
  }
  parts.added_tokens = read_added_tokens(r, Reader::optional(root, "added_tokens"));

  int32_t max_id = -1;
  for (const auto& [_, id] : vocab) max_id = std::max(max_id, id);
  for (const auto& t : parts.added_tokens) max_id = std::max(max_id, t.id);
  // The id table holds a string per id: ids far beyond the number of tokens
  // the file defines would let a few bytes of JSON allocate gigabytes.
  const size_t tokens = vocab.size() + parts.added_tokens.size();
  if (max_id >= 0 && static_cast<size_t>(max_id) >= 2 * tokens + 1024)
    r.fail("model.vocab", cat("largest token id ", max_id, " is far beyond the ", tokens,
                              " tokens the file defines"));
  parts.token_bytes.assign(static_cast<size_t>(max_id + 1), std::string());
  std::vector<const std::string*> owner(parts.token_bytes.size(), nullptr);
  for (const auto& [spelling, id] : vocab) {
    if (owner[id] != nullptr)
      r.fail("model.vocab", cat("\"", *owner[id], "\" and \"", spelling, "\" share id ", id));
    owner[id] = &spelling;
    // A spelling outside the byte alphabet is its own UTF-8, as HF decodes it.
    std::optional<std::string> bytes = tok::from_byte_level(spelling);
    if (bytes && parts.model.ignore_merges) parts.model.word_ids.emplace(*bytes, id);
    parts.token_bytes[id] = bytes ? std::move(*bytes) : spelling;
  }
  for (const auto& t : parts.added_tokens) parts.token_bytes[t.id] = t.content;
  parts.spellings = std::move(vocab);
  for (const auto& t : parts.added_tokens) parts.spellings[t.content] = t.id;
  return parts;
}

}  // namespace

std::unique_ptr<Tokenizer> parse_tokenizer_json(const std::string& text,
                                                const std::string& source) {
  const Json root = parse_json(text, source);
  const Reader reader(source);
  try {
    return std::make_unique<BpeTokenizer>(read_parts(reader, root, source));
  } catch (const Json::exception& e) {
    // The reader checks types before use; this is the backstop.
    throw Error(cat(source, ": ", e.what()));
  }
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& path) {
  return parse_tokenizer_json(read_file(path), path.string());
}

}  // namespace ssm
