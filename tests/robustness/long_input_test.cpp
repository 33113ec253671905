// Long inputs are processed in bounded pieces: the memory a forward pass
// takes grows linearly with the length (chunked SSD scan, attention over
// blocks of queries), never with its square. Measured as the peak resident
// memory a forked child adds, at two lengths four times apart.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>

#include "bounded.h"
#include "ssm/model/language_model.h"
#include "support/compare.h"

namespace ssm::testing {
namespace {

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Peak resident bytes a forward pass of length L adds, in a fresh child.
double forward_peak_bytes(const std::string& model_name, int64_t L) {
  const ChildResult r = run_in_child([&](int fd) {
    LanguageModel model = LanguageModel::load(golden_dir(model_name));
    Context ctx(1);
    auto ids_of = [](int64_t len) {
      Tensor ids = Tensor::zeros(DType::kI64, {1, len});
      for (int64_t i = 0; i < len; ++i) ids.data<int64_t>()[i] = (i * 31) % 200;
      return ids;
    };
    (void)model.forward(ids_of(64), nullptr, ctx);  // libraries' own buffers
    const Tensor ids = ids_of(L);
    const uint64_t before = resident_bytes();
    (void)model.forward(ids, nullptr, ctx);
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    const uint64_t peak = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
    report(fd, std::to_string(peak > before ? peak - before : 0));
    return 0;
  });
  EXPECT_EQ(r.code, 0);
  return std::stod(r.message);
}

void expect_linear(const std::string& model, int64_t L) {
#ifdef SSM_TEST_UNDER_ASAN
  GTEST_SKIP() << "ASan's quarantine keeps freed memory resident";
#endif
  const double short_run = forward_peak_bytes(model, L), long_run = forward_peak_bytes(model, 4 * L);
  std::printf("%s: forward of %lld tokens adds %.1f MiB, of %lld tokens %.1f MiB (x%.2f)\n",
              model.c_str(), static_cast<long long>(L), short_run / (1 << 20),
              static_cast<long long>(4 * L), long_run / (1 << 20), long_run / short_run);
  // Linear growth is x4; quadratic would be x16.
  EXPECT_LT(long_run, 6 * short_run);
  EXPECT_GT(long_run, 2 * short_run);  // the measurement sees the activations at all
}

TEST(LongInput, Mamba2MemoryIsLinearInLength) { expect_linear("mamba2_ssm_tiny", 8192); }
TEST(LongInput, Mamba3MemoryIsLinearInLength) { expect_linear("mamba3_mimo_tiny", 8192); }
TEST(LongInput, HybridWithAttentionMemoryIsLinearInLength) { expect_linear("hybrid_tiny", 2048); }

}  // namespace
}  // namespace ssm::testing
