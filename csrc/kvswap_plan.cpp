// Validation of swap requests: every check that stands between a bad block table and a wild write.
#include "kvswap_plan.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

namespace teola_kvswap {
namespace {

struct Span {
  int64_t outer, num_blocks, outer_stride, block_stride, inner_bytes;
};

// One layer's geometry; the chunk of one (plane, block) must be dense in memory (its dims may be
// permuted, as with vLLM's HND stride orders: a byte copy does not care about the order inside).
Span describe(const at::Tensor& t, int64_t block_dim, size_t layer, const char* op) {
  TORCH_CHECK(t.defined(), op, ": cache of layer ", layer, " is undefined");
  TORCH_CHECK(block_dim == 0 || block_dim == 1, op, ": block_dim must be 0 ([num_blocks, ...]) or 1 "
              "([2, num_blocks, ...]), got ", block_dim);
  TORCH_CHECK(t.dim() > block_dim + 1, op, ": cache of layer ", layer, " has shape ", t.sizes(),
              "; expected at least ", block_dim + 2, " dims with blocks on dim ", block_dim);
  TORCH_CHECK(t.is_non_overlapping_and_dense(), op, ": cache of layer ", layer,
              " must be a dense tensor (got shape ", t.sizes(), " strides ", t.strides(), ")");
  const int64_t esize = t.element_size();
  std::vector<std::pair<int64_t, int64_t>> inner;  // (stride, size)
  int64_t inner_elems = 1;
  for (int64_t d = block_dim + 1; d < t.dim(); ++d) {
    inner.emplace_back(t.stride(d), t.size(d));
    inner_elems *= t.size(d);
  }
  std::sort(inner.begin(), inner.end());
  int64_t expect = 1;
  for (auto [stride, size] : inner) {
    if (size == 1) continue;
    TORCH_CHECK(stride == expect, op, ": cache of layer ", layer, " (shape ", t.sizes(), " strides ",
                t.strides(), ") does not keep one block's data contiguous after dim ", block_dim);
    expect *= size;
  }
  Span s;
  s.outer = block_dim == 1 ? t.size(0) : 1;
  s.num_blocks = t.size(block_dim);
  s.outer_stride = block_dim == 1 ? t.stride(0) * esize : 0;
  s.block_stride = t.stride(block_dim) * esize;
  s.inner_bytes = inner_elems * esize;
  return s;
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (a.device() != b.device() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  auto lo_a = reinterpret_cast<uintptr_t>(a.storage().data());
  auto lo_b = reinterpret_cast<uintptr_t>(b.storage().data());
  return lo_a < lo_b + b.storage().nbytes() && lo_b < lo_a + a.storage().nbytes();
}

}  // namespace

at::Tensor Plan::packed() const {
  const int64_t L = static_cast<int64_t>(layers.size());
  at::Tensor out = at::empty({L * kDescFields + n}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  std::memcpy(p, layers.data(), L * sizeof(LayerDesc));
  if (n) std::memcpy(p + L * kDescFields, ids.data_ptr<int64_t>(), n * sizeof(int64_t));
  return out;
}

int64_t record_bytes(at::TensorList caches, int64_t block_dim) {
  int64_t total = 0;
  for (size_t l = 0; l < caches.size(); ++l) {
    Span s = describe(caches[l], block_dim, l, "record_bytes");
    total += s.outer * s.inner_bytes;
  }
  return total;
}

Plan make_plan(at::TensorList caches, const at::Tensor& block_ids, int64_t block_dim,
               const at::Tensor& buffer, bool scatter, const char* op) {
  TORCH_CHECK(!caches.empty(), op, ": no cache tensors given");
  const at::Device dev = caches[0].device();
  TORCH_CHECK(dev.is_cpu() || dev.is_cuda(), op, ": caches must be on cpu or cuda, got ", dev);
  Plan p;
  std::vector<int64_t> num_blocks;
  for (size_t l = 0; l < caches.size(); ++l) {
    const at::Tensor& t = caches[l];
    TORCH_CHECK(t.defined() && t.device() == dev, op, ": cache of layer ", l, " is on ",
                t.defined() ? t.device() : at::Device(at::kCPU), ", layer 0 on ", dev,
                "; all layers must share one device");
    Span s = describe(t, block_dim, l, op);
    if (l == 0) p.outer = s.outer;
    TORCH_CHECK(s.outer == p.outer, op, ": layer ", l, " has ", s.outer, " planes, layer 0 has ",
                p.outer);
    LayerDesc d;
    d.base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
    d.outer_stride = s.outer_stride;
    d.block_stride = s.block_stride;
    d.inner_bytes = s.inner_bytes;
    d.record_offset = p.record_bytes;
    p.record_bytes += s.outer * s.inner_bytes;
    p.layers.push_back(d);
    num_blocks.push_back(s.num_blocks);
  }

  TORCH_CHECK(block_ids.defined() && block_ids.device().is_cpu(), op,
              ": block_ids must be a CPU tensor (the block table lives on the host)");
  TORCH_CHECK(block_ids.dim() == 1, op, ": block_ids must be 1-D, got shape ", block_ids.sizes());
  TORCH_CHECK(block_ids.scalar_type() == at::kLong || block_ids.scalar_type() == at::kInt, op,
              ": block_ids must be int64 or int32, got ", block_ids.scalar_type());
  p.ids = block_ids.to(at::kLong).contiguous();
  p.n = p.ids.numel();
  const int64_t max_blocks = *std::min_element(num_blocks.begin(), num_blocks.end());
  const int64_t* ids = p.ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < p.n; ++i) {
    TORCH_CHECK(ids[i] >= 0 && ids[i] < max_blocks, op, ": block id ", ids[i], " at position ", i,
                " is out of range [0, ", max_blocks, ")");
  }
  if (scatter && p.n > 1) {
    std::vector<bool> seen(max_blocks, false);
    for (int64_t i = 0; i < p.n; ++i) {
      TORCH_CHECK(!seen[ids[i]], op, ": block id ", ids[i],
                  " appears twice; a scatter may write each block once");
      seen[ids[i]] = true;
    }
  }

  TORCH_CHECK(buffer.defined(), op, ": buffer is undefined");
  TORCH_CHECK(buffer.device() == dev || (dev.is_cuda() && buffer.device().is_cpu()), op,
              ": buffer is on ", buffer.device(), " but caches are on ", dev);
  TORCH_CHECK(buffer.is_contiguous(), op, ": buffer must be contiguous");
  TORCH_CHECK(static_cast<int64_t>(buffer.nbytes()) == p.n * p.record_bytes, op, ": buffer holds ",
              buffer.nbytes(), " bytes; ", p.n, " blocks of ", p.record_bytes,
              " bytes (all layers) need ", p.n * p.record_bytes);
  for (size_t l = 0; l < caches.size(); ++l) {
    TORCH_CHECK(!overlaps(buffer, caches[l]), op, ": buffer shares memory with the cache of layer ",
                l);
  }
  return p;
}

}  // namespace teola_kvswap
