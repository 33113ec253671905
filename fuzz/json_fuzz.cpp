// parse_json (JSON plus Python's Infinity, -Infinity and NaN) against plain
// nlohmann parsing: on text that is valid JSON the literals can only occur
// inside strings, so both must agree exactly.
#include "fuzz_support.h"
#include "ssm/io/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  const std::string text(reinterpret_cast<const char*>(data), size);
  ssm::Json plain;
  bool plain_ok = true;
  try {
    plain = ssm::Json::parse(text);
  } catch (const ssm::Json::exception&) {
    plain_ok = false;
  }
  try {
    const ssm::Json ours = ssm::parse_json(text, "fuzz.json");
    if (plain_ok && ours != plain) std::abort();
    if (ours.is_number()) (void)ssm::json_number(ours, "value");
  } catch (const ssm::Error&) {
    if (plain_ok) std::abort();  // valid JSON refused
  }
  return 0;
}
