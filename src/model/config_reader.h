// Reading config.json values with errors that name the file and the key,
// shared by the parsers of each checkpoint convention and HF family.
#pragma once

#include <cmath>
#include <set>
#include <string>

#include "ssm/core/error.h"
#include "ssm/core/log.h"
#include "ssm/io/json.h"
#include "ssm/layers/mixer_config.h"

namespace ssm::config_detail {

// No real model comes near this; it keeps every size derived from a config
// (products of two or three values) far from int64 overflow.
constexpr int64_t kMaxConfigInteger = int64_t{1} << 24;

// Reads typed values out of one JSON object, naming source and key in errors.
class Reader {
 public:
  Reader(const Json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) throw Error(cat(where_, ": expected a JSON object"));
  }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int64_t integer(const char* key, int64_t fallback, bool required = false) {
    seen_.insert(key);
    if (!has(key)) return missing(key, fallback, required);
    const Json& v = j_[key];
    // Whole floats (64.0) count too; the range is checked before any cast.
    const double d = v.is_number() ? v.get<double>() : 0.5;
    if (d != std::floor(d))
      throw Error(cat(where_, ": key '", key, "' must be an integer, got ", v.dump()));
    if (std::fabs(d) > static_cast<double>(kMaxConfigInteger))
      throw Error(cat(where_, ": key '", key, "' is ", v.dump(), ", outside [-", kMaxConfigInteger,
                      ", ", kMaxConfigInteger, "]"));
    return static_cast<int64_t>(d);
  }
  int64_t positive(const char* key, int64_t fallback, bool required = false) {
    const int64_t v = integer(key, fallback, required);
    if (v <= 0) throw Error(cat(where_, ": key '", key, "' must be positive, got ", v));
    return v;
  }
  double number(const char* key, double fallback) {
    seen_.insert(key);
    if (!has(key)) return fallback;
    return json_number(j_[key], cat(where_, ": key '", key, "'"));
  }
  bool boolean(const char* key, bool fallback) {
    seen_.insert(key);
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) throw Error(cat(where_, ": key '", key, "' must be true or false"));
    return j_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) {
    seen_.insert(key);
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) throw Error(cat(where_, ": key '", key, "' must be a string"));
    return j_[key].get<std::string>();
  }
  const Json& object(const char* key) {
    seen_.insert(key);
    static const Json kEmpty = Json::object();
    if (!has(key)) return kEmpty;
    if (!j_[key].is_object()) throw Error(cat(where_, ": key '", key, "' must be an object"));
    return j_[key];
  }
  // null when absent (operator[] of a const json is undefined for a missing key).
  const Json& raw(const char* key) {
    seen_.insert(key);
    static const Json kNull;
    const auto it = j_.find(key);
    return it == j_.end() ? kNull : *it;
  }
  void ignore(std::initializer_list<const char*> keys) { seen_.insert(keys.begin(), keys.end()); }
  // Keys nobody read: almost always a typo or an unsupported feature.
  void warn_unknown() const {
    for (const auto& [k, _] : j_.items())
      if (!seen_.count(k)) log_warning(where_, ": ignoring unknown key '", k, "'");
  }
  const std::string& where() const { return where_; }

 private:
  int64_t missing(const char* key, int64_t fallback, bool required) const {
    if (required) throw Error(cat(where_, ": missing required key '", key, "'"));
    return fallback;
  }
  const Json& j_;
  std::string where_;
  std::set<std::string> seen_;
};

inline void check_divides(const std::string& where, const char* what, int64_t a, const char* by, int64_t b) {
  if (b <= 0 || a % b != 0)
    throw Error(cat(where, ": ", what, " (", a, ") is not divisible by ", by, " (", b, ")"));
}

inline void validate_mamba2(const Mamba2Config& c, const std::string& where) {
  check_divides(where, "d_inner = expand * d_model", c.d_inner(), "headdim", c.headdim);
  check_divides(where, "nheads", c.nheads(), "ngroups", c.ngroups);
  if (c.dt_limit_lo > c.dt_limit_hi) throw Error(cat(where, ": dt_limit lower bound exceeds upper"));
}

}  // namespace ssm::config_detail
