// Gradient buckets over NCCL (builds with -DSSM_NCCL=ON; elsewhere every
// function but nccl_built() throws ssm::Error saying so). Each bucket's
// all-reduce (ncclAvg) runs on a communication stream of its own that
// waits for the backward's work so far, so the backward goes on meanwhile;
// in BF16 the bucket is rounded into a BF16 buffer, reduced and widened
// back. NVLink multicast stays off (NCCL_NVLS_ENABLE=0) and nothing here
// calls cuMulticastCreate.
#pragma once

#include <memory>
#include <string>

#include "ssm/ops/context.h"
#include "ssm/train/grad_reducer.h"

namespace ssm {

bool nccl_built();
// NCCL's version as text ("2.28.3"), or why there is none.
std::string nccl_version();
// A fresh ncclUniqueId's bytes (rank 0 makes it and hands it round).
std::string nccl_unique_id();
// Joins the communicator (every rank at once) on ctx's GPU. elements: the
// largest bucket (the BF16 buffer's size).
std::unique_ptr<GradientTransport> make_nccl_transport(const std::string& unique_id, int rank,
                                                       int world, Context& ctx, bool bf16,
                                                       int64_t elements);

}  // namespace ssm
