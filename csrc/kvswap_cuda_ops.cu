// CUDA implementations of torch.ops.teola_kvswap.gather / scatter.
// Swap-out: one gather kernel into a contiguous device staging buffer, then one cudaMemcpyAsync into
// the (pinned) host buffer. Swap-in: one cudaMemcpyAsync into staging, then one scatter kernel.
// Everything is queued on the current stream; callers synchronize before reusing the host buffer.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "kvswap_cuda.h"
#include "kvswap_plan.h"

namespace teola_kvswap {
namespace {

at::Tensor plan_on_device(const Plan& p, const at::Device& dev) {
  // Pinned + non_blocking: the copy is queued on the current stream without a host sync; torch's
  // host allocator keeps the pinned plan alive until that copy has run.
  return p.packed().pin_memory().to(dev, /*non_blocking=*/true);
}

void gather_cuda(at::TensorList caches, const at::Tensor& block_ids, const at::Tensor& out,
                 int64_t block_dim, int64_t /*mode*/,
                 int64_t /*threads*/) {
  Plan p = make_plan(caches, block_ids, block_dim, out, /*scatter=*/false, "teola_kvswap.gather");
  if (p.n == 0) return;
  const at::Device dev = caches[0].device();
  c10::cuda::CUDAGuard guard(dev);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev.index()).stream();
  at::Tensor plan = plan_on_device(p, dev);
  const int64_t nbytes = p.n * p.record_bytes;
  at::Tensor staging = out.is_cuda() ? out : at::empty({nbytes}, caches[0].options().dtype(at::kByte));
  C10_CUDA_CHECK(launch_copy_chunks(plan.data_ptr<int64_t>(), static_cast<int64_t>(p.layers.size()),
                                    p.outer, p.n, p.record_bytes,
                                    static_cast<char*>(staging.data_ptr()), true, stream));
  if (!out.is_cuda()) {
    C10_CUDA_CHECK(cudaMemcpyAsync(out.data_ptr(), staging.data_ptr(), nbytes,
                                   cudaMemcpyDeviceToHost, stream));
  }
}

void scatter_cuda(const at::Tensor& src, at::TensorList caches, const at::Tensor& block_ids,
                  int64_t block_dim, int64_t /*mode*/,
                 int64_t /*threads*/) {
  Plan p = make_plan(caches, block_ids, block_dim, src, /*scatter=*/true, "teola_kvswap.scatter");
  if (p.n == 0) return;
  const at::Device dev = caches[0].device();
  c10::cuda::CUDAGuard guard(dev);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev.index()).stream();
  at::Tensor plan = plan_on_device(p, dev);
  const int64_t nbytes = p.n * p.record_bytes;
  at::Tensor staging = src;
  if (!src.is_cuda()) {
    staging = at::empty({nbytes}, caches[0].options().dtype(at::kByte));
    C10_CUDA_CHECK(cudaMemcpyAsync(staging.data_ptr(), src.data_ptr(), nbytes,
                                   cudaMemcpyHostToDevice, stream));
  }
  C10_CUDA_CHECK(launch_copy_chunks(plan.data_ptr<int64_t>(), static_cast<int64_t>(p.layers.size()),
                                    p.outer, p.n, p.record_bytes,
                                    static_cast<char*>(staging.data_ptr()), false, stream));
}

}  // namespace

TORCH_LIBRARY_IMPL(teola_kvswap, CUDA, m) {
  m.impl("gather", &gather_cuda);
  m.impl("scatter", &scatter_cuda);
}

}  // namespace teola_kvswap
