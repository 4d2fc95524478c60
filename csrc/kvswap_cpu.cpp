// CPU path of the batched KV swap: one OpenMP-parallel pass over every (block, layer, plane) chunk.
// Also defines the operator schemas (torch.ops.teola_kvswap.*) and the Python module stub.
#include <Python.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <immintrin.h>

#include "kvswap_plan.h"

namespace teola_kvswap {
namespace {

// Copies go multi-threaded only above this many bytes and with more than kMinParallelThreads torch
// threads. One core nearly saturates memory bandwidth with streaming copies, and on a loaded machine
// an OpenMP barrier waiting for a descheduled thread costs milliseconds: on the 2-core dev box, 2
// threads were slower than 1 at every size from 1.5 to 384 MiB (the engine needs the other core).
constexpr int64_t kParallelBytes = 64 << 20;
constexpr int kMinParallelThreads = 3;
// Above this many bytes in total, chunks are written with non-temporal stores: the data will not be
// read again soon, and streaming stores skip the read-for-ownership of every destination line
// (measured: scatter ~1.8x, gather ~1.1x faster than memcpy at 6-384 MiB).
constexpr int64_t kStreamingBytes = 1 << 20;

__attribute__((target("avx2"))) void copy_streaming(char* dst, const char* src, int64_t len) {
  const int64_t head = std::min<int64_t>(len, (32 - (reinterpret_cast<uintptr_t>(dst) & 31)) & 31);
  std::memcpy(dst, src, head);
  int64_t i = head;
  for (; i + 128 <= len; i += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  std::memcpy(dst + i, src + i, len - i);
}

bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

// to_buffer: cache chunks -> buffer records (gather); otherwise buffer records -> cache chunks.
void copy_chunks(const Plan& p, char* buf, bool to_buffer, int64_t mode, int64_t threads_req) {
  const int64_t L = static_cast<int64_t>(p.layers.size());
  const int64_t O = p.outer;
  const int64_t units = p.n * L * O;
  const int64_t total = p.n * p.record_bytes;
  const bool streaming = have_avx2() && (mode == 1 || (mode < 0 && total >= kStreamingBytes));
  const int64_t* ids = p.ids.data_ptr<int64_t>();
  const LayerDesc* layers = p.layers.data();
  const int auto_threads = at::get_num_threads() >= kMinParallelThreads && total >= kParallelBytes
                               ? at::get_num_threads() : 1;
  const int threads = threads_req > 0 ? static_cast<int>(threads_req) : auto_threads;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t o = u % O;
    const int64_t l = (u / O) % L;
    const int64_t i = u / (O * L);
    const LayerDesc& d = layers[l];
    char* chunk = reinterpret_cast<char*>(d.base) + o * d.outer_stride + ids[i] * d.block_stride;
    char* rec = buf + i * p.record_bytes + d.record_offset + o * d.inner_bytes;
    char* dst = to_buffer ? rec : chunk;
    const char* src = to_buffer ? chunk : rec;
    if (streaming) {
      copy_streaming(dst, src, d.inner_bytes);
    } else {
      std::memcpy(dst, src, d.inner_bytes);
    }
  }
  if (streaming) _mm_sfence();
}

void gather_cpu(at::TensorList caches, const at::Tensor& block_ids, const at::Tensor& out,
                int64_t block_dim, int64_t mode, int64_t threads) {
  Plan p = make_plan(caches, block_ids, block_dim, out, /*scatter=*/false, "teola_kvswap.gather");
  if (p.n) copy_chunks(p, static_cast<char*>(out.data_ptr()), /*to_buffer=*/true, mode, threads);
}

void scatter_cpu(const at::Tensor& src, at::TensorList caches, const at::Tensor& block_ids,
                 int64_t block_dim, int64_t mode, int64_t threads) {
  Plan p = make_plan(caches, block_ids, block_dim, src, /*scatter=*/true, "teola_kvswap.scatter");
  if (p.n) copy_chunks(p, static_cast<char*>(src.data_ptr()), /*to_buffer=*/false, mode, threads);
}

}  // namespace

TORCH_LIBRARY(teola_kvswap, m) {
  // CPU tuning knobs (ignored on CUDA): mode -1 picks the copy routine by size, 0 forces memcpy,
  // 1 forces streaming stores; threads 0 picks by size (torch's thread count above 64 MiB on 3+ threads), n > 0
  // forces n OpenMP threads.
  m.def("gather(Tensor[] caches, Tensor block_ids, Tensor(a!) out, int block_dim, int mode=-1, "
        "int threads=0) -> ()");
  m.def("scatter(Tensor src, Tensor(a!)[] caches, Tensor block_ids, int block_dim, int mode=-1, "
        "int threads=0) -> ()");
  m.def("record_bytes(Tensor[] caches, int block_dim) -> int", &record_bytes);
}

TORCH_LIBRARY_IMPL(teola_kvswap, CPU, m) {
  m.impl("gather", &gather_cpu);
  m.impl("scatter", &scatter_cpu);
}

}  // namespace teola_kvswap

#ifndef TEOLA_WITH_CUDA
#define TEOLA_WITH_CUDA 0
#endif

static PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "teola_kvswap",
                              "Batched KV-cache swap kernels; the ops are torch.ops.teola_kvswap.*",
                              -1, nullptr};

PyMODINIT_FUNC PyInit_teola_kvswap(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m != nullptr) PyModule_AddIntConstant(m, "WITH_CUDA", TEOLA_WITH_CUDA);
  return m;
}
