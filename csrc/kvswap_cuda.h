// Launcher of the CUDA chunk-copy kernel (torch-free, so nvcc can check it without CUDA torch).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace teola_kvswap {

// plan_dev: device copy of Plan::packed(). to_buffer: gather (cache -> buf_dev), else scatter.
cudaError_t launch_copy_chunks(const int64_t* plan_dev, int64_t num_layers, int64_t outer,
                               int64_t n, int64_t record_bytes, char* buf_dev, bool to_buffer,
                               cudaStream_t stream);

}  // namespace teola_kvswap
