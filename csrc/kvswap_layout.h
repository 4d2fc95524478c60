// Torch-free description of where one layer's KV blocks live, shared by the CPU and CUDA paths.
//
// A layer's cache is seen as [outer, num_blocks, inner...]: `outer` planes (1 for vLLM 0.32's
// [num_blocks, ...] layout, 2 for the older [2, num_blocks, block_size, heads, head_dim] one),
// and for every (plane, block) one dense chunk of `inner_bytes` bytes.  A swap buffer holds one
// record per swapped block; a record is every layer's chunks back to back:
//   record(i) = [layer 0: plane 0 chunk, plane 1 chunk, ...][layer 1: ...]...
#pragma once
#include <cstdint>

namespace teola_kvswap {

struct LayerDesc {
  int64_t base;           // address of the layer's first byte, as an integer
  int64_t outer_stride;   // bytes between planes
  int64_t block_stride;   // bytes between consecutive blocks
  int64_t inner_bytes;    // bytes of one (plane, block) chunk
  int64_t record_offset;  // where this layer's chunks start inside a record
};

// A plan packed as int64: num_layers LayerDescs, then the n block ids.
constexpr int64_t kDescFields = sizeof(LayerDesc) / sizeof(int64_t);
static_assert(kDescFields == 5, "LayerDesc must be five int64 fields");

}  // namespace teola_kvswap
