// Mamba-3 models (SISO, MIMO and the hybrid with attention and MLPs) against
// the reference implementation's outputs (SPEC §7): logits and every mixer
// input and output with 1 and 2 threads; the same logits when the sequence
// is fed in two parts or one token at a time through the state; greedy
// generation; configurations the weights do not fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ssm/io/checkpoint.h"
#include "ssm/io/json.h"
#include "ssm/io/safetensors.h"
#include "ssm/model/language_model.h"
#include "support/backends.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::max_rel_error;

constexpr double kTolerance = 1e-4;  // SPEC §7

// Columns [t0, t1) of a (B, L, ...) tensor of any dtype.
Tensor time_slice(const Tensor& x, int64_t t0, int64_t t1) {
  const int64_t B = x.dim(0), L = x.dim(1);
  const size_t inner = x.nbytes() / static_cast<size_t>(B * L);
  Shape shape = x.shape();
  shape[1] = t1 - t0;
  Tensor out = Tensor::empty(x.dtype(), shape);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(static_cast<char*>(out.raw()) + b * (t1 - t0) * inner,
                static_cast<const char*>(x.raw()) + (b * L + t0) * inner, (t1 - t0) * inner);
  return out;
}

// Writes src (B, l, V) into columns [t0, t0 + l) of dst (B, L, V).
void put_time_slice(Tensor& dst, int64_t t0, const Tensor& src) {
  const int64_t B = dst.dim(0), L = dst.dim(1), l = src.dim(1), V = dst.dim(2);
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(src.data<float>() + b * l * V, l * V, dst.data<float>() + (b * L + t0) * V);
}

class GoldenMamba3 : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = std::make_unique<LanguageModel>(LanguageModel::load(golden_dir(GetParam())));
    golden_ = std::make_unique<SafetensorsFile>(
        SafetensorsFile::open(golden_dir(GetParam()) + "/golden.safetensors"));
    ids_ = golden_->get("input_ids").clone();
  }
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<SafetensorsFile> golden_;
  Tensor ids_;
};

TEST_P(GoldenMamba3, LogitsAndMixerActivationsMatchReference) {
  for (const auto& [backend, threads] : testing::backend_runs()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, threads);
    ForwardTrace trace;
    const Tensor logits = model_->forward(ids_, nullptr, ctx, false, &trace);
    const double err = max_rel_error(logits, golden_->get("logits"));
    RecordProperty(cat("logits_rel_error_", threads, "t"), cat(err));
    EXPECT_LE(err, kTolerance) << threads << " threads";
    for (int64_t i = 0; i < model_->n_layer(); ++i) {
      ASSERT_TRUE(golden_->contains(cat("mixer_out.", i)));
      EXPECT_LE(max_rel_error(trace.mixer_in[i], golden_->get(cat("mixer_in.", i))), kTolerance)
          << "mixer_in." << i << ", " << threads << " threads";
      EXPECT_LE(max_rel_error(trace.mixer_out[i], golden_->get(cat("mixer_out.", i))), kTolerance)
          << "mixer_out." << i << ", " << threads << " threads";
    }
  }
}

TEST_P(GoldenMamba3, PrefillInPartsContinuesFromTheState) {
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 2);
    const int64_t B = ids_.dim(0), L = ids_.dim(1);
    Tensor logits = Tensor::empty(DType::kF32, {B, L, model_->config().vocab_size});
    ModelState state = model_->make_state(B);
    // Uneven parts, neither a multiple of the chunk size.
    for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 11}, {11, 12}, {12, L}})
      put_time_slice(logits, t0, model_->forward(time_slice(ids_, t0, t1), &state, ctx));
    EXPECT_LE(max_rel_error(logits, golden_->get("logits")), kTolerance);
    EXPECT_EQ(state.position, L);
  }
}

TEST_P(GoldenMamba3, TokenByTokenMatchesPrefill) {
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    const int64_t B = ids_.dim(0), L = ids_.dim(1);
    Tensor logits = Tensor::empty(DType::kF32, {B, L, model_->config().vocab_size});
    ModelState state = model_->make_state(B);
    for (int64_t t = 0; t < L; ++t)
      put_time_slice(logits, t, model_->forward(time_slice(ids_, t, t + 1), &state, ctx));
    EXPECT_LE(max_rel_error(logits, golden_->get("logits")), kTolerance);
  }
}

TEST_P(GoldenMamba3, GreedyGenerationMatchesReference) {
  const Tensor prompt = golden_->get("gen_prompt").clone();
  const Tensor want = golden_->get("gen_output");
  std::vector<int64_t> tokens(prompt.data<int64_t>(), prompt.data<int64_t>() + prompt.numel());
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 2);
    ModelState state = model_->make_state(1);
    Tensor next = prompt;
    while (static_cast<int64_t>(tokens.size()) < want.numel()) {
      const Tensor logits = model_->forward(next, &state, ctx, /*last_only=*/true);
      const float* row = logits.data<float>();
      const int64_t tok = std::max_element(row, row + logits.numel()) - row;
      tokens.push_back(tok);
      next = Tensor::empty(DType::kI64, {1, 1});
      next.data<int64_t>()[0] = tok;
    }
    EXPECT_EQ(tokens,
              std::vector<int64_t>(want.data<int64_t>(), want.data<int64_t>() + want.numel()));
  }
}

// Runs a shell command, returning its exit status and standard output.
std::pair<int, std::string> run_command(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {-1, out};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  return {::pclose(pipe), out};
}

TEST_P(GoldenMamba3, CliLogitsAndInfoWork) {
  const std::string dir = golden_dir(GetParam());
  testing::TempDir tmp;
  const auto [rc, out] = run_command(cat(SSM_CLI_PATH, " logits ", dir, " --input ", dir,
                                         "/golden.safetensors --output ",
                                         (tmp / "l.safetensors").string(), " --threads 2 2>&1"));
  ASSERT_EQ(rc, 0) << out;
  const SafetensorsFile got = SafetensorsFile::open(tmp / "l.safetensors");
  EXPECT_LE(max_rel_error(got.get("logits"), golden_->get("logits")), kTolerance);

  const auto [rc_info, info] = run_command(cat(SSM_CLI_PATH, " info ", dir, " 2>&1"));
  ASSERT_EQ(rc_info, 0) << info;
  EXPECT_NE(info.find("mamba3:"), std::string::npos) << info;
  const ModelConfig& c = model_->config();
  EXPECT_NE(info.find(c.mamba3.is_mimo ? "MIMO rank 2" : "SISO rank 1"), std::string::npos) << info;
  if (!c.attn_layer_idx.empty()) {
    EXPECT_NE(info.find("mamba3 attention mamba3 (each with MLP)"), std::string::npos) << info;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenMamba3,
                         ::testing::Values("mamba3_siso_tiny", "mamba3_mimo_tiny", "hybrid_tiny"),
                         [](const auto& info) { return info.param; });

// A golden model's weights under an edited config.json.
void load_with_edit(const std::string& name, const std::function<void(Json&)>& edit) {
  Json j = load_json_file(golden_dir(name) + "/config.json");
  edit(j);
  LanguageModel model(parse_model_config(j, name + " (edited)"));
  model.load_weights(*open_checkpoint(golden_dir(name)));
}

void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GoldenMamba3, ConfigsTheWeightsDoNotFitAreClearErrors) {
  const std::string in_proj = "'backbone.layers.0.mixer.in_proj.weight'";
  // mimo_rank 4 against rank-2 weights: in_proj is 2*2*32 rows wider.
  expect_error(
      [] { load_with_edit("mamba3_mimo_tiny", [](Json& j) { j["ssm_cfg"]["mimo_rank"] = 4; }); },
      {in_proj, "[416, 64]", "[544, 64]"});
  // rope_fraction 1.0 doubles the angles: 16 in place of 8.
  expect_error(
      [] {
        load_with_edit("mamba3_siso_tiny", [](Json& j) { j["ssm_cfg"]["rope_fraction"] = 1.0; });
      },
      {in_proj, "[352, 64]", "[360, 64]"});
  // SISO weights read as MIMO with rank 1: same in_proj, no mimo_x.
  expect_error(
      [] {
        load_with_edit("mamba3_siso_tiny", [](Json& j) {
          j["ssm_cfg"]["is_mimo"] = true;
          j["ssm_cfg"]["mimo_rank"] = 1;
        });
      },
      {"missing tensor 'backbone.layers.0.mixer.mimo_x'", "[8, 1, 16]"});
  expect_error(
      [] {
        load_with_edit("mamba3_siso_tiny", [](Json& j) { j["ssm_cfg"]["is_outproj_norm"] = true; });
      },
      {"missing tensor 'backbone.layers.0.mixer.norm.weight'"});
  // The attention layer's heads: 4 x 16 read as 2 heads of 16 (in_proj 96 rows).
  expect_error(
      [] { load_with_edit("hybrid_tiny", [](Json& j) { j["attn_cfg"]["num_heads"] = 2; }); },
      {"'backbone.layers.1.mixer.in_proj.weight'", "[192, 64]", "[96, 64]"});
}

}  // namespace
}  // namespace ssm
