// The training step replayed as one recorded CUDA graph
// (SSM_CUDA_TRAIN_GRAPH=1, step_graph.h) against the step launched op by
// op, from one seed (label gpu): the same kernels in the same order, so
// the same losses, gradient norms and weights to the bit, with the graph
// really recorded; also when work of other shapes runs between replays
// (an evaluation, a second trainer of another length on the same model),
// and a checkpoint written after replayed steps resumes identically.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/tiny_kinds.h"
#include "ssm/train/model_grad.h"
#include "ssm/train/trainer.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

namespace fs = std::filesystem;

struct Curve {
  std::vector<double> losses, norms;  // NaN where the step did not read back
  std::vector<Tensor> weights;        // on the host, at the end
  bool recorded = false;              // the graph was recorded (and replayed)
};

TrainOptions options(int64_t steps, int64_t seq_len, double clip) {
  return TrainOptions{.steps = steps, .batch = 4, .seq_len = seq_len, .lr = 3e-3, .warmup = 3,
                      .clip = clip, .seed = 7};
}

// A trainer made with the switch set (it is read when the trainer is made).
std::unique_ptr<Trainer> trainer(LanguageModel& m, const std::vector<int32_t>& tokens,
                                 const TrainOptions& o, Context& ctx, bool graph) {
  ::setenv("SSM_CUDA_TRAIN_GRAPH", graph ? "1" : "0", 1);
  auto t = std::make_unique<Trainer>(m, tokens, o, ctx);
  ::unsetenv("SSM_CUDA_TRAIN_GRAPH");
  return t;
}

// `steps` steps, reading back at every third step and the last (the host
// queues the others without waiting, replays included).
void steps(Trainer& t, int64_t n, Curve& run) {
  for (int64_t i = 0; i < n; ++i) {
    const StepReport r = t.step(i % 3 == 2 || i + 1 == n);
    run.losses.push_back(r.loss);
    run.norms.push_back(r.grad_norm);
  }
  run.recorded = run.recorded || t.step_graph_recorded();
}

void keep_weights(LanguageModel& m, Curve& run) {
  m.for_each_param([&](const std::string&, Param& p) {
    if (p.value.defined()) run.weights.push_back(testing::host(p.value));
  });
}

// NaN == NaN here: both runs skipped the read back at the same steps.
void expect_same_bits(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0)
        << what << " of step " << i + 1 << ": " << a[i] << " against " << b[i];
}

void expect_same(const Curve& graph, const Curve& eager) {
  expect_same_bits(graph.losses, eager.losses, "loss");
  expect_same_bits(graph.norms, eager.norms, "gradient norm");
  ASSERT_EQ(graph.weights.size(), eager.weights.size());
  for (size_t i = 0; i < graph.weights.size(); ++i) {
    const Tensor &a = graph.weights[i], &b = eager.weights[i];
    ASSERT_EQ(a.nbytes(), b.nbytes()) << "parameter " << i;
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "parameter " << i;
  }
}

using Case = std::tuple<std::string, bool, double>;  // kind, bf16, clip
class GpuTrainStepGraph : public ::testing::TestWithParam<Case> {};

// 12 steps: two warm-ups, the recording, nine replays.
TEST_P(GpuTrainStepGraph, ReplaysMatchTheStepOpByOpToTheBit) {
  const auto& [kind, bf16, clip] = GetParam();
  const auto tokens = testing::tiny_tokens(20000);
  Curve runs[2];
  for (const bool graph : {false, true}) {
    Context ctx("cuda", 1);
    if (bf16) {
      ASSERT_TRUE(ctx.resources()->set_bf16_compute(true));
    }
    LanguageModel m = testing::tiny_kind_model(kind, 11);
    m.to_device(ctx.device());
    {
      const auto t = trainer(m, tokens, options(12, 64, clip), ctx, graph);
      steps(*t, 12, runs[graph]);
    }
    keep_weights(m, runs[graph]);
  }
  EXPECT_TRUE(runs[1].recorded) << "the step was never recorded: nothing was compared";
  EXPECT_FALSE(runs[0].recorded);
  expect_same(runs[1], runs[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Runs, GpuTrainStepGraph,
    ::testing::Values(Case{"mamba2", false, 1.0}, Case{"mamba2", true, 0.05},
                      Case{"mamba3_siso", false, 0.05}, Case{"mamba3_siso", true, 1.0},
                      Case{"hybrid", true, 1.0}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::get<0>(i.param) + (std::get<1>(i.param) ? "_bf16" : "_f32") +
             (std::get<2>(i.param) < 0.1 ? "_clipped" : "");
    });

// Between replays: an evaluation at another shape (the arena grows and its
// old blocks are freed), then a second trainer of another length on the
// same model (its own warm-up and recording), then the first again.
TEST(GpuTrainStepGraphShapes, OtherShapesBetweenReplays) {
  const auto tokens = testing::tiny_tokens(20000);
  Curve runs[2];
  for (const bool graph : {false, true}) {
    Context ctx("cuda", 1);
    ASSERT_TRUE(ctx.resources()->set_bf16_compute(true));
    LanguageModel m = testing::tiny_kind_model("mamba2", 17);
    m.to_device(ctx.device());
    {
      const auto a = trainer(m, tokens, options(20, 64, 1.0), ctx, graph);
      steps(*a, 6, runs[graph]);
      Tensor ids = Tensor::empty(DType::kI64, {6, 96});
      for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = tokens[static_cast<size_t>(i)];
      runs[graph].losses.push_back(model_loss(m, ids, ctx).sum);
      steps(*a, 3, runs[graph]);
      {
        const auto b = trainer(m, tokens, options(20, 32, 0.05), ctx, graph);
        steps(*b, 6, runs[graph]);
      }
      steps(*a, 4, runs[graph]);
    }
    keep_weights(m, runs[graph]);
  }
  EXPECT_TRUE(runs[1].recorded) << "the step was never recorded: nothing was compared";
  EXPECT_FALSE(runs[0].recorded);
  expect_same(runs[1], runs[0]);
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / cat("ssm_gpu_step_graph_", name, "_", ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// 8 replayed steps, a checkpoint, 6 more; a fresh model and trainer (graph
// on) resumed from the checkpoint runs the same 6 to the bit, and so does
// one without the graph.
TEST(GpuTrainStepGraphCheckpoint, ResumesIdentically) {
  const auto tokens = testing::tiny_tokens(20000);
  const TrainOptions o = options(14, 64, 1.0);
  const fs::path dir = temp_dir("resume");
  Curve straight, resumed[2];
  {
    Context ctx("cuda", 1);
    ASSERT_TRUE(ctx.resources()->set_bf16_compute(true));
    LanguageModel m = testing::tiny_kind_model("mamba3_siso", 29);
    m.to_device(ctx.device());
    {
      const auto t = trainer(m, tokens, o, ctx, true);
      Curve before;
      steps(*t, 8, before);
      EXPECT_TRUE(before.recorded);
      t->save_checkpoint(dir);
      steps(*t, 6, straight);
    }
    keep_weights(m, straight);
  }
  for (const bool graph : {false, true}) {
    Context ctx("cuda", 1);
    ASSERT_TRUE(ctx.resources()->set_bf16_compute(true));
    LanguageModel m = testing::tiny_kind_model("mamba3_siso", 31);  // overwritten by the checkpoint
    m.to_device(ctx.device());
    {
      const auto t = trainer(m, tokens, o, ctx, graph);
      t->load_checkpoint(dir / "checkpoint.safetensors");
      steps(*t, 6, resumed[graph]);
    }
    keep_weights(m, resumed[graph]);
  }
  // Six steps from a resume: two warm-ups, a recording, three replays.
  EXPECT_TRUE(resumed[1].recorded);
  EXPECT_FALSE(resumed[0].recorded);
  expect_same(resumed[1], resumed[0]);
  expect_same(resumed[0], straight);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ssm
