#include "ssm/model/memory_budget.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "ssm/model/language_model.h"

namespace ssm {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t sat_add(uint64_t a, uint64_t b) { return a > kMax - b ? kMax : a + b; }
uint64_t sat_mul(uint64_t a, uint64_t b) { return (b != 0 && a > kMax / b) ? kMax : a * b; }
uint64_t nonneg(int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }

// What a parameter of this shape takes in dtype; Q8 adds its F32 scale per
// row (the last dimension is a row).
uint64_t param_bytes(const Shape& shape, DType dtype) {
  uint64_t n = 1;
  for (int64_t d : shape) n = sat_mul(n, nonneg(d));
  const uint64_t rows = shape.empty() || shape.back() <= 0 ? 0 : n / static_cast<uint64_t>(shape.back());
  return sat_add(sat_mul(n, dtype_size(dtype)), dtype == DType::kQ8 ? sat_mul(rows, sizeof(float)) : 0);
}

}  // namespace

uint64_t parse_memory_size(const std::string& text) {
  auto bad = [&] {
    return Error(cat("memory size '", text, "' is not a positive byte count such as 2G, 512M or 1.5GiB"));
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  if (number.empty() || number.find('.') != number.rfind('.') || number == ".") throw bad();
  std::string suffix;
  for (size_t j = i; j < text.size(); ++j) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[j])));
  int shift = 0;
  if (!suffix.empty()) {
    const std::string units = "KMGT";
    const size_t u = units.find(suffix[0]);
    if (u != std::string::npos) {
      shift = 10 * static_cast<int>(u + 1);
      suffix.erase(0, 1);
      if (suffix == "IB" || suffix == "B") suffix.clear();
    } else if (suffix == "B") {
      suffix.clear();
    }
  }
  if (!suffix.empty()) throw bad();
  const long double bytes = std::strtold(number.c_str(), nullptr) * std::ldexp(1.0L, shift);
  if (!(bytes >= 1) || bytes >= std::ldexp(1.0L, 64)) throw bad();
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return sat_mul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page));
}

uint64_t memory_limit(const LoadOptions& options) {
  if (options.max_memory != 0) return options.max_memory;
  const uint64_t physical = physical_memory_bytes();
  return physical != 0 ? physical : kMax;
}

uint64_t min_model_bytes(const ModelConfig& c) {
  const uint64_t D = nonneg(c.d_model);
  const uint64_t vocab = nonneg(c.vocab_size);
  // Every layer has at least its pre-norm weight; the final norm; one or two
  // vocab x D matrices.
  uint64_t n = sat_mul(sat_mul(vocab, D), c.tie_embeddings ? 4 : 8);
  n = sat_add(n, sat_mul(nonneg(c.n_layer), sat_add(sat_mul(D, 4), kLayerOverheadBytes)));
  return sat_add(n, sat_mul(D, 4));
}

uint64_t model_memory_bytes(LanguageModel& model, DType projections) {
  uint64_t n = sat_mul(nonneg(model.n_layer()), kLayerOverheadBytes);
  model.for_each_param([&](const std::string&, Param& p) {
    const bool projection = p.role == ParamRole::kWeight && p.shape.size() == 2;
    n = sat_add(n, param_bytes(p.shape, projection ? projections : DType::kF32));
  });
  return n;
}

uint64_t kv_cache_bytes_per_token(const ModelConfig& c) {
  const uint64_t per_layer = sat_mul(sat_mul(2 * sizeof(float), nonneg(c.attention.num_heads_kv)),
                                     nonneg(c.attention.head_dim));
  return sat_mul(per_layer, c.attn_layer_idx.size());
}

void check_memory_budget(uint64_t needed, uint64_t limit, const std::string& what) {
  if (needed <= limit) return;
  throw Error(cat(what, ": the model needs at least ", needed == kMax ? "more than 16 EiB" : format_bytes(needed),
                  " (its parameters) but the memory limit is ", format_bytes(limit),
                  "; raise it with --max-memory if the machine has room"));
}

}  // namespace ssm
