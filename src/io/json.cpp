#include "ssm/io/json.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ssm/core/error.h"
#include "ssm/io/atomic_file.h"

namespace ssm {
namespace {

// The three literals become marker strings, which no real config value uses.
constexpr const char* kPosInf = "\x01ssm:+inf";
constexpr const char* kNegInf = "\x01ssm:-inf";
constexpr const char* kNaN = "\x01ssm:nan";

std::string quote_python_literals(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    auto starts = [&](const char* word) { return text.compare(i, std::strlen(word), word) == 0; };
    if (starts("-Infinity")) {
      out += Json(kNegInf).dump();
      i += 8;
    } else if (starts("Infinity")) {
      out += Json(kPosInf).dump();
      i += 7;
    } else if (starts("NaN")) {
      out += Json(kNaN).dump();
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Json parse_json(const std::string& text, const std::string& source) {
  try {
    return Json::parse(quote_python_literals(text));
  } catch (const Json::exception& e) {
    throw Error(cat(source, ": malformed JSON: ", e.what()));
  }
}

Json load_json_file(const std::filesystem::path& path) {
  return parse_json(read_file(path), path.string());
}

bool json_is_number(const Json& value) {
  if (value.is_number()) return true;
  if (!value.is_string()) return false;
  const auto& s = value.get_ref<const std::string&>();
  return s == kPosInf || s == kNegInf || s == kNaN;
}

double json_number(const Json& value, const std::string& what) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (s == kPosInf) return std::numeric_limits<double>::infinity();
    if (s == kNegInf) return -std::numeric_limits<double>::infinity();
    if (s == kNaN) return std::numeric_limits<double>::quiet_NaN();
  }
  // transformers 5 writes non-finite floats as {"__float__": "Infinity"}.
  if (value.is_object() && value.size() == 1 && value.contains("__float__") &&
      value["__float__"].is_string()) {
    const auto& s = value["__float__"].get_ref<const std::string&>();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  throw Error(cat(what, ": expected a number, got ", value.dump()));
}

void to_json(Json& j, const Shape& shape) { j = std::vector<int64_t>(shape.begin(), shape.end()); }

void from_json(const Json& j, Shape& shape) {
  const auto dims = j.get<std::vector<int64_t>>();
  shape = Shape(dims.begin(), dims.end());
}

}  // namespace ssm
