// Generation over batches and sessions: a batch of independent sequences
// (ragged prompts, their own stop points) equals each run alone, including
// the state each is left in; a session resumed (in memory or through a file)
// equals one uninterrupted sequence; seeded sampling repeats itself.
#include <gtest/gtest.h>

#include "decode_support.h"
#include "support/backends.h"
#include "ssm/io/json.h"
#include "ssm/model/generator.h"
#include "ssm/model/state_file.h"
#include "support/temp_dir.h"

namespace ssm {
namespace {

using testing::ids_tensor;
using testing::max_rel_error;

const std::vector<std::vector<int64_t>> kPrompts = {
    {10, 200, 31, 4, 77}, {1, 2}, {250, 9, 9, 9, 100, 42, 7, 8}};

GenerationConfig sampled_config(int64_t n) {
  GenerationConfig cfg;
  cfg.max_new_tokens = n;
  cfg.sampling = SamplingParams{.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.02f,
                                .repeat_penalty = 1.1f};
  cfg.seed = 1234;
  return cfg;
}

// Each prompt alone, with the seed its row gets in a batch.
std::vector<SequenceOutput> one_at_a_time(LanguageModel& model, Context& ctx, GenerationConfig cfg,
                                          const std::vector<std::vector<int64_t>>& prompts,
                                          std::vector<SessionState>* sessions = nullptr) {
  std::vector<SequenceOutput> out;
  const uint64_t seed = cfg.seed;
  for (size_t b = 0; b < prompts.size(); ++b) {
    Generator gen(model, ctx);
    SessionState s = make_session(model, 1);
    cfg.seed = seed + b;
    out.push_back(gen.generate(s, {prompts[b]}, cfg)[0]);
    if (sessions) sessions->push_back(std::move(s));
  }
  return out;
}

class DecodeBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeBatch, BatchEqualsOneAtATimeGreedyAndSampled) {
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 2);
    for (bool sampled : {false, true}) {
      GenerationConfig cfg = sampled ? sampled_config(10) : GenerationConfig{.max_new_tokens = 10};
      const auto alone = one_at_a_time(model, ctx, cfg, kPrompts);
      Generator gen(model, ctx);
      SessionState s = make_session(model, 3);
      const auto batch = gen.generate(s, kPrompts, cfg);
      for (size_t b = 0; b < kPrompts.size(); ++b)
        EXPECT_EQ(batch[b].tokens, alone[b].tokens) << (sampled ? "sampled" : "greedy") << " row " << b;
      EXPECT_EQ(gen.stats().prefill_tokens, 5 + 2 + 8);
      EXPECT_EQ(gen.stats().decode_tokens, 3 * 9);
    }
  }
}

TEST_P(DecodeBatch, RowsStopOnTheirOwnAndKeepTheirState) {
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    GenerationConfig cfg{.max_new_tokens = 12};
    std::vector<SessionState> alone_sessions;
    auto alone = one_at_a_time(model, ctx, cfg, kPrompts);
    // A stop token that row 1 meets early; rows that never meet it run on.
    cfg.stop_tokens = {alone[1].tokens[3]};
    alone = one_at_a_time(model, ctx, cfg, kPrompts, &alone_sessions);
    ASSERT_EQ(alone[1].finish, FinishReason::kStopToken);
    ASSERT_LE(alone[1].tokens.size(), 4u);

    Generator gen(model, ctx);
    SessionState s = make_session(model, 3);
    const auto batch = gen.generate(s, kPrompts, cfg);
    bool some_ran_longer = false;
    for (size_t b = 0; b < kPrompts.size(); ++b) {
      EXPECT_EQ(batch[b].tokens, alone[b].tokens) << b;
      EXPECT_EQ(batch[b].finish, alone[b].finish) << b;
      some_ran_longer |= batch[b].tokens.size() > batch[1].tokens.size();
      EXPECT_EQ(s.pending[b], alone_sessions[b].pending[0]);
      EXPECT_EQ(s.consumed[b], alone_sessions[b].consumed[0]);
    }
    ASSERT_TRUE(some_ran_longer);
    // Continuing every row shows each state is where its sequence stopped.
    const std::vector<std::vector<int64_t>> more = {{5}, {6, 7}, {}};
    GenerationConfig next{.max_new_tokens = 6};
    const auto cont = gen.generate(s, more, next);
    for (size_t b = 0; b < kPrompts.size(); ++b) {
      Generator g(model, ctx);
      const auto single = g.generate(alone_sessions[b], {more[b]}, next);
      EXPECT_EQ(cont[b].tokens, single[0].tokens) << "continued row " << b;
    }
  }
}

TEST_P(DecodeBatch, ResumedSessionEqualsOneUninterruptedSequence) {
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 2);
    const std::vector<int64_t> a = {12, 99, 140, 3}, b = {77, 78};
    GenerationConfig cfg{.max_new_tokens = 7};
    testing::TempDir dir;
    const std::string fp = model_fingerprint(model, ctx);

    // In memory: two calls on one session.
    Generator gen(model, ctx);
    SessionState mem = make_session(model, 1);
    const auto g1 = gen.generate(mem, {a}, cfg)[0].tokens;
    const auto g2 = gen.generate(mem, {b}, cfg)[0].tokens;

    // Across "processes": the session saved, a fresh model loads it.
    SessionState first = make_session(model, 1);
    EXPECT_EQ(gen.generate(first, {a}, cfg)[0].tokens, g1);
    save_state(dir / "chat.state", first, fp);
    SSM_LOAD_GOLDEN_OR_SKIP(other, GetParam());
    Generator gen2(other, ctx);
    SessionState resumed = load_state(dir / "chat.state", other, fp);
    EXPECT_EQ(gen2.generate(resumed, {b}, cfg)[0].tokens, g2);

    // One sequence a + g1 + b, generated in one go, continues the same way.
    std::vector<int64_t> whole = a;
    whole.insert(whole.end(), g1.begin(), g1.end());
    whole.insert(whole.end(), b.begin(), b.end());
    SessionState one = make_session(model, 1);
    EXPECT_EQ(gen.generate(one, {whole}, cfg)[0].tokens, g2);
    EXPECT_EQ(one.consumed[0], mem.consumed[0]);
    EXPECT_EQ(one.pending[0], mem.pending[0]);
    EXPECT_EQ(one.recent[0], mem.recent[0]);
    // And the states themselves agree.
    const ModelState& ms = mem.model;
    for (size_t i = 0; i < ms.layers.size(); ++i) {
      auto x = ms.layers[i]->tensors(), y = one.model.layers[i]->tensors();
      for (size_t j = 0; j < x.size(); ++j) {
        if (x[j].second->dtype() == DType::kF32) {
          EXPECT_LE(max_rel_error(*x[j].second, *y[j].second), 1e-4) << i << " " << x[j].first;
        }
      }
    }
    // A session with nothing pending and no prompt cannot continue.
    SessionState empty = make_session(model, 1);
    EXPECT_THROW(gen.generate(empty, {{}}, cfg), Error);
    // With a pending token, an empty prompt just goes on.
    EXPECT_NO_THROW(gen.generate(mem, {{}}, cfg));
  }
}

TEST_P(DecodeBatch, SeededSamplingRepeatsAndSeedsDiffer) {
  SSM_LOAD_GOLDEN_OR_SKIP(model, GetParam());
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    auto run = [&](uint64_t seed) {
      GenerationConfig cfg = sampled_config(24);
      cfg.sampling.temperature = 1.5f;  // flat enough that seeds matter
      cfg.sampling.top_k = 0;
      cfg.seed = seed;
      Generator gen(model, ctx);
      SessionState s = make_session(model, 1);
      return gen.generate(s, {kPrompts[0]}, cfg)[0].tokens;
    };
    EXPECT_EQ(run(7), run(7));
    EXPECT_NE(run(7), run(8));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, DecodeBatch,
                         ::testing::Values("mamba2_hf_tiny", "mamba3_siso_tiny", "hybrid_tiny"),
                         [](const auto& info) { return info.param; });

TEST(DecodeBatchStop, StopStringsEndASequence) {
  SSM_LOAD_GOLDEN_OR_SKIP(model, "mamba2_hf_tiny");
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    // Token bytes of a byte-level model: id i is the byte i.
    std::vector<std::string> bytes(256);
    for (int i = 0; i < 256; ++i) bytes[i] = std::string(1, static_cast<char>(i));
    Generator gen(model, ctx);
    gen.set_token_text([&](int64_t id) { return std::string_view(bytes[id]); });
    SessionState s = make_session(model, 1);
    const auto free_run = gen.generate(s, {kPrompts[0]}, GenerationConfig{.max_new_tokens = 12})[0].tokens;
    // The bytes of tokens 4 and 5 as one stop string: the run ends at token 5.
    GenerationConfig cfg{.max_new_tokens = 12};
    cfg.stop_strings = {bytes[free_run[4]] + bytes[free_run[5]]};
    SessionState s2 = make_session(model, 1);
    const auto out = gen.generate(s2, {kPrompts[0]}, cfg)[0];
    // (An earlier occurrence of the same two bytes would stop it sooner.)
    ASSERT_LE(out.tokens.size(), 6u);
    EXPECT_EQ(out.finish, FinishReason::kStopString);
    EXPECT_EQ(out.tokens, std::vector<int64_t>(free_run.begin(), free_run.begin() + out.tokens.size()));
    Generator no_text(model, ctx);
    EXPECT_THROW(no_text.generate(s2, {{1}}, cfg), Error);
  }
}

}  // namespace
}  // namespace ssm

namespace ssm {
namespace {

TEST(DecodePaddedVocab, NeverSamplesPaddedRows) {
  // mamba2_ssm_tiny read with vocab_size 250: its 256 embedding rows become
  // 250 real ones and 6 of padding, which we make the strongest rows of all.
  Json config = load_json_file(testing::golden_dir("mamba2_ssm_tiny") + "/config.json");
  config["vocab_size"] = 250;
  LanguageModel model(parse_model_config(config, "padded"));
  model.load_weights(*open_checkpoint(testing::golden_dir("mamba2_ssm_tiny")));
  ASSERT_EQ(model.config().padded_vocab(), 256);
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    const Tensor first = model.forward(testing::ids_tensor({1, 2, 3}, 1), nullptr, ctx, true);
    const int64_t top = std::max_element(first.data<float>(), first.data<float>() + 250) - first.data<float>();
    model.for_each_param([&](const std::string& name, Param& p) {
      if (name != model.config().embedding_name()) return;
      p.value = p.value.clone();
      const int64_t D = p.shape[1];
      for (int64_t r = 250; r < 256; ++r)
        for (int64_t i = 0; i < D; ++i) p.value.data<float>()[r * D + i] = 100.f * p.value.data<float>()[top * D + i];
    });
    ModelState st = model.make_state(1);
    int64_t tok = 1;
    EXPECT_EQ(model.step(&tok, st, ctx).dim(1), 250);
    Generator gen(model, ctx);
    for (float temperature : {0.f, 1.f, 5.f}) {
      SessionState s = make_session(model, 1);
      GenerationConfig cfg{.max_new_tokens = 64};
      cfg.sampling.temperature = temperature;
      const auto out = gen.generate(s, {{1, 2, 3}}, cfg)[0].tokens;
      for (int64_t t : out) EXPECT_LT(t, 250) << temperature;
    }
  }
}

}  // namespace
}  // namespace ssm
