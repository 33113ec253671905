// parse_model_config, Hugging Face convention (hidden_size, state_size, ...).
#include "config_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ssm::fuzz::fuzz_config(data, size, true);
}
