#include "cli/bench_bounds.h"

#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)  // (features.h, from the line above)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/cpu/vec_math.h"
#include "ops/cpu/x86_kernels.h"
#include "ssm/core/thread_pool.h"

namespace ssm::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

uint64_t read_buffer_bytes() {
  uint64_t bytes = uint64_t{256} << 20;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) bytes = std::max(bytes, 2 * static_cast<uint64_t>(l3));
#endif
  return bytes;
}

double measure_read_gbs(int threads, uint64_t bytes) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.f);
  ThreadPool pool(threads);
  const int64_t blocks = int64_t{threads} * 8;
  std::vector<double> partial(static_cast<size_t>(blocks));
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(blocks, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const size_t lo = n * i / blocks, hi = n * (i + 1) / blocks;
        // A vectorised kernel of the engine's (max_of, Highway's widest
        // target here): the plain loop, compiled for the build's SSE2
        // baseline, was bound by its instructions, not the memory (22 GB/s
        // against 33 for AVX-512 loads, two threads of the Intel host of
        // 2026-12-07), a bound the decode rows then beat.
        const double t = cpu::max_of(a.data() + lo, static_cast<int64_t>(hi - lo));
        partial[static_cast<size_t>(i)] = t;
      }
    });
    const double dt = seconds_since(t0);
    // Stored where the compiler must assume it is read: keeps the maxima live.
    static volatile double sink;
    for (double p : partial) sink = sink + p;
    best = std::max(best, static_cast<double>(n * sizeof(float)) / dt / 1e9);
  }
  return best;
}

double measure_sgemm_gflops(int threads, int64_t M, int64_t N, int64_t K) {
  openblas_set_num_threads(1);
  std::vector<float> A(static_cast<size_t>(M * K), 0.5f), B(static_cast<size_t>(N * K), 0.25f),
      C(static_cast<size_t>(M * N));
  ThreadPool pool(threads);
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(threads, [&](int64_t t0_, int64_t t1_) {
      for (int64_t t = t0_; t < t1_; ++t) {
        const int64_t m0 = M * t / threads, m1 = M * (t + 1) / threads;
        if (m1 > m0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m1 - m0),
                      static_cast<blasint>(N), static_cast<blasint>(K), 1.f, A.data() + m0 * K,
                      static_cast<blasint>(K), B.data(), static_cast<blasint>(K), 0.f,
                      C.data() + m0 * N, static_cast<blasint>(N));
      }
    });
    best = std::max(best, 2.0 * static_cast<double>(M * N) * static_cast<double>(K) / seconds_since(t0) / 1e9);
  }
  return best;
}

std::string blas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string blas_core_note(const std::string& core) {
  static constexpr std::string_view kAvx512Cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  if (!cpu::cpu_has_avx512() || core.empty()) return "";
  for (std::string_view c : kAvx512Cores)
    if (core == c) return "";
  return "OpenBLAS runs its " + core +
         " kernels on this AVX-512 CPU (it does not know the CPU), so the SGEMM bound is theirs: "
         "OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 kernels";
}

ModelCosts model_costs(LanguageModel& model) {
  const ModelConfig& c = model.config();
  ModelCosts costs;
  model.for_each_param([&](const std::string& name, Param& p) {
    const Tensor& v = p.value;
    double bytes = static_cast<double>(v.nbytes());
    if (v.dtype() == DType::kQ8) bytes += static_cast<double>(v.scales().nbytes());
    const bool is_head_table = name == c.embedding_name() || name == "lm_head.weight";
    if (is_head_table && c.tie_embeddings)
      bytes *= static_cast<double>(c.vocab_size) / static_cast<double>(p.shape[0]);
    costs.decode_bytes_per_token += bytes;
    if (p.shape.size() == 2 && p.role == ParamRole::kWeight && !is_head_table)
      costs.prefill_flops_per_token += 2.0 * static_cast<double>(shape_numel(p.shape));
    if (costs.in_proj_out == 0 && ends_with(name, "in_proj.weight")) {
      costs.in_proj_out = p.shape[0];
      costs.in_proj_in = p.shape[1];
    }
  });
  ModelState state = model.make_state(1);
  for (auto& layer : state.layers)
    if (layer)
      for (auto& [name, t] : layer->tensors())
        costs.state_bytes_per_sequence += static_cast<double>(t->nbytes());
  return costs;
}

bool reset_peak_rss() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  return static_cast<bool>(f.flush());
}

uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // kB
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

}  // namespace ssm::cli
