#include "ssm/train/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "dist_nccl/bf16_cast.h"
#include "ops/cuda/runtime.h"
#include "ssm/core/error.h"

namespace ssm {
namespace {

void check_nccl(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  const char* detail = ncclGetLastError(comm);
  throw Error(cat("NCCL ", what, ": ", ncclGetErrorString(r),
                  detail && *detail ? cat(" (", detail, ")") : std::string()));
}

// NVLink multicast (NVLS) stays off in every process that talks NCCL.
void multicast_off() { ::setenv("NCCL_NVLS_ENABLE", "0", 1); }

class NcclTransport : public GradientTransport {
 public:
  NcclTransport(const std::string& unique_id, int rank, int world, Context& ctx, bool bf16,
                int64_t elements)
      : compute_(cuda::stream(ctx)), bf16_(bf16) {
    multicast_off();
    ncclUniqueId id;
    if (unique_id.size() != sizeof id)
      throw Error(cat("the NCCL id from rank 0 has ", unique_id.size(), " bytes, expected ",
                      sizeof id, " (do all ranks run the same build and --backend?)"));
    std::memcpy(&id, unique_id.data(), sizeof id);
    // Its own stream: the buckets' reductions run beside the backward.
    cuda::check(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking),
                "cudaStreamCreate");
    cuda::check(cudaEventCreateWithFlags(&grads_ready_, cudaEventDisableTiming), "cudaEventCreate");
    cuda::check(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming), "cudaEventCreate");
    // Timed, both on the compute stream: its wait for the reduction.
    cuda::check(cudaEventCreate(&wait_begin_), "cudaEventCreate");
    cuda::check(cudaEventCreate(&wait_end_), "cudaEventCreate");
    if (bf16_)
      cuda::check(cudaMalloc(&half_, static_cast<size_t>(elements) * 2),
                  "cudaMalloc (bf16 bucket)");
    check_nccl(ncclCommInitRank(&comm_, world, id, rank), "ncclCommInitRank");
  }
  ~NcclTransport() override {
    if (comm_) ncclCommDestroy(comm_);
    if (half_) cudaFree(half_);
    if (grads_ready_) cudaEventDestroy(grads_ready_);
    if (reduced_) cudaEventDestroy(reduced_);
    if (wait_begin_) cudaEventDestroy(wait_begin_);
    if (wait_end_) cudaEventDestroy(wait_end_);
    if (comm_stream_) cudaStreamDestroy(comm_stream_);
  }
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  void all_reduce_mean(float* data, int64_t n) override {
    // The bucket's gradients are final once the compute stream's work so
    // far is done; the communication stream waits for that, not the host.
    cuda::check(cudaEventRecord(grads_ready_, compute_), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(comm_stream_, grads_ready_, 0), "cudaStreamWaitEvent");
    const size_t count = static_cast<size_t>(n);
    if (bf16_) {
      // One BF16 buffer serves every bucket: the stream runs them in order.
      nccl::f32_to_bf16(data, half_, n, comm_stream_);
      check_nccl(ncclAllReduce(half_, half_, count, ncclBfloat16, ncclAvg, comm_, comm_stream_),
                 "ncclAllReduce", comm_);
      nccl::bf16_to_f32(half_, data, n, comm_stream_);
    } else {
      check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclAvg, comm_, comm_stream_),
                 "ncclAllReduce", comm_);
    }
    pending_ = true;
  }

  void wait() override {
    if (!pending_) return;
    cuda::check(cudaEventRecord(reduced_, comm_stream_), "cudaEventRecord");
    cuda::check(cudaEventRecord(wait_begin_, compute_), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(compute_, reduced_, 0), "cudaStreamWaitEvent");
    cuda::check(cudaEventRecord(wait_end_, compute_), "cudaEventRecord");
    pending_ = false;
    timed_ = true;
  }

  // A measurement, never a failure: -1 when the events are not done.
  double last_wait_ms() override {
    float ms = 0;
    if (!timed_ || cudaEventQuery(wait_end_) != cudaSuccess ||
        cudaEventElapsedTime(&ms, wait_begin_, wait_end_) != cudaSuccess) {
      cudaGetLastError();  // a failed query leaves no error behind
      return -1;
    }
    return ms;
  }

 private:
  cudaStream_t compute_;
  bool bf16_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t grads_ready_ = nullptr, reduced_ = nullptr;
  cudaEvent_t wait_begin_ = nullptr, wait_end_ = nullptr;
  bool timed_ = false;
  void* half_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool pending_ = false;
};

}  // namespace

bool nccl_built() { return true; }

std::string nccl_version() {
  int v = 0;
  check_nccl(ncclGetVersion(&v), "ncclGetVersion");
  return cat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

std::string nccl_unique_id() {
  multicast_off();
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

std::unique_ptr<GradientTransport> make_nccl_transport(const std::string& unique_id, int rank,
                                                       int world, Context& ctx, bool bf16,
                                                       int64_t elements) {
  return std::make_unique<NcclTransport>(unique_id, rank, world, ctx, bf16, elements);
}

}  // namespace ssm
