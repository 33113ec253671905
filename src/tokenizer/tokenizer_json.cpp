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
#include "ssm/tokenizer/utf8.h"
#include "tokenizer_json_reader.h"

namespace ssm {
namespace {

using tok_json::Reader;


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
      r.fail(cat("model.", key), "is not supported");
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
  parts.normalizer = tok_json::read_normalizer(r, Reader::optional(root, "normalizer"));
  tok_json::PreTokenizerRead pre = tok_json::read_pre_tokenizer(r, Reader::optional(root, "pre_tokenizer"));
  parts.pre_tokenizer = std::move(pre.pre_tokenizer);
  parts.decoder = tok_json::read_decoder(r, Reader::optional(root, "decoder"), pre.byte_level);
  if (parts.decoder.has_byte_level() && !pre.byte_level)
    r.fail("pre_tokenizer", "the decoder is ByteLevel but the pre-tokenizer has no ByteLevel step: "
                            "the vocab would be read as characters, not bytes");

  std::unordered_map<std::string, int32_t> vocab = read_vocab(r, model);
  parts.model.merges = read_merges(r, model, vocab);
  parts.model.ignore_merges = r.boolean(model, "ignore_merges", false, "model");
  parts.model.byte_level = pre.byte_level;
  parts.model.byte_fallback = r.boolean(model, "byte_fallback", false, "model");
  parts.model.fuse_unk = r.boolean(model, "fuse_unk", false, "model");
  if (pre.byte_level && parts.model.byte_fallback)
    r.fail("model.byte_fallback", "byte fallback with a ByteLevel pre-tokenizer: every byte already has a token");
  const Json& unk = Reader::optional(model, "unk_token");
  if (!unk.is_null()) {
    const auto it = vocab.find(r.string(unk, "model.unk_token"));
    if (it == vocab.end())
      r.fail("model.unk_token", cat("\"", unk.get<std::string>(), "\" is not in the vocab"));
    parts.model.unk_id = it->second;
  } else {
    parts.model.unk_id = -1;
  }
  parts.model.fallback_ids.fill(-1);
  if (pre.byte_level) {
    for (int b = 0; b < 256; ++b) {
      const auto it = vocab.find(tok::to_byte_level(std::string(1, static_cast<char>(b))));
      parts.model.byte_ids[b] = it == vocab.end() ? -1 : it->second;
    }
  } else {
    // SentencePiece-style: words start from characters, spelled as themselves.
    for (const auto& [spelling, id] : vocab) {
      const tok::Utf8Char c = tok::decode_utf8(spelling);
      if (c.length > 0 && c.length == spelling.size()) parts.model.char_ids.emplace(c.code_point, id);
      const int b = tok::byte_fallback_value(spelling);
      // HF looks up the upper-case spelling <0xNN> only.
      if (b >= 0 && spelling == cat("<0x", "0123456789ABCDEF"[b >> 4], "0123456789ABCDEF"[b & 15], ">"))
        parts.model.fallback_ids[b] = id;
    }
    parts.model.byte_ids.fill(-1);
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
  parts.token_strings.assign(static_cast<size_t>(max_id + 1), std::string());
  std::vector<const std::string*> owner(parts.token_strings.size(), nullptr);
  for (const auto& [spelling, id] : vocab) {
    if (owner[id] != nullptr)
      r.fail("model.vocab", cat("\"", *owner[id], "\" and \"", spelling, "\" share id ", id));
    owner[id] = &spelling;
    if (parts.model.ignore_merges) {
      // Words reach the model as raw bytes (byte-level) or as spelled.
      std::optional<std::string> bytes = pre.byte_level ? tok::from_byte_level(spelling) : spelling;
      if (bytes) parts.model.word_ids.emplace(*bytes, id);
    }
    parts.token_strings[id] = spelling;
  }
  for (const auto& t : parts.added_tokens) parts.token_strings[t.id] = t.content;
  parts.spellings = std::move(vocab);
  for (const auto& t : parts.added_tokens) parts.spellings[t.content] = t.id;
  const auto& spellings = parts.spellings;
  parts.post_processor = tok_json::read_post_processor(
      r, Reader::optional(root, "post_processor"), [&](const std::string& token, const std::string& where) {
        const auto it = spellings.find(token);
        if (it == spellings.end()) r.fail(where, cat("token \"", token, "\" is not in the vocab or added tokens"));
        return it->second;
      });
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
