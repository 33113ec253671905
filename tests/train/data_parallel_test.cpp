// Data-parallel training without processes or NCCL: the sampler's shards
// are disjoint and make up the one-process batch; the reducer sends every
// gradient element exactly once, in buckets that start during the backward;
// and two ranks (threads joined by an in-memory all-reduce) train exactly
// as one process on the same global batch does.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <set>
#include <thread>

#include "ssm/train/grad_reducer.h"
#include "ssm/train/trainer.h"
#include "tiny_model.h"

namespace ssm {
namespace {

std::vector<std::vector<int64_t>> rows(const Tensor& ids) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < ids.dim(0); ++b)
    out.emplace_back(ids.data<int64_t>() + b * ids.dim(1),
                     ids.data<int64_t>() + (b + 1) * ids.dim(1));
  return out;
}

TEST(DataShards, RanksTakeDisjointRowsOfTheOneProcessBatch) {
  const auto tokens = testing::tiny_tokens(5000);
  const int64_t batch = 3, world = 4, length = 16;
  BatchSampler whole(tokens, batch * world, length, 9);
  std::vector<BatchSampler> ranks;
  for (int64_t r = 0; r < world; ++r) ranks.emplace_back(tokens, batch, length, 9, r, world);
  for (int step = 0; step < 5; ++step) {
    const auto all = rows(whole.next());
    std::vector<std::vector<int64_t>> joined;
    for (auto& s : ranks)
      for (auto& row : rows(s.next())) joined.push_back(row);
    EXPECT_EQ(joined, all) << "step " << step;
  }
  // Every rank's sampler is in the same state: a checkpoint from rank 0 resumes all.
  for (auto& s : ranks) EXPECT_EQ(s.state(), ranks[0].state());
}

// Records the ranges it is given and doubles them (so that an element
// reduced twice or never shows).
class RecordingTransport : public GradientTransport {
 public:
  void all_reduce_mean(float* data, int64_t n) override {
    calls.push_back({data, n, finishing});
    for (int64_t i = 0; i < n; ++i) data[i] *= 2;
  }
  void wait() override { ++waits; }
  struct Call {
    float* data;
    int64_t n;
    bool during_finish;
  };
  std::vector<Call> calls;
  bool finishing = false;
  int waits = 0;
};

TEST(GradientReducer, EveryElementOnceInBucketsDuringTheBackward) {
  LanguageModel m = testing::tiny_model(3, 64);
  const auto tokens = testing::tiny_tokens(400);
  Tensor ids = Tensor::empty(DType::kI64, {2, 24});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = tokens[i];
  Context ctx(1);
  Gradients g(m), plain(m);
  RecordingTransport t;
  GradientReducer reducer(g, t, /*bucket_bytes=*/4096);
  const GradientsFinal on_final = [&](const std::vector<const Param*>& ps) {
    reducer.mark_final(ps);
  };
  reducer.begin();
  model_loss_and_grad(m, ids, &g, 1.0, ctx, nullptr, false, &on_final);
  t.finishing = true;
  reducer.finish();
  model_loss_and_grad(m, ids, &plain, 1.0, ctx);
  EXPECT_EQ(t.waits, 1);
  ASSERT_GT(t.calls.size(), 2u);
  EXPECT_FALSE(t.calls.front().during_finish)
      << "the first bucket waits for the end of the backward";
  EXPECT_EQ(reducer.buckets(), static_cast<int64_t>(t.calls.size()));
  for (size_t i = 0; i < g.size(); ++i)
    for (int64_t k = 0; k < g.grad(i).numel(); ++k)
      ASSERT_EQ(g.grad(i).data<float>()[k], 2 * plain.grad(i).data<float>()[k])
          << g.name(i) << " " << k;
  // Buckets tile the flat buffer from the top down.
  const float* base = g.flat().data<float>();
  int64_t hi = g.flat().numel();
  for (const auto& c : t.calls) {
    EXPECT_EQ(c.data - base + c.n, hi);
    hi = c.data - base;
  }
  EXPECT_EQ(hi, 0);
}

// Two ranks in two threads: the mean of both ranks' buffers, in rank order.
class ThreadTransport : public GradientTransport {
 public:
  struct Shared {
    std::barrier<> sync{2};
    float* data[2] = {nullptr, nullptr};
  };
  ThreadTransport(Shared& s, int rank) : s_(s), rank_(rank) {}
  void all_reduce_mean(float* data, int64_t n) override {
    s_.data[rank_] = data;
    s_.sync.arrive_and_wait();
    if (rank_ == 0)
      for (int64_t i = 0; i < n; ++i)
        s_.data[0][i] = s_.data[1][i] = (s_.data[0][i] + s_.data[1][i]) * 0.5f;
    s_.sync.arrive_and_wait();
  }
  void wait() override {}

 private:
  Shared& s_;
  int rank_;
};

TEST(DataParallel, TwoRanksTrainAsOneProcessOnTheSameGlobalBatch) {
  const auto tokens = testing::tiny_tokens(3000);
  TrainOptions o{.steps = 6,
                 .batch = 4,
                 .seq_len = 24,
                 .accumulation = 2,
                 .lr = 3e-3,
                 .warmup = 2,
                 .weight_decay = 0.1,
                 .clip = 0.5,
                 .seed = 5};
  LanguageModel single = testing::tiny_model(4, 64);
  Context ctx(1);
  Trainer one(single, tokens, o, ctx);
  std::vector<double> want;
  for (int s = 0; s < o.steps; ++s) want.push_back(one.step().loss);

  ThreadTransport::Shared shared;
  LanguageModel models[2] = {testing::tiny_model(4, 64), testing::tiny_model(4, 64)};
  std::vector<double> losses[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r)
    threads[r] = std::thread([&, r] {
      TrainOptions ro = o;
      ro.batch = 2;
      ro.world = 2;
      ro.rank = r;
      Context rctx(1);
      Trainer t(models[r], tokens, ro, rctx);
      ThreadTransport transport(shared, r);
      GradientReducer reducer(t.gradients(), transport, 2048);
      t.set_data_parallel(nullptr, &reducer);
      for (int s = 0; s < o.steps; ++s) losses[r].push_back(t.step().loss);
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < o.steps; ++s) {
    const double got = (losses[0][s] + losses[1][s]) / 2;
    EXPECT_NEAR(got, want[s], 1e-5 * want[s]) << "step " << s + 1;
  }
  // Both ranks hold the same weights, close to the one process's.
  std::vector<float> w0, w1, w;
  models[0].for_each_param([&](const std::string&, Param& p) {
    w0.insert(w0.end(), p.value.data<float>(), p.value.data<float>() + p.value.numel());
  });
  models[1].for_each_param([&](const std::string&, Param& p) {
    w1.insert(w1.end(), p.value.data<float>(), p.value.data<float>() + p.value.numel());
  });
  single.for_each_param([&](const std::string&, Param& p) {
    w.insert(w.end(), p.value.data<float>(), p.value.data<float>() + p.value.numel());
  });
  EXPECT_EQ(w0, w1);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(w0[i], w[i], 1e-4) << i;
}

}  // namespace
}  // namespace ssm
