#include "ssm/tokenizer/tokenizer.h"

#include "ssm/core/error.h"
#include "ssm/core/log.h"
#include "ssm/io/json.h"

namespace ssm {
namespace {

// Byte-level models read bytes directly: id b is byte b.
class RawBytesTokenizer final : public Tokenizer {
 public:
  RawBytesTokenizer() {
    for (int b = 0; b < 256; ++b) bytes_[b] = static_cast<char>(b);
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<uint8_t>(text[i]);
    return ids;
  }
  std::string_view token_bytes(int32_t id) const override {
    if (id < 0 || id >= 256) return {};
    return {&bytes_[id], 1};
  }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (token.size() != 1) return std::nullopt;
    return static_cast<uint8_t>(token[0]);
  }
  int32_t vocab_size() const override { return 256; }
  bool is_special(int32_t) const override { return false; }

 private:
  char bytes_[256];
};

}  // namespace

std::string Tokenizer::decode_ids(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (const int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    out += token_bytes(id);
  }
  return out;
}

std::unique_ptr<Tokenizer> make_raw_bytes_tokenizer() {
  return std::make_unique<RawBytesTokenizer>();
}

namespace {

// A model without tokenizer.json reads raw bytes only when its config.json
// says it is byte-level: a vocabulary of at most 256 ids, or "tokenizer":
// "bytes". Any other vocabulary read as bytes would give wrong ids silently.
std::unique_ptr<Tokenizer> byte_level_or_error(const std::filesystem::path& dir) {
  const std::filesystem::path config = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config, ec))
    throw Error(cat(dir.string(), ": no tokenizer.json and no config.json (not a model directory)"));
  const Json j = load_json_file(config);
  if (j.contains("tokenizer") && j["tokenizer"] == "bytes") return make_raw_bytes_tokenizer();
  if (j.contains("vocab_size") && j["vocab_size"].is_number_integer() && j["vocab_size"].get<int64_t>() <= 256)
    return make_raw_bytes_tokenizer();
  throw Error(cat(dir.string(), ": no tokenizer.json, and config.json does not say the model is byte-level ",
                  "(vocab_size ", j.contains("vocab_size") ? j["vocab_size"].dump() : "missing",
                  " > 256 and no \"tokenizer\": \"bytes\"); put the model's tokenizer.json beside it"));
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_for_model(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const std::filesystem::path file = path / "tokenizer.json";
    if (std::filesystem::exists(file, ec)) return load_tokenizer_json(file);
    std::unique_ptr<Tokenizer> bytes = byte_level_or_error(path);
    log_info(path.string(), ": no tokenizer.json, using the raw-bytes tokenizer");
    return bytes;
  }
  if (!std::filesystem::exists(path, ec))
    throw Error(cat(path.string(), ": no such model directory or tokenizer file"));
  return load_tokenizer_json(path);
}

}  // namespace ssm
