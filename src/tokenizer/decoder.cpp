#include "ssm/tokenizer/decoder.h"

#include "ssm/tokenizer/byte_level.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm::tok {
namespace {

using Tokens = std::vector<std::string>;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string replace_all(std::string_view text, const std::string& from, const std::string& to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t done = 0;
  for (size_t at; (at = text.find(from, done)) != std::string_view::npos; done = at + from.size()) {
    out.append(text.substr(done, at - done));
    out.append(to);
  }
  out.append(text.substr(done));
  return out;
}

void byte_fallback(Tokens& tokens) {
  Tokens out;
  out.reserve(tokens.size());
  std::string run;
  auto flush = [&] {
    if (run.empty()) return;
    if (valid_utf8_prefix(run) == run.size()) {
      out.push_back(std::move(run));
    } else {
      for (size_t i = 0; i < run.size(); ++i) out.emplace_back("\xef\xbf\xbd");  // U+FFFD
    }
    run.clear();
  };
  for (std::string& t : tokens) {
    const int b = byte_fallback_value(t);
    if (b >= 0) {
      run += static_cast<char>(b);
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  tokens.swap(out);
}

// Length of the character ending at end (an invalid byte counts as one).
size_t char_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 4 && n <= end; ++n)
    if (decode_utf8(s.substr(end - n, n)).length == n) return n;
  return 1;
}

// Only the ends are looked at: Strip runs over the whole fused text.
void strip(Tokens& tokens, const DecoderStep& step) {
  const std::string_view c = step.content;
  for (std::string& t : tokens) {
    const std::string_view v = t;
    size_t begin = 0;
    for (size_t n = 0; n < step.start && v.substr(begin).starts_with(c); ++n) begin += c.size();
    size_t end = v.size();
    for (size_t n = 0; n < step.stop && end > begin && char_before(v, end) == c.size() &&
                       v.substr(0, end).ends_with(c);
         ++n)
      end -= c.size();
    if (begin == 0 && end == v.size()) continue;
    t = t.substr(begin, end - begin);
  }
}

void metaspace(Tokens& tokens, const DecoderStep& step) {
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = replace_all(tokens[i], step.pattern, i == 0 && step.prepend ? "" : " ");
}

// One string, as HF's ByteLevel decoder returns. HF then replaces invalid
// UTF-8 with U+FFFD; the bytes are kept as they are here, so that the text
// of a byte-level stream is exactly the model's bytes.
void byte_level(Tokens& tokens) {
  std::string all;
  for (const std::string& t : tokens) {
    // A token outside the alphabet (an added token) stands for its own UTF-8.
    if (std::optional<std::string> bytes = from_byte_level(t))
      all += *bytes;
    else
      all += t;
  }
  tokens.assign(1, std::move(all));
}

void apply(const DecoderStep& step, Tokens& tokens) {
  switch (step.kind) {
    case DecoderStep::Kind::kReplace:
      for (std::string& t : tokens)
        if (!step.pattern.empty() && t.find(step.pattern) != std::string::npos)
          t = replace_all(t, step.pattern, step.content);
      break;
    case DecoderStep::Kind::kByteFallback:
      byte_fallback(tokens);
      break;
    case DecoderStep::Kind::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case DecoderStep::Kind::kStrip:
      strip(tokens, step);
      break;
    case DecoderStep::Kind::kMetaspace:
      metaspace(tokens, step);
      break;
    case DecoderStep::Kind::kByteLevel:
      byte_level(tokens);
      break;
  }
}

}  // namespace

int byte_fallback_value(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  // Rust's u8::from_str_radix also takes a leading '+'.
  if (t[3] == '+') return hex_value(t[4]);
  const int hi = hex_value(t[3]);
  const int lo = hex_value(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

Decoder::Decoder(std::vector<DecoderStep> steps) : steps_(std::move(steps)) {
  for (const DecoderStep& s : steps_)
    if (s.kind != DecoderStep::Kind::kByteLevel) concatenates_ = false;
}

std::string Decoder::decode(const std::vector<std::string_view>& tokens) const {
  Tokens list(tokens.begin(), tokens.end());
  for (const DecoderStep& step : steps_) apply(step, list);
  std::string out;
  for (const std::string& t : list) out += t;
  return out;
}

std::string Decoder::token_bytes(std::string_view token) const {
  Tokens list(1, std::string(token));
  for (const DecoderStep& step : steps_) {
    if (step.kind == DecoderStep::Kind::kStrip) continue;
    if (step.kind == DecoderStep::Kind::kMetaspace) {
      list[0] = replace_all(list[0], step.pattern, " ");
      continue;
    }
    if (step.kind == DecoderStep::Kind::kByteFallback) {
      const int b = byte_fallback_value(list[0]);
      if (b >= 0) list[0] = std::string(1, static_cast<char>(b));
      continue;
    }
    apply(step, list);
  }
  return list.empty() ? std::string() : list[0];
}

}  // namespace ssm::tok
