#include "ops/cuda/runtime.h"

#include "ssm/core/error.h"
#include "ssm/ops/backend.h"

namespace ssm::cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(cat("cuda: ", what, " failed: ", cudaGetErrorName(status), " (",
                    cudaGetErrorString(status), ")"));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(cat("cuda: ", what, " failed: ", cublasGetStatusName(status), " (",
                    cublasGetStatusString(status), ")"));
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

CudaResources::CudaResources() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    throw Error("cuda: no CUDA device is available (backend 'cuda' needs an NVIDIA GPU)");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  check(cublasCreate(&blas), "cublasCreate");
  check(cublasSetStream(blas, stream), "cublasSetStream");
  // F32 weights compute in full F32 (the op tests hold them to 1e-5 of ref);
  // BF16/F16 weights use the tensor cores with F32 accumulation.
  check(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check(cublasLtCreate(&blas_lt), "cublasLtCreate");
}

CudaResources::~CudaResources() {
  if (blas_lt) cublasLtDestroy(blas_lt);
  if (blas) cublasDestroy(blas);
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
}

CudaResources& resources(Context& ctx) {
  auto* r = dynamic_cast<CudaResources*>(ctx.resources());
  SSM_CHECK(r, "context of backend '", ctx.backend().name(), "' has no CUDA resources");
  return *r;
}

}  // namespace ssm::cuda
