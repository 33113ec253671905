// parse_model_config, state-spaces convention (d_model, ssm_cfg, attn_cfg).
#include "config_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ssm::fuzz::fuzz_config(data, size, false);
}
