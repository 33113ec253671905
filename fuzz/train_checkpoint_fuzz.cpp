// Training checkpoints on arbitrary bytes: read_checkpoint_options and
// Trainer::load_checkpoint (the safetensors file, its metadata, the options
// JSON, the sampler state, the tensor table against the model and the
// optimizer, the checksum). A fresh trainer per input keeps runs independent.
#include "fuzz_support.h"
#include "train_fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ssm::fuzz::silence_logging();
  static ssm::LanguageModel model = ssm::fuzz::make_train_fuzz_model();
  static const std::vector<int32_t> tokens = ssm::fuzz::train_fuzz_tokens();
  static ssm::Context ctx(1);
  static ssm::fuzz::MemFile file("checkpoint.safetensors");
  const std::filesystem::path& path = file.write(data, size);
  try {
    (void)ssm::read_checkpoint_options(path);
  } catch (const ssm::Error&) {
  }
  try {
    ssm::Trainer trainer(model, tokens, ssm::fuzz::train_fuzz_options(), ctx);
    trainer.load_checkpoint(path);
    if (trainer.steps_done() < 0) std::abort();
  } catch (const ssm::Error&) {
  }
  return 0;
}
