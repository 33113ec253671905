// The Mamba-2 layer on every backend against the same layer on ref (the
// sequential scan in double), state carried across calls, results
// independent of the thread count, WSLA rows.
#include "ssm/layers/mamba2_layer.h"

#include <gtest/gtest.h>

#include "support/backends.h"
#include "support/compare.h"
#include "support/random.h"

namespace ssm {
namespace {

Mamba2Config small_config(int64_t ngroups, int64_t chunk) {
  Mamba2Config c;
  c.d_model = 32;
  c.d_state = 16;
  c.headdim = 8;
  c.ngroups = ngroups;
  c.chunk_size = chunk;
  return c;
}

void fill_random(SequenceLayer& layer, uint64_t seed) {
  for (Param& p : layer.parameters()) {
    // Small weights keep activations in a realistic range.
    p.value = testing::random_tensor(p.shape, seed++, -0.3f, 0.3f);
  }
  layer.param("A_log").value = testing::random_tensor({layer.param("A_log").shape}, seed, 0.f, 2.5f);
}

class Mamba2LayerOn : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba2LayerOn, EqualsRefAcrossSplitsAndThreads) {
  for (int64_t groups : {1, 2}) {
    Mamba2Config c = small_config(groups, 7);
    Mamba2Layer layer(c);
    fill_random(layer, 10);
    Mamba2Layer& chunked = layer;
    Mamba2Layer& sequential = layer;
    const int64_t B = 3, L = 40;
    const Tensor x = testing::random_tensor({B, L, c.d_model}, 99);
    Tensor y_ref = Tensor::empty(DType::kF32, {B, L, c.d_model});
    Context one("ref", 1);
    auto st_ref = sequential.make_state(B);
    sequential.forward(x, y_ref, st_ref.get(), one);

    for (int threads : {1, 2}) {
      Context ctx(GetParam(), threads);
      // Whole sequence at once.
      Tensor y = Tensor::empty(DType::kF32, {B, L, c.d_model});
      auto st = chunked.make_state(B);
      chunked.forward(x, y, st.get(), ctx);
      EXPECT_LE(testing::max_rel_error(y, y_ref), 1e-5) << "groups " << groups;
      // The same sequence in three calls, the state carried between them.
      auto st2 = chunked.make_state(B);
      Tensor y_parts = Tensor::empty(DType::kF32, {B, L, c.d_model});
      for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 5}, {5, 6}, {6, L}}) {
        Tensor xp = Tensor::empty(DType::kF32, {B, t1 - t0, c.d_model});
        Tensor yp = Tensor::empty(DType::kF32, {B, t1 - t0, c.d_model});
        for (int64_t b = 0; b < B; ++b)
          std::copy_n(x.data<float>() + (b * L + t0) * c.d_model, (t1 - t0) * c.d_model,
                      xp.data<float>() + b * (t1 - t0) * c.d_model);
        chunked.forward(xp, yp, st2.get(), ctx);
        for (int64_t b = 0; b < B; ++b)
          std::copy_n(yp.data<float>() + b * (t1 - t0) * c.d_model, (t1 - t0) * c.d_model,
                      y_parts.data<float>() + (b * L + t0) * c.d_model);
      }
      EXPECT_LE(testing::max_rel_error(y_parts, y_ref), 1e-5) << "groups " << groups;
      auto& a = static_cast<Mamba2State&>(*st2);
      auto& r = static_cast<Mamba2State&>(*st_ref);
      EXPECT_LE(testing::max_rel_error(a.ssm, r.ssm), 1e-5);
      EXPECT_LE(testing::max_rel_error(a.conv, r.conv), 1e-6);  // GEMM blocking differs by call
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Mamba2LayerOn, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

TEST(Mamba2Layer, WslaTrainsOnlyTheBcRowsOfInProj) {
  Mamba2Config c = small_config(2, 16);
  Mamba2Layer layer(c);
  EXPECT_EQ(layer.trainable_parameters().size(), layer.parameters().size());
  layer.set_wsla(true);
  const auto slices = layer.trainable_parameters();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].param->name, "in_proj.weight");
  EXPECT_EQ(slices[0].row_begin, 2 * c.d_inner());
  EXPECT_EQ(slices[0].row_end, 2 * c.d_inner() + 2 * c.ngroups * c.d_state);
}

}  // namespace
}  // namespace ssm
