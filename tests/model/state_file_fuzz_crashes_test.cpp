// State file inputs the fuzz target (fuzz/state_file_fuzz.cpp) crashed on
// or that were crafted against its model, kept in fuzz_crashes/ and fed as
// the target feeds them: each must now load or fail with ssm::Error.
//   state_file-ce3ebba3       (fuzzer) a batch sized make_session's allocation
//   state_file-batch_1e12     a batch of 10^12 sequences
//   state_file-kv_2to32       a KV cache of 2^32 tokens
//   state_file-float_position a float where an integer belongs (UBSan: cast)
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

#include "../../fuzz/state_fuzz_model.h"
#include "ssm/core/error.h"
#include "ssm/io/atomic_file.h"
#include "ssm/model/state_file.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

const fs::path kCrashDir = fs::path(SSM_GOLDEN_DIR).parent_path() / "model" / "fuzz_crashes";

// The target's input: a flag byte (odd: fix the length and crc32), then the file.
std::string as_target_feeds(const std::string& input) {
  std::string bytes = input.substr(1);
  if ((input[0] & 1) && bytes.size() >= 28) {
    const uint64_t n = bytes.size();
    for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
    const auto crc = static_cast<uint32_t>(
        crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()), n - 4));
    for (int i = 0; i < 4; ++i) bytes[n - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  }
  return bytes;
}

TEST(StateFileFuzzCrashes, EveryKeptInputLoadsOrIsAnError) {
  const LanguageModel model = fuzz::make_state_fuzz_model();
  testing::TempDir dir;
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kCrashDir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("state_file-", 0) != 0) continue;
    const std::string input = read_file(entry.path());
    ASSERT_FALSE(input.empty()) << name;
    testing::write_bytes(dir / "s.state", as_target_feeds(input));
    try {
      (void)load_state(dir / "s.state", model, fuzz::kStateFingerprint);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("s.state"), std::string::npos) << e.what();
    }
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(StateFileFuzzCrashes, FloatInHeaderIsCorruption) {
  const LanguageModel model = fuzz::make_state_fuzz_model();
  testing::TempDir dir;
  testing::write_bytes(dir / "s.state", as_target_feeds(read_file(kCrashDir / "state_file-float_position")));
  try {
    (void)load_state(dir / "s.state", model, fuzz::kStateFingerprint);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-integer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssm
