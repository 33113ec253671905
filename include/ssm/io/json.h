// JSON as Python writes it: the literals Infinity, -Infinity and NaN outside
// strings are accepted (HF configs contain them) and read back as doubles.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "ssm/tensor/shape.h"

namespace ssm {

using Json = nlohmann::json;

// Throws ssm::Error naming `source` and the position on malformed input.
Json parse_json(const std::string& text, const std::string& source);
Json load_json_file(const std::filesystem::path& path);

// A number, also when written as Infinity / -Infinity / NaN.
bool json_is_number(const Json& value);
double json_number(const Json& value, const std::string& what);

// Shapes as JSON lists of integers; more than Shape::kMaxDims is an ssm::Error.
void to_json(Json& j, const Shape& shape);
void from_json(const Json& j, Shape& shape);

}  // namespace ssm
