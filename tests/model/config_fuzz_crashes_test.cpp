// Config inputs the fuzz targets (fuzz/config_*_fuzz.cpp) once crashed on,
// kept in fuzz_crashes/ and fed exactly as the targets feed them, plus the
// bug each one showed written out as a plain test.
#include <gtest/gtest.h>

#include <filesystem>

#include "ssm/core/error.h"
#include "ssm/io/atomic_file.h"
#include "ssm/io/json.h"
#include "ssm/model/config.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

const fs::path kCrashDir = fs::path(SSM_GOLDEN_DIR).parent_path() / "model" / "fuzz_crashes";

// What fuzz/config_fuzz.h does before parse_model_config.
void feed(const std::string& text, bool force_hf) {
  Json j = parse_json(text, "config.json");
  if (j.is_object()) {
    if (force_hf) {
      j["model_type"] = "mamba2";
    } else {
      j.erase("hidden_size");
      j.erase("model_type");
    }
  }
  (void)parse_model_config(j, "config.json");
}

TEST(ConfigFuzzCrashes, EveryKeptInputParsesOrIsAnError) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kCrashDir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("config_", 0) != 0) continue;
    const bool hf = name.rfind("config_hf-", 0) == 0;
    try {
      feed(read_file(entry.path()), hf);
    } catch (const Error&) {
    }
    ++n;
  }
  EXPECT_GE(n, 2);
}

Json minimal_state_spaces() {
  return parse_json(R"({"d_model": 64, "n_layer": 2, "vocab_size": 256,
                        "ssm_cfg": {"layer": "Mamba2", "headdim": 16}})", "config.json");
}

void expect_error(const Json& j, const std::string& needle) {
  try {
    (void)parse_model_config(j, "config.json");
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Reading an absent attn_layer_idx went through const operator[] (undefined
// for a missing key; ASan saw a use after free).
TEST(ConfigFuzzCrashes, AbsentAttnLayerIdxIsAPureSsm) {
  const ModelConfig c = parse_model_config(minimal_state_spaces(), "config.json");
  EXPECT_TRUE(c.attn_layer_idx.empty());
  EXPECT_EQ(c.mixer_kind(0), MixerKind::kMamba2);
  EXPECT_EQ(c.mixer_kind(1), MixerKind::kMamba2);
}

// A float too large for int64 was cast before being checked (UBSan).
TEST(ConfigFuzzCrashes, HugeFloatIntegerIsAnError) {
  Json j = minimal_state_spaces();
  j["ssm_cfg"]["headdim"] = 1.46116860184273879046e20;
  expect_error(j, "'headdim'");
  j = minimal_state_spaces();
  j["d_model"] = 1e300;
  expect_error(j, "'d_model'");
}

// Sizes derived from huge values (expand * d_model) overflowed int64.
TEST(ConfigFuzzCrashes, HugeIntegersAreRefusedBeforeAnyProduct) {
  Json j = minimal_state_spaces();
  j["d_model"] = int64_t{1} << 62;
  j["ssm_cfg"]["expand"] = 4;
  expect_error(j, "'d_model'");
  j = minimal_state_spaces();
  j["vocab_size"] = uint64_t{18446744073709551615u};
  expect_error(j, "'vocab_size'");
  j = minimal_state_spaces();
  j["ssm_cfg"] = {{"layer", "Mamba3"}, {"headdim", 16}, {"is_mimo", true},
                  {"mimo_rank", 1 << 20}, {"ngroups", 1 << 20}};
  j["ssm_cfg"]["headdim"] = 1;
  j["d_model"] = 1 << 20;
  expect_error(j, "mimo_rank * ngroups");
}

// NaN passed the [0, 1] check and was cast to an integer (UBSan).
TEST(ConfigFuzzCrashes, NanRopeFractionIsAnError) {
  Json j = parse_json(R"({"d_model": 64, "n_layer": 1, "vocab_size": 256,
                          "ssm_cfg": {"layer": "Mamba3", "headdim": 16, "rope_fraction": NaN}})",
                      "config.json");
  expect_error(j, "rope_fraction");
}

TEST(ConfigFuzzCrashes, WholeFloatsStillCountAsIntegers) {
  Json j = minimal_state_spaces();
  j["d_model"] = 64.0;
  EXPECT_EQ(parse_model_config(j, "config.json").d_model, 64);
  j["d_model"] = 64.5;
  expect_error(j, "must be an integer");
  j["d_model"] = true;
  expect_error(j, "must be an integer");
}

}  // namespace
}  // namespace ssm
