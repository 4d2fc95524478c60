// CUDA path, torch-free: one kernel copies every (block, layer, plane) chunk between the scattered
// cache blocks and a contiguous device staging buffer. The binding (kvswap_cuda_ops.cu) pairs it with
// one cudaMemcpyAsync to or from pinned host memory, instead of one small copy per block.
#include <cuda_runtime.h>

#include <cstdint>

#include "kvswap_layout.h"
#include "kvswap_cuda.h"

namespace teola_kvswap {
namespace {

__device__ __forceinline__ void copy_chunk(char* dst, const char* src, int64_t len) {
  const bool aligned = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
                         static_cast<uintptr_t>(len)) & 15) == 0;
  if (aligned) {
    const int64_t n = len / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) d[k] = s[k];
  } else {
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) dst[k] = src[k];
  }
}

// One thread block per chunk (grid-stride when there are more chunks than blocks).
__global__ void copy_chunks_kernel(const int64_t* __restrict__ plan, int64_t num_layers,
                                   int64_t outer, int64_t n, int64_t record_bytes, char* buf,
                                   bool to_buffer) {
  const LayerDesc* layers = reinterpret_cast<const LayerDesc*>(plan);
  const int64_t* ids = plan + num_layers * kDescFields;
  const int64_t units = n * num_layers * outer;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t o = u % outer;
    const int64_t l = (u / outer) % num_layers;
    const int64_t i = u / (outer * num_layers);
    const LayerDesc d = layers[l];
    char* chunk = reinterpret_cast<char*>(d.base) + o * d.outer_stride + ids[i] * d.block_stride;
    char* rec = buf + i * record_bytes + d.record_offset + o * d.inner_bytes;
    if (to_buffer) {
      copy_chunk(rec, chunk, d.inner_bytes);
    } else {
      copy_chunk(chunk, rec, d.inner_bytes);
    }
  }
}

}  // namespace

cudaError_t launch_copy_chunks(const int64_t* plan_dev, int64_t num_layers, int64_t outer,
                               int64_t n, int64_t record_bytes, char* buf_dev, bool to_buffer,
                               cudaStream_t stream) {
  const int64_t units = n * num_layers * outer;
  if (units == 0) return cudaSuccess;
  constexpr int64_t kMaxGrid = 65535;
  const unsigned grid = static_cast<unsigned>(units < kMaxGrid ? units : kMaxGrid);
  copy_chunks_kernel<<<grid, 256, 0, stream>>>(plan_dev, num_layers, outer, n, record_bytes,
                                               buf_dev, to_buffer);
  return cudaGetLastError();
}

}  // namespace teola_kvswap
