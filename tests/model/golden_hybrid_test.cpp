// The hybrid golden model (Mamba-3, attention on layer 1, an MLP on every
// layer) beyond the logits that golden_mamba3_test checks: its schedule and
// decode state, batch rows that do not interact, a zeroed state acting as a
// fresh one, and WSLA training only the Mamba-3 B/C rows.
#include <gtest/gtest.h>

#include "ssm/io/safetensors.h"
#include "ssm/layers/attention_layer.h"
#include "ssm/layers/mamba3_layer.h"
#include "ssm/model/language_model.h"
#include "support/backends.h"
#include "support/compare.h"

namespace ssm {
namespace {

using testing::golden_dir;
using testing::max_rel_error;

class GoldenHybrid : public ::testing::Test {
 protected:
  GoldenHybrid()
      : model_(LanguageModel::load(golden_dir("hybrid_tiny"))),
        golden_(SafetensorsFile::open(golden_dir("hybrid_tiny") + "/golden.safetensors")),
        ids_(golden_.get("input_ids").clone()) {}
  LanguageModel model_;
  SafetensorsFile golden_;
  Tensor ids_;
};

TEST_F(GoldenHybrid, ScheduleAndDecodeState) {
  ASSERT_EQ(model_.n_layer(), 3);
  EXPECT_EQ(model_.mixer(0).kind(), "mamba3");
  EXPECT_EQ(model_.mixer(1).kind(), "attention");
  EXPECT_EQ(model_.mixer(2).kind(), "mamba3");
  const int64_t B = ids_.dim(0), L = ids_.dim(1);
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 2);
    ModelState state = model_.make_state(B);
    auto* kv = dynamic_cast<AttentionState*>(state.layers[1].get());
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(kv->length(0), 0);
    model_.forward(ids_, &state, ctx);
    for (int64_t b = 0; b < B; ++b) EXPECT_EQ(kv->length(b), L);
    EXPECT_GE(kv->capacity(), L);
    EXPECT_EQ(kv->k.shape(), (Shape{B, 4, kv->capacity(), 16}));
    EXPECT_NE(dynamic_cast<Mamba3State*>(state.layers[0].get()), nullptr);
  }
}

TEST_F(GoldenHybrid, BatchRowsMatchSingleSequences) {
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 2);
    const Tensor batched = model_.forward(ids_, nullptr, ctx);
    const int64_t L = ids_.dim(1), V = batched.dim(2);
    for (int64_t b = 0; b < ids_.dim(0); ++b) {
      const Tensor row = ids_.rows(b, b + 1);
      const Tensor single = model_.forward(row.clone(), nullptr, ctx);
      EXPECT_LE(
          testing::max_rel_error(single.data<float>(), batched.data<float>() + b * L * V, L * V),
          1e-5);
    }
  }
}

TEST_F(GoldenHybrid, ZeroedStateActsFresh) {
  for (const std::string& backend : testing::all_backends()) {
    SCOPED_TRACE(backend);
    Context ctx(backend, 1);
    ModelState state = model_.make_state(ids_.dim(0));
    model_.forward(ids_, &state, ctx);
    for (auto& layer : state.layers)
      if (layer) layer->zero(ctx);
    state.position = 0;
    EXPECT_LE(max_rel_error(model_.forward(ids_, &state, ctx), golden_.get("logits")), 1e-4);
  }
}

TEST_F(GoldenHybrid, WslaTrainsOnlyMamba3BcRows) {
  model_.set_wsla(true);
  const auto slices = model_.trainable_parameters();
  ASSERT_EQ(slices.size(), 2u);  // layers 0 and 2; attention and MLPs freeze
  EXPECT_EQ(slices[0].param, &model_.mixer(0).param("in_proj.weight"));
  EXPECT_EQ(slices[1].param, &model_.mixer(2).param("in_proj.weight"));
  for (const TrainableSlice& s : slices) {
    EXPECT_EQ(s.row_begin, 2 * 128);
    EXPECT_EQ(s.row_end, 2 * 128 + 2 * 32);
  }
}

}  // namespace
}  // namespace ssm
