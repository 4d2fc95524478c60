// Validation of a swap request and its lowering to LayerDescs (torch side, shared by both paths).
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "kvswap_layout.h"

namespace teola_kvswap {

struct Plan {
  std::vector<LayerDesc> layers;
  int64_t outer = 1;         // planes per layer (same for every layer)
  int64_t record_bytes = 0;  // bytes of one block record
  int64_t n = 0;             // number of blocks to move
  at::Tensor ids;            // CPU, contiguous int64, validated
  // The plan as one CPU int64 tensor: LayerDescs then ids (what the CUDA kernel reads).
  at::Tensor packed() const;
};

// Bytes of one block record for `caches` viewed with `block_dim` as the block dimension.
int64_t record_bytes(at::TensorList caches, int64_t block_dim);

// Checks caches, ids and buffer (device, dtype, shape, range, aliasing); raises a c10::Error naming
// the problem. `scatter` additionally rejects duplicate ids (two writes to one block).
Plan make_plan(at::TensorList caches, const at::Tensor& block_ids, int64_t block_dim,
               const at::Tensor& buffer, bool scatter, const char* op);

}  // namespace teola_kvswap
