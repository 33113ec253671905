// Training through NCCL on one GPU (label gpu; builds with -DSSM_NCCL=ON):
// a one-rank communicator's F32 average is the identity, so the trainer
// with the NCCL bucket transport gives the losses of the plain GPU trainer
// (1e-5 relative, step by step), its buckets having started during the
// backward; the BF16 transport stays close; and `ssm train --backend cuda
// --gpus 1` (the launcher, the rendezvous, NCCL) prints the losses of
// `ssm train --backend cuda`.
#include <gtest/gtest.h>

#if defined(SSM_NCCL_TESTS)

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "ssm/train/grad_reducer.h"
#include "ssm/train/nccl_transport.h"
#include "ssm/train/trainer.h"
#include "support/cli.h"
#include "support/train_log.h"
#include "train/tiny_model.h"

namespace ssm {
namespace {

TrainOptions nccl_options() {
  return TrainOptions{.steps = 8,
                      .batch = 4,
                      .seq_len = 64,
                      .accumulation = 2,
                      .lr = 3e-3,
                      .warmup = 2,
                      .weight_decay = 0.1,
                      .clip = 1.0,
                      .seed = 11};
}

std::vector<double> plain_losses(const std::vector<int32_t>& tokens) {
  LanguageModel m = testing::tiny_model(21);
  Context ctx("cuda", 1);
  m.to_device(ctx.device());
  Trainer t(m, tokens, nccl_options(), ctx);
  std::vector<double> out;
  while (!t.finished()) out.push_back(t.step().loss);
  return out;
}

std::vector<double> nccl_losses(const std::vector<int32_t>& tokens, bool bf16, int64_t* buckets) {
  LanguageModel m = testing::tiny_model(21);
  Context ctx("cuda", 1);
  m.to_device(ctx.device());
  Trainer t(m, tokens, nccl_options(), ctx);
  auto transport =
      make_nccl_transport(nccl_unique_id(), 0, 1, ctx, bf16, t.gradients().flat().numel());
  GradientReducer reducer(t.gradients(), *transport, /*bucket_bytes=*/4096);
  t.set_data_parallel(nullptr, &reducer);
  std::vector<double> out;
  while (!t.finished()) out.push_back(t.step().loss);
  *buckets = reducer.buckets();
  return out;
}

TEST(NcclTrain, OneRankF32EqualsThePlainGpuTrainer) {
  std::printf("NCCL %s\n", nccl_version().c_str());
  const auto tokens = testing::tiny_tokens(6000);
  const auto want = plain_losses(tokens);
  int64_t buckets = 0;
  const auto got = nccl_losses(tokens, false, &buckets);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    std::printf("step %zu plain %.9g nccl %.9g\n", s + 1, want[s], got[s]);
    EXPECT_NEAR(got[s], want[s], 1e-5 * want[s]) << "step " << s + 1;
  }
  EXPECT_GT(buckets, 2) << "the gradients went in one piece: nothing overlapped the backward";
}

TEST(NcclTrain, OneRankBf16StaysClose) {
  const auto tokens = testing::tiny_tokens(6000);
  const auto want = plain_losses(tokens);
  int64_t buckets = 0;
  const auto got = nccl_losses(tokens, true, &buckets);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    std::printf("step %zu plain %.9g nccl-bf16 %.9g\n", s + 1, want[s], got[s]);
    EXPECT_NEAR(got[s], want[s], 2e-2 * want[s]) << "step " << s + 1;
  }
  EXPECT_TRUE(std::isfinite(got.back()));
}

TEST(NcclTrain, CliOneGpuRankEqualsThePlainRun) {
  testing::TempDir dir;
  // The shapes the GPU training tests use (tests/train/tiny_model.h), with
  // a byte vocabulary.
  std::ofstream(dir / "config.json") << R"({"d_model": 32, "n_layer": 2, "vocab_size": 256,
    "pad_vocab_size_multiple": 8, "d_intermediate": 0, "attn_layer_idx": [], "attn_cfg": {},
    "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "chunk_size": 8},
    "tie_embeddings": true})";
  {
    std::ofstream text(dir / "data.txt");
    for (int i = 0; i < 600; ++i)
      text << "line " << i % 37 << ": the quick brown fox jumps over the lazy dog.\n";
  }
  const std::string base = (dir / "base").string();
  ASSERT_EQ(
      testing::run_ssm({"init", "--config", (dir / "config.json").string(), "--out", base}).code,
      0);
  auto train = [&](const std::string& out, std::vector<std::string> more) {
    std::vector<std::string> args = {"train",       base,
                                     "--data",      (dir / "data.txt").string(),
                                     "--out",       (dir / out).string(),
                                     "--steps",     "6",
                                     "--batch",     "4",
                                     "--seq-len",   "64",
                                     "--log-every", "1",
                                     "--warmup",    "2",
                                     "--backend",   "cuda",
                                     "--bucket-mb", "0.01"};
    args.insert(args.end(), more.begin(), more.end());
    return testing::run_ssm(args);
  };
  const auto plain = train("plain", {});
  ASSERT_EQ(plain.code, 0) << plain.err;
  const auto ranked = train("ranked", {"--gpus", "1"});
  ASSERT_EQ(ranked.code, 0) << ranked.err;
  std::printf("%s%s", ranked.err.c_str(), ranked.out.c_str());
  EXPECT_TRUE(testing::contains(ranked.err, "gradients reduced over NCCL")) << ranked.err;
  const auto want = testing::step_losses(plain.out), got = testing::step_losses(ranked.out);
  ASSERT_EQ(want.size(), 6u) << plain.out;
  ASSERT_EQ(got.size(), 6u) << ranked.out;
  for (const auto& [step, loss] : want)
    EXPECT_NEAR(got.at(step), loss, 1e-5 * loss) << "step " << step;
  EXPECT_TRUE(std::filesystem::exists(dir / "ranked" / "checkpoint.safetensors"));
}

}  // namespace
}  // namespace ssm

#endif  // SSM_NCCL_TESTS
