// ssm bench MODEL: prefill (-p tokens) and decode (-n steps) tokens/s, mean
// ± deviation over -r repetitions, for each batch size, thread count and
// weight dtype asked for, with the peak memory of each dtype and, measured
// in the same run, the bounds the results are a fraction of (the host's,
// bench_bounds.h; a device backend's, on its device, device_bounds.h). The
// backend is any the registry has; the timed code is the model's own
// forward and step, on the backend's device, so a device backend is
// benchmarked the same way.
#include <algorithm>
#include <thread>

#include "cli/bench_bounds.h"
#include "cli/bench_report.h"
#include "cli/bench_row_bound.h"
#include "cli/bench_train.h"
#include "cli/commands.h"
#include "cli/device_bounds.h"
#include "cli/interrupt.h"
#include "ops/cpu/lowp_linear.h"
#include "ssm/ops/backend.h"

namespace ssm::cli {
namespace {

// A prefill holds activations for batch x prompt tokens at once.
constexpr int64_t kMaxPrefillTokens = int64_t{1} << 22;
// A device's copy bound moves this many bytes (each way): far more than a
// GPU's L2 cache.
constexpr uint64_t kDeviceCopyBytes = uint64_t{1} << 30;

struct BenchArgs {
  std::string model;
  int64_t prompt = 512, decode = 128;
  int repetitions = 3;
  std::vector<int64_t> batches = {1};
  std::vector<int> threads;
  std::vector<std::string> dtypes = {"auto"};
  ComputeOptions compute;
  bool json = false;
  bool train = false, bf16 = false;  // --train: training steps (bench_train.h)
  int train_steps = 5;
};

std::string architecture(const ModelConfig& c) {
  std::string kind = c.ssm_kind == MixerKind::kMamba2   ? "mamba2"
                     : c.ssm_kind == MixerKind::kMamba1 ? "mamba1"
                     : c.mamba3.is_mimo                 ? cat("mamba3 mimo R=", c.mamba3.rank())
                                                        : "mamba3";
  if (!c.attn_layer_idx.empty()) kind += cat(" + ", c.attn_layer_idx.size(), " attention");
  return cat(kind, ", ", c.n_layer, " layers, d_model ", c.d_model, ", vocabulary ", c.vocab_size);
}

void check_args(const BenchArgs& a) {
  if (a.prompt == 0 && a.decode == 0) throw UsageError("-p 0 and -n 0 leave nothing to measure");
  for (int64_t b : a.batches)
    if (b * a.prompt > kMaxPrefillTokens)
      throw UsageError(cat("--batch ", b, " x -p ", a.prompt, " is ", b * a.prompt,
                           " tokens in one prefill, more than ", kMaxPrefillTokens));
}

// The streaming read measured beside a decode row on the host, left out of
// the dtype's peak memory: the peak so far is kept in `peak`, and the peak
// restarts after the read's buffer is freed.
double read_gbs_beside_row(int threads, uint64_t& peak) {
  uint64_t now = 0, capacity = 0;
  memory_use(Device::host(), &now, &capacity);
  peak = std::max(peak, now);
  const double gbs = measure_read_gbs(threads, read_buffer_bytes());
  reset_memory_peak(Device::host());
  return gbs;
}

// Rows of one dtype: every (threads, batch) case, prefill then decode. The
// model is loaded and put on the backend's device once; its peak memory is
// the device's tensors' on a device, the process's resident set on the host.
// On the host each case with decode steps is bracketed by two streaming
// reads, which its decode row's bound is taken from.
void bench_dtype(const BenchArgs& a, const std::string& dtype, BenchReport& report,
                 const InterruptCatcher& interrupt) {
  const Device device = find_backend(a.compute.backend).device();
  reset_memory_peak(device);
  ComputeOptions compute = a.compute;
  compute.dtype = dtype;
  LanguageModel model = LanguageModel::load(a.model, load_options(compute));
  const uint64_t limit = memory_limit(load_options(compute));
  const int64_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  check_memory_budget(model_memory_bytes(model, model.projection_dtype()) + kv_cache_bytes_per_token(model.config()) *
                                                      static_cast<uint64_t>(max_batch * (a.prompt + a.decode)),
                      limit, a.model);
  model.to_device(device);  // a no-op on the host
  const ModelCosts costs = model_costs(model);
  // Rows name the dtype measured: auto's pick, not "auto".
  const std::string label = weight_dtype_name(model.projection_dtype());
  if (report.parameters == 0) {
    report.parameters = model.parameter_count();
    report.architecture = architecture(model.config());
  }
  const size_t first = report.rows.size();
  const bool read_beside = device == Device::host() && a.decode > 0;
  uint64_t peak = 0, capacity = 0;  // the peak before the last read beside a row
  for (size_t ti = 0; ti < a.threads.size(); ++ti) {
    Context ctx(a.compute.backend, a.threads[ti]);
    const BenchBounds& bounds = report.bounds[ti];
    for (int64_t batch : a.batches) {
      if (interrupt.requested()) return;
      const BenchCase c{.batch = batch, .prompt = a.prompt, .decode = a.decode, .repetitions = a.repetitions};
      double read_before = 0, read_after = 0;  // the decode row's own reads
      if (read_beside) read_before = read_gbs_beside_row(a.threads[ti], peak);
      BenchTimes t;
      try {
        t = run_bench_case(model, ctx, c, &interrupt.flag());
      } catch (const Error& e) {
        // Which dtype a backend refused (cuda has no int8 projections).
        throw Error(cat("--dtype ", label, " on backend '", a.compute.backend, "': ", e.what()));
      }
      if (read_beside && !interrupt.requested()) read_after = read_gbs_beside_row(a.threads[ti], peak);
      BenchRow row{.dtype = label,
                   .state_dtype = a.compute.state_dtype == "f32" ? "" : a.compute.state_dtype,
                   .threads = a.threads[ti],
                   .batch = batch};
      if (a.prompt > 0 && !t.prefill.empty()) {
        row.test = cat("pp", a.prompt);
        row.tokens_per_s = mean_deviation(t.prefill);
        row.repetitions = static_cast<int>(t.prefill.size());
        set_row_bound(row, BenchTest::kPrefill, bounds, costs);
        report.rows.push_back(row);
      }
      if (a.decode > 0 && !t.decode.empty()) {
        row.test = cat("tg", a.decode);
        row.tokens_per_s = mean_deviation(t.decode);
        row.repetitions = static_cast<int>(t.decode.size());
        row.read_gbs_before = read_before;
        row.read_gbs_after = read_after;
        set_row_bound(row, BenchTest::kDecode, bounds, costs);
        report.rows.push_back(row);
      }
    }
  }
  uint64_t last_peak = 0;
  memory_use(device, &last_peak, &capacity);
  peak = std::max(peak, last_peak);
  for (size_t i = first; i < report.rows.size(); ++i) {
    report.rows[i].peak_bytes = peak;
    report.rows[i].capacity = capacity;
  }
}

// The bounds of one thread count: the host's (a streaming read, OpenBLAS
// on the in_proj shape), or a device backend's, measured on its device
// through its own ops.
BenchBounds measure_bounds(const BenchArgs& a, int threads, const ModelCosts& shape) {
  const Device device = find_backend(a.compute.backend).device();
  if (device != Device::host()) {
    Context ctx(a.compute.backend, threads);
    return {.threads = threads,
            .device = device_str(device),
            .linear_flops = measure_linear_flops(ctx, /*bf16_after=*/false),
            .linear_n = kDeviceLinearN,
            .copy_bytes_per_s = measure_copy_bytes_per_s(ctx, kDeviceCopyBytes)};
  }
  const int64_t gemm_m = a.prompt > 0 ? a.prompt : 512;
  return {.threads = threads,
          .read_gbs = measure_read_gbs(threads, read_buffer_bytes()),
          .sgemm_gflops = shape.in_proj_out > 0
                              ? measure_sgemm_gflops(threads, gemm_m, shape.in_proj_out, shape.in_proj_in)
                              : 0.0,
          .gemm_m = gemm_m,
          .gemm_n = shape.in_proj_out,
          .gemm_k = shape.in_proj_in,
          .blas_core = blas_core()};
}

int run_bench(BenchArgs& a) {
  if (a.train) {
    if (a.prompt < 2) throw UsageError("--train needs -p (the sequence length) of at least 2");
    return run_train_bench({.model = a.model, .backend = a.compute.backend, .threads = a.threads.front(),
                            .seq_len = a.prompt, .batches = a.batches, .steps = a.train_steps, .bf16 = a.bf16,
                            .json = a.json});
  }
  if (a.bf16) throw UsageError("--bf16 goes with --train");
  check_args(a);
  BenchReport report{.model = a.model, .backend = a.compute.backend, .simd_target = cpu::lowp_target_name()};
  // The in_proj shape, from the model as loaded in F32 (shapes only).
  const ModelCosts shape = [&] {
    LanguageModel m = LanguageModel::load(a.model, load_options(a.compute));
    return model_costs(m);
  }();
  const InterruptCatcher interrupt;
  for (int threads : a.threads) {
    if (interrupt.requested()) break;
    report.bounds.push_back(measure_bounds(a, threads, shape));
  }
  for (const std::string& dtype : a.dtypes) {
    if (interrupt.requested()) break;
    bench_dtype(a, dtype, report, interrupt);
  }
  if (a.json) print_json(bench_json(report));
  else print_bench_markdown(report);
  if (!interrupt.requested()) return 0;
  std::fprintf(stderr, "ssm: interrupted; the results above are those finished\n");
  return kExitInterrupted;
}

void setup_bench(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "bench", "prefill and decode tokens/s against bounds measured in the same run");
  static BenchArgs a;
  add_model_argument(*cmd, a.model, "model directory", WithoutModel::builtin);
  cmd->add_option("-p,--prompt", a.prompt, "prompt tokens per sequence prefilled (0: no prefill test)")
      ->type_name("N")->capture_default_str()->check(whole_number(0, 1 << 20));
  cmd->add_option("-n,--decode", a.decode, "tokens decoded per sequence (0: no decode test)")
      ->type_name("N")->capture_default_str()->check(whole_number(0, 1 << 20));
  cmd->add_option("-r,--repetitions", a.repetitions, "timed repetitions of each test (after one warm-up)")
      ->type_name("N")->capture_default_str()->check(whole_number(1, 1000));
  cmd->add_option("-b,--batch", a.batches, "sequences at once; a list: 1,8,32")
      ->type_name("N,...")->delimiter(',')->default_str("1")->check(whole_number(1, 4096));
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  a.threads = {hw};
  cmd->add_option("-t,--threads", a.threads, "worker threads; a list: 1,2")
      ->type_name("N,...")->delimiter(',')->default_str(cat("all cores, ", hw))->check(whole_number(1, 1024));
  cmd->add_option("--dtype", a.dtypes,
                  "projection weights: auto (as stored), f32, bf16, f16, int8; a list: f32,bf16,int8; rows "
                  "name the dtype auto picked")
      ->type_name("TYPE,...")->delimiter(',')->default_str("auto")->check(one_of(weight_dtype_names()));
  cmd->add_option("--backend", a.compute.backend, "where the computation runs")
      ->type_name("NAME")->capture_default_str()->check(one_of(backend_names()));
  add_max_memory_option(*cmd, a.compute);
  add_state_dtype_option(*cmd, a.compute);
  cmd->add_flag("--json", a.json, "print one JSON document");
  cmd->add_flag("--train", a.train,
                "time training steps (forward, backward, AdamW) of -p tokens per sequence instead");
  cmd->add_option("--train-steps", a.train_steps, "with --train: timed steps (after one warm-up)")
      ->type_name("N")->capture_default_str()->check(whole_number(1, 10000));
  cmd->add_flag("--bf16", a.bf16, "with --train: products on bf16 tensor cores over F32 weights (cuda)");
  cmd->callback([&action] { action = [] { return run_bench(a); }; });
}

}  // namespace

SSM_COMMAND(bench, setup_bench);

}  // namespace ssm::cli
