// Typed access to tokenizer.json with errors that name the file and the
// JSON path ("tokenizer.json: decoder.decoders[2]: unsupported decoder type
// 'CTC'"), shared by the readers of the model and of the pipeline.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ssm/core/error.h"
#include "ssm/io/json.h"
#include "ssm/tokenizer/decoder.h"
#include "ssm/tokenizer/normalizer.h"
#include "ssm/tokenizer/post_processor.h"
#include "ssm/tokenizer/pre_tokenizer.h"

namespace ssm::tok_json {

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

// The pipeline around the model. byte_level: whether the pre-tokenizer has a
// ByteLevel step (and so the model starts from bytes).
tok::Normalizer read_normalizer(const Reader& r, const Json& j);
struct PreTokenizerRead {
  tok::PreTokenizer pre_tokenizer;
  bool byte_level = false;
};
PreTokenizerRead read_pre_tokenizer(const Reader& r, const Json& j);
tok::Decoder read_decoder(const Reader& r, const Json& j, bool byte_level);
// token_id: the id of a token spelled in the file, or a failure naming where.
tok::PostProcessor read_post_processor(const Reader& r, const Json& j,
                                       const std::function<int32_t(const std::string&, const std::string&)>& token_id);

}  // namespace ssm::tok_json
