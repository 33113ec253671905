// Training checkpoint inputs that crashed the fuzz target
// (fuzz/train_checkpoint_fuzz.cpp) or were crafted against its model, kept
// in fuzz_crashes/ and fed as the target feeds them.
//   train_checkpoint-float_steps  options {"steps": 1e300}: nlohmann's
//                                 unchecked float-to-int64 cast (UBSan)
#include <gtest/gtest.h>

#include <filesystem>

#include "../../fuzz/train_fuzz_model.h"
#include "ssm/core/error.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

const fs::path kCrashDir = fs::path(SSM_GOLDEN_DIR).parent_path() / "train" / "fuzz_crashes";

TEST(CheckpointFuzzCrashes, EveryKeptInputLoadsOrIsAnError) {
  LanguageModel model = fuzz::make_train_fuzz_model();
  const std::vector<int32_t> tokens = fuzz::train_fuzz_tokens();
  Context ctx(1);
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kCrashDir)) {
    if (entry.path().filename().string().rfind("train_checkpoint-", 0) != 0) continue;
    try {
      (void)read_checkpoint_options(entry.path());
    } catch (const Error&) {
    }
    try {
      Trainer trainer(model, tokens, fuzz::train_fuzz_options(), ctx);
      trainer.load_checkpoint(entry.path());
    } catch (const Error&) {
    }
    ++n;
  }
  EXPECT_GE(n, 1);
}

TEST(CheckpointFuzzCrashes, FloatWhereAnIntegerBelongsIsAnError) {
  try {
    (void)read_checkpoint_options(kCrashDir / "train_checkpoint-float_steps");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'steps' must be an integer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssm
