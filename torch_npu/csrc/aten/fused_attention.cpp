// Fused (flash) attention kernels of the simulated NPU.
//
// Attention is computed block by block with an online softmax, so no Sq x Skv score matrix
// is ever materialised: each thread holds one query block against one key/value block at a
// time. The mask is evaluated per element from a band rule (the Ascend sparse modes: causal
// top-left/bottom-right, band, pre/next tokens) and an optional explicit boolean mask; blocks
// entirely outside the band are skipped. Dropout draws its keep mask from a counter-based
// generator (Philox 4x32-10) indexed by (seed, offset + element index), so the backward pass
// regenerates exactly the forward mask without storing it.
//
// The operators are CPU kernels in the internal `npu` namespace; on npu tensors the
// runtime's fallback runs them over the same memory (outputs land in device memory and graph
// capture records them like any other operator).
#include "torch_npu/csrc/aten/fused_attention.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/generator.h"

namespace torch_npu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- dropout keep mask ------------------------------------------------------------------

struct Philox {
  uint32_t key0, key1;
  explicit Philox(uint64_t seed) : key0(static_cast<uint32_t>(seed)), key1(static_cast<uint32_t>(seed >> 32)) {}

  // Four 32-bit draws for the 128-bit counter (ctr, 0).
  void draw(uint64_t ctr, uint32_t out[4]) const {
    uint32_t c0 = static_cast<uint32_t>(ctr), c1 = static_cast<uint32_t>(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
      uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
};

// Writes keep[c] = 1/keep_prob or 0 for the elements first, first+1, ..., first+n-1.
void dropout_row(const Philox& rng, uint64_t first, int64_t n, float keep_prob, float* keep) {
  const float inv = 1.0f / keep_prob;
  uint32_t lanes[4];
  uint64_t cached = ~uint64_t(0);
  for (int64_t c = 0; c < n; ++c) {
    uint64_t e = first + static_cast<uint64_t>(c);
    uint64_t ctr = e >> 2;
    if (ctr != cached) {
      rng.draw(ctr, lanes);
      cached = ctr;
    }
    float u = static_cast<float>(lanes[e & 3] >> 8) * (1.0f / 16777216.0f);
    keep[c] = u < keep_prob ? inv : 0.0f;
  }
}

// ---- vectorised row loops -------------------------------------------------------------------
//
// The softmax work between the block matrix products (row max, exp, row sums, rescaling) is
// as many operations as the products themselves; written as scalar loops with std::exp it
// took most of the kernel's time. These loops are written so the compiler vectorises them:
// 16 independent lanes for the reductions and a branch-free exp. On x86-64 with GCC each is
// built for AVX-512, AVX2 and the baseline and the loader picks the clone the CPU supports
// (the results do not depend on the clone: the operation order is the same in all, and
// contraction into FMA, which GCC does by default where the target has it, is off here).

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NPU_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#define NPU_VECTOR_CLONES_END _Pragma("GCC pop_options")
#else
#define NPU_VECTOR_CLONES
#define NPU_VECTOR_CLONES_END
#endif

constexpr int64_t kLanes = 16;

// exp(x) within 1e-7 relative for x >= -87 and exactly 0 below (so masked scores of -inf give
// 0): Cody-Waite reduction x = n ln2 + r, a degree-6 polynomial for exp(r), 2^n from the bits.
inline float exp_approx(float x) {
  const float xc = x > -87.0f ? x : -87.0f;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float poly = 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const float er = poly * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof(two_n));
  return x < -87.0f ? 0.0f : er * two_n;
}

NPU_VECTOR_CLONES float row_max(const float* x, int64_t n) {
  float acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = kNegInf;
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = acc[l] > x[c + l] ? acc[l] : x[c + l];
  }
  float m = kNegInf;
  for (int64_t l = 0; l < kLanes; ++l) m = m > acc[l] ? m : acc[l];
  for (; c < n; ++c) m = m > x[c] ? m : x[c];
  return m;
}

// x[c] = exp(x[c] - shift); returns the sum of the new x.
NPU_VECTOR_CLONES float exp_shifted_sum(float* x, int64_t n, float shift) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float e = exp_approx(x[c + l] - shift);
      x[c + l] = e;
      acc[l] += e;
    }
  }
  float tail = 0.0f;
  for (; c < n; ++c) {
    const float e = exp_approx(x[c] - shift);
    x[c] = e;
    tail += e;
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum + tail;
}

// x[c] = exp(x[c] - shift).
NPU_VECTOR_CLONES void exp_shifted(float* x, int64_t n, float shift) {
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) x[c + l] = exp_approx(x[c + l] - shift);
  }
  for (; c < n; ++c) x[c] = exp_approx(x[c] - shift);
}

NPU_VECTOR_CLONES void scale_in_place(float* x, int64_t n, float factor) {
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) x[c + l] *= factor;
  }
  for (; c < n; ++c) x[c] *= factor;
}

// The softmax gradient dS = P * (dP - delta), written over dP.
NPU_VECTOR_CLONES void softmax_grad_row(const float* prob, float* dprob, int64_t n, float delta) {
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) dprob[c + l] = prob[c + l] * (dprob[c + l] - delta);
  }
  for (; c < n; ++c) dprob[c] = prob[c] * (dprob[c] - delta);
}

NPU_VECTOR_CLONES_END

// ---- strided loads and stores -----------------------------------------------------------

// dst = factor * base[rows x cols] as float, row-major with row stride `cols`.
template <typename T>
void load_rows(const T* base, int64_t row_stride, int64_t col_stride, int64_t rows, int64_t cols, float* dst,
               float factor = 1.0f) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = base + r * row_stride;
    float* d = dst + r * cols;
    if constexpr (std::is_same_v<T, float>) {
      if (col_stride == 1) {
        std::memcpy(d, src, sizeof(float) * cols);
        if (factor != 1.0f) scale_in_place(d, cols, factor);
        continue;
      }
    }
    for (int64_t c = 0; c < cols; ++c) d[c] = factor * static_cast<float>(src[c * col_stride]);
  }
}

// A block of `rows` rows of width `cols` starting at base, readable as float with unit column
// stride: the tensor's own memory when it already is (float, unit column stride), else a
// converted copy in `buffer`. Returns the pointer and sets `ld` to its row stride.
template <typename T>
const float* rows_as_float(const T* base, int64_t row_stride, int64_t col_stride, int64_t rows, int64_t cols,
                           float* buffer, int64_t& ld) {
  if constexpr (std::is_same_v<T, float>) {
    if (col_stride == 1 && row_stride >= cols) {
      ld = row_stride;
      return base;
    }
  }
  load_rows(base, row_stride, col_stride, rows, cols, buffer);
  ld = cols;
  return buffer;
}

// dst[c] += factor * bias[c * stride] for one row of an additive bias of any float dtype.
using BiasRowFn = void (*)(const void* base, int64_t stride, int64_t n, float factor, float* dst);

template <typename B>
void add_bias_row(const void* base, int64_t stride, int64_t n, float factor, float* dst) {
  const B* b = static_cast<const B*>(base);
  for (int64_t c = 0; c < n; ++c) dst[c] += factor * static_cast<float>(b[c * stride]);
}

BiasRowFn bias_row_fn(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return &add_bias_row<float>;
    case at::kDouble: return &add_bias_row<double>;
    case at::kHalf: return &add_bias_row<at::Half>;
    case at::kBFloat16: return &add_bias_row<at::BFloat16>;
    default: TORCH_CHECK(false, "fused attention: unsupported bias dtype ", t);
  }
}

at::Tensor matrix(const float* data, int64_t rows, int64_t cols, int64_t ld) {
  return at::from_blob(const_cast<float*>(data), {rows, cols}, {ld, 1}, at::TensorOptions().dtype(at::kFloat));
}

// ---- the canonical problem --------------------------------------------------------------

struct Segment {
  int64_t batch;     // batch index into q/k/v
  int64_t q_begin, q_len, kv_begin, kv_len;  // rows of q and k/v along S
  uint64_t drop_base;  // index of this segment's first element in the dropout stream
  int64_t mask_row0, mask_col0;  // mask/bias position of the segment's first row/column
};

struct Problem {
  int64_t B = 0, N1 = 0, N2 = 0, group = 1, D = 0, Dv = 0, Sq = 0, Skv = 0;
  bool packed = false;
  std::vector<Segment> segments;
  float scale = 1, bias_scale = 1, keep_prob = 1;
  uint64_t seed = 0, offset = 0;
  int64_t band_lo = -kUnboundedBand, band_hi = kUnboundedBand;
  bool bottom_right = false;
  // Explicit mask (nonzero = masked) and bias, broadcast to [B, N1, *, *]: base pointers and strides.
  const uint8_t* mask = nullptr;
  int64_t ms[4] = {0, 0, 0, 0};
  const void* bias = nullptr;
  int64_t bs[4] = {0, 0, 0, 0};
  BiasRowFn bias_row = nullptr;
  const float* sink = nullptr;  // [N1]

  int64_t shift(const Segment& s) const { return bottom_right ? s.kv_len - s.q_len : 0; }
  // Key positions [begin, end) row block [i0, i1) of segment s may attend to.
  std::pair<int64_t, int64_t> kv_range(const Segment& s, int64_t i0, int64_t i1) const {
    int64_t sh = shift(s);
    int64_t b = std::max<int64_t>(0, i0 + sh + band_lo);
    int64_t e = std::min<int64_t>(s.kv_len, (i1 - 1) + sh + band_hi + 1);
    return {b, std::max(b, e)};
  }
  // Query rows [begin, end) that may attend to key block [j0, j1).
  std::pair<int64_t, int64_t> q_range(const Segment& s, int64_t j0, int64_t j1) const {
    int64_t sh = shift(s);
    int64_t b = std::max<int64_t>(0, j0 - sh - band_hi);
    int64_t e = std::min<int64_t>(s.q_len, (j1 - 1) - sh - band_lo + 1);
    return {b, std::max(b, e)};
  }

  // Scores of rows [i0, i0+rows) x cols [j0, j0+cols) of head n: s = scale*qk + bias_scale*bias,
  // -inf where masked. `S` holds scale*qk on entry (the kernels fold the scale into one operand
  // of the product), row stride `cols`.
  void finish_scores(const Segment& s, int64_t n, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                     float* S) const {
    const int64_t sh = shift(s);
    const int64_t mb = s.batch;
    const int64_t mj = s.mask_col0 + j0;
    const bool inside_band = (i0 + rows - 1) + sh + band_lo <= j0 && i0 + sh + band_hi + 1 >= j0 + cols;
    if (inside_band && bias == nullptr && mask == nullptr) return;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = S + r * cols;
      const int64_t i = i0 + r;
      const int64_t mi = s.mask_row0 + i;
      if (bias != nullptr) {
        const char* b = static_cast<const char*>(bias);
        int64_t elem = mb * bs[0] + n * bs[1] + mi * bs[2] + mj * bs[3];
        bias_row(b + elem * bias_elem_size, bs[3], cols, bias_scale, row);
      }
      // Band: lo <= j - i - sh <= hi.
      int64_t allow_begin = std::max<int64_t>(0, i + sh + band_lo - j0);
      int64_t allow_end = std::min<int64_t>(cols, i + sh + band_hi + 1 - j0);
      if (allow_end < allow_begin) allow_end = allow_begin;
      for (int64_t c = 0; c < allow_begin; ++c) row[c] = kNegInf;
      for (int64_t c = allow_end; c < cols; ++c) row[c] = kNegInf;
      if (mask != nullptr) {
        const uint8_t* m = mask + mb * ms[0] + n * ms[1] + mi * ms[2] + mj * ms[3];
        for (int64_t c = allow_begin; c < allow_end; ++c) {
          if (m[c * ms[3]] != 0) row[c] = kNegInf;
        }
      }
    }
  }
  int64_t bias_elem_size = 4;
  bool partial = false;  // some rows or keys lie outside every sequence
};


void check_perm(at::IntArrayRef perm, const char* what) {
  TORCH_CHECK(perm.size() == 4, "fused attention: ", what, " must have 4 entries");
  bool seen[4] = {false, false, false, false};
  for (int64_t p : perm) {
    TORCH_CHECK(p >= 0 && p < 4 && !seen[p], "fused attention: ", what, " is not a permutation of 0..3");
    seen[p] = true;
  }
}

// A new tensor of logical `sizes` whose memory is laid out in the physical order `perm`.
at::Tensor empty_in_order(at::IntArrayRef sizes, at::IntArrayRef perm, const at::TensorOptions& opts) {
  std::vector<int64_t> phys(4), inv(4);
  for (int64_t i = 0; i < 4; ++i) phys[i] = sizes[perm[i]];
  for (int64_t i = 0; i < 4; ++i) inv[perm[i]] = i;
  return at::empty(phys, opts).permute(inv);
}

Problem make_problem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& mask,
                     const std::optional<at::Tensor>& sink, const SequenceSpec& seqs, double scale, double bias_scale, double keep_prob, int64_t seed,
                     int64_t offset, int64_t band_lo, int64_t band_hi, bool bottom_right,
                     std::vector<at::Tensor>& keep_alive) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "fused attention: query, key and value must be 4-D");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "fused attention: query, key and value must have one dtype");
  Problem p;
  p.B = q.size(0);
  p.N1 = q.size(1);
  p.Sq = q.size(2);
  p.D = q.size(3);
  p.N2 = k.size(1);
  p.Skv = k.size(2);
  p.Dv = v.size(3);
  TORCH_CHECK(k.size(0) == p.B && v.size(0) == p.B && k.size(3) == p.D && v.size(1) == p.N2 &&
                  v.size(2) == p.Skv,
              "fused attention: inconsistent query/key/value shapes ", q.sizes(), " ", k.sizes(), " ", v.sizes());
  TORCH_CHECK(p.N2 > 0 && p.N1 % p.N2 == 0, "fused attention: the query head count (", p.N1,
              ") must be a multiple of the key/value head count (", p.N2, ")");
  p.group = p.N1 / p.N2;
  p.scale = static_cast<float>(scale);
  p.bias_scale = static_cast<float>(bias_scale);
  p.keep_prob = static_cast<float>(keep_prob);
  p.seed = static_cast<uint64_t>(seed);
  p.offset = static_cast<uint64_t>(offset);
  p.band_lo = std::max(band_lo, -kUnboundedBand);
  p.band_hi = std::min(band_hi, kUnboundedBand);
  p.bottom_right = bottom_right;

  int64_t mask_rows = p.Sq, mask_cols = p.Skv;
  p.packed = seqs.packed;
  const int64_t nseq = seqs.packed ? static_cast<int64_t>(seqs.q_lens.value_or(at::IntArrayRef()).size()) : p.B;
  auto entry = [](at::OptionalIntArrayRef list, int64_t i, int64_t fallback, const char* what) -> int64_t {
    if (!list.has_value()) return fallback;
    TORCH_CHECK(static_cast<int64_t>(list->size()) > i, "fused attention: ", what, " has too few entries");
    return (*list)[i];
  };
  if (seqs.packed) {
    TORCH_CHECK(seqs.q_lens.has_value() && seqs.kv_lens.has_value() && seqs.kv_lens->size() == seqs.q_lens->size(),
                "fused attention: packed sequences need q_lens and kv_lens of one length");
    TORCH_CHECK(p.B == 1, "fused attention: packed sequences use batch 1");
    mask_rows = mask_cols = 0;
  }
  uint64_t base = 0;
  int64_t q_at = 0, kv_at = 0;
  for (int64_t i = 0; i < nseq; ++i) {
    Segment seg;
    seg.batch = seqs.packed ? 0 : i;
    seg.q_len = entry(seqs.q_lens, i, p.Sq, "q_lens");
    seg.kv_len = entry(seqs.kv_lens, i, p.Skv, "kv_lens");
    seg.q_begin = seqs.packed ? q_at : entry(seqs.q_starts, i, 0, "q_starts");
    seg.kv_begin = seqs.packed ? kv_at : entry(seqs.kv_starts, i, 0, "kv_starts");
    q_at += seg.q_len;
    kv_at += seg.kv_len;
    TORCH_CHECK(seg.q_len >= 0 && seg.kv_len >= 0 && seg.q_begin >= 0 && seg.kv_begin >= 0 &&
                    seg.q_begin + seg.q_len <= p.Sq && seg.kv_begin + seg.kv_len <= p.Skv,
                "fused attention: sequence ", i, " (rows ", seg.q_begin, "+", seg.q_len, ", keys ", seg.kv_begin,
                "+", seg.kv_len, ") is outside the tensors (", p.Sq, ", ", p.Skv, ")");
    seg.mask_row0 = seqs.packed ? 0 : seg.q_begin;
    seg.mask_col0 = seqs.packed ? 0 : seg.kv_begin;
    seg.drop_base = base;
    base += static_cast<uint64_t>(p.N1) * seg.q_len * seg.kv_len;
    if (seqs.packed) {
      mask_rows = std::max(mask_rows, seg.q_len);
      mask_cols = std::max(mask_cols, seg.kv_len);
    }
    p.segments.push_back(seg);
  }
  p.partial = seqs.packed || seqs.q_lens.has_value() || seqs.kv_lens.has_value();

  if (mask.has_value() && mask->defined()) {
    TORCH_CHECK(mask->dim() == 4, "fused attention: the mask must be 4-D here");
    TORCH_CHECK(mask->scalar_type() == at::kBool || mask->scalar_type() == at::kByte,
                "fused attention: the mask must be bool or uint8");
    TORCH_CHECK(mask->size(2) >= mask_rows && mask->size(3) >= mask_cols,
                "fused attention: the mask ", mask->sizes(), " does not cover ", mask_rows, " x ", mask_cols);
    at::Tensor m = mask->expand({p.B, p.N1, mask->size(2), mask->size(3)});
    keep_alive.push_back(m);
    p.mask = static_cast<const uint8_t*>(m.const_data_ptr());
    for (int i = 0; i < 4; ++i) p.ms[i] = m.stride(i);
  }
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 4, "fused attention: the bias must be 4-D here");
    TORCH_CHECK(bias->size(2) == 1 || bias->size(2) >= mask_rows, "fused attention: the bias does not cover the queries");
    TORCH_CHECK(bias->size(3) == 1 || bias->size(3) >= mask_cols, "fused attention: the bias does not cover the keys");
    at::Tensor b = bias->expand({p.B, p.N1, std::max<int64_t>(bias->size(2), mask_rows),
                                 std::max<int64_t>(bias->size(3), mask_cols)});
    keep_alive.push_back(b);
    p.bias = b.const_data_ptr();
    p.bias_row = bias_row_fn(b.scalar_type());
    p.bias_elem_size = b.element_size();
    for (int i = 0; i < 4; ++i) p.bs[i] = b.stride(i);
  }
  if (sink.has_value() && sink->defined()) {
    TORCH_CHECK(sink->numel() == p.N1, "fused attention: sink must have one value per query head");
    at::Tensor s = sink->to(at::kFloat).contiguous();
    keep_alive.push_back(s);
    p.sink = s.const_data_ptr<float>();
  }
  return p;
}

// Per-thread scratch memory, allocated once per call on the calling thread (so on npu it is
// device memory, counted by the allocator like any buffer).
struct Scratch {
  at::Tensor storage;
  int64_t per_thread = 0;
  float* for_thread() const { return storage.data_ptr<float>() + at::get_thread_num() * per_thread; }
};

Scratch make_scratch(int64_t floats_per_thread) {
  Scratch s;
  s.per_thread = floats_per_thread;
  s.storage = at::empty({at::get_num_threads() * floats_per_thread}, at::TensorOptions().dtype(at::kFloat));
  return s;
}

// ---- forward --------------------------------------------------------------------------------

// Query rows per task and keys per inner block. A larger query block reads every key/value
// block fewer times and gives the matrix products more rows; the scratch memory (counted by
// the npu allocator, and bounded by the peak-memory budget against cpu SDPA) grows with both.
constexpr int64_t kFwdBlockQ = 128;
constexpr int64_t kFwdBlockKv = 256;

struct Task {
  int64_t seg, head, i0;
};

template <typename T>
void forward_kernel(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& out, const at::Tensor& stat0, const at::Tensor& stat1, int64_t stats_width) {
  const T* qp = q.const_data_ptr<T>();
  const T* kp = k.const_data_ptr<T>();
  const T* vp = v.const_data_ptr<T>();
  T* op = out.data_ptr<T>();
  float* s0 = stat0.data_ptr<float>();
  float* s1 = stats_width > 0 ? stat1.data_ptr<float>() : nullptr;
  const auto qs = q.strides(), ks = k.strides(), vs = v.strides(), os = out.strides(), ss = stat0.strides();
  const int64_t D = p.D, Dv = p.Dv, BQ = kFwdBlockQ, BK = kFwdBlockKv;

  std::vector<Task> tasks;
  for (int64_t s = 0; s < static_cast<int64_t>(p.segments.size()); ++s) {
    for (int64_t n = 0; n < p.N1; ++n) {
      for (int64_t i0 = 0; i0 < p.segments[s].q_len; i0 += BQ) tasks.push_back(Task{s, n, i0});
    }
  }
  // float key/value blocks with unit column stride are read in place; others are converted.
  const bool kv_in_place = std::is_same_v<T, float> && ks[3] == 1 && vs[3] == 1 && ks[2] >= D && vs[2] >= Dv;
  const int64_t kv_floats = kv_in_place ? 0 : BK * D + BK * Dv;
  // Q block (scaled), K and V blocks, scores, output accumulator, keep mask row, m, l, alpha.
  const int64_t scratch_floats = BQ * D + kv_floats + BQ * BK + BQ * Dv + BK + 3 * BQ;
  Scratch scratch = make_scratch(scratch_floats);
  const bool dropout = p.keep_prob < 1.0f;
  const Philox rng(p.seed);

  at::parallel_for(0, static_cast<int64_t>(tasks.size()), 1, [&](int64_t begin, int64_t end) {
    float* w = scratch.for_thread();
    float* Qf = w;
    float* Kbuf = Qf + BQ * D;
    float* Vbuf = Kbuf + (kv_in_place ? 0 : BK * D);
    float* S = Kbuf + kv_floats;
    float* O = S + BQ * BK;
    float* keep = O + BQ * Dv;
    float* m = keep + BK;
    float* l = m + BQ;
    float* alpha = l + BQ;
    for (int64_t t = begin; t < end; ++t) {
      const Task& task = tasks[t];
      const Segment& sg = p.segments[task.seg];
      const int64_t n = task.head, h = n / p.group, i0 = task.i0;
      const int64_t rows = std::min(BQ, sg.q_len - i0);
      load_rows(qp + sg.batch * qs[0] + n * qs[1] + (sg.q_begin + i0) * qs[2], qs[2], qs[3], rows, D, Qf, p.scale);
      const float sink = p.sink != nullptr ? p.sink[n] : kNegInf;
      for (int64_t r = 0; r < rows; ++r) {
        m[r] = sink;
        l[r] = p.sink != nullptr ? 1.0f : 0.0f;
      }
      std::fill(O, O + rows * Dv, 0.0f);
      at::Tensor Qt = matrix(Qf, rows, D, D);
      at::Tensor Ot = matrix(O, rows, Dv, Dv);
      auto [jb, je] = p.kv_range(sg, i0, i0 + rows);
      for (int64_t j0 = jb; j0 < je; j0 += BK) {
        const int64_t cols = std::min(BK, je - j0);
        int64_t kld = 0, vld = 0;
        const float* Kf = rows_as_float(kp + sg.batch * ks[0] + h * ks[1] + (sg.kv_begin + j0) * ks[2], ks[2], ks[3],
                                        cols, D, Kbuf, kld);
        const float* Vf = rows_as_float(vp + sg.batch * vs[0] + h * vs[1] + (sg.kv_begin + j0) * vs[2], vs[2], vs[3],
                                        cols, Dv, Vbuf, vld);
        at::Tensor St = matrix(S, rows, cols, cols);
        at::cpu::mm_out(St, Qt, matrix(Kf, cols, D, kld).t());
        p.finish_scores(sg, n, i0, rows, j0, cols, S);
        for (int64_t r = 0; r < rows; ++r) {
          float* row = S + r * cols;
          const float m_new = std::max(m[r], row_max(row, cols));
          if (m_new == kNegInf) {  // nothing attended yet in this row
            std::fill(row, row + cols, 0.0f);
            alpha[r] = 1.0f;
            continue;
          }
          alpha[r] = std::exp(m[r] - m_new);
          l[r] = l[r] * alpha[r] + exp_shifted_sum(row, cols, m_new);
          m[r] = m_new;
          if (dropout) {
            uint64_t first = p.offset + sg.drop_base + static_cast<uint64_t>((n * sg.q_len + i0 + r) * sg.kv_len + j0);
            dropout_row(rng, first, cols, p.keep_prob, keep);
            for (int64_t c = 0; c < cols; ++c) row[c] *= keep[c];
          }
          if (alpha[r] != 1.0f) scale_in_place(O + r * Dv, Dv, alpha[r]);
        }
        at::cpu::addmm_(Ot, St, matrix(Vf, cols, Dv, vld));
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = sg.q_begin + i0 + r;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        T* o = op + sg.batch * os[0] + n * os[1] + i * os[2];
        for (int64_t e = 0; e < Dv; ++e) o[e * os[3]] = static_cast<T>(O[r * Dv + e] * inv);
        float* st0 = s0 + sg.batch * ss[0] + n * ss[1] + i * ss[2];
        if (stats_width > 0) {
          float* st1 = s1 + sg.batch * ss[0] + n * ss[1] + i * ss[2];
          for (int64_t wi = 0; wi < stats_width; ++wi) {
            st0[wi * ss[3]] = m[r];
            st1[wi * ss[3]] = l[r];
          }
        } else {
          *st0 = l[r] > 0.0f ? m[r] + std::log(l[r]) : kNegInf;
        }
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_forward_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const std::optional<at::Tensor>& sink, at::OptionalIntArrayRef q_starts,
    at::OptionalIntArrayRef q_lens, at::OptionalIntArrayRef kv_starts, at::OptionalIntArrayRef kv_lens, bool packed,
    double scale, double bias_scale, double keep_prob, int64_t seed, int64_t offset,
    int64_t band_lo, int64_t band_hi, bool bottom_right, int64_t stats_width, at::IntArrayRef out_perm,
    at::IntArrayRef stats_perm) {
  check_perm(out_perm, "out_perm");
  check_perm(stats_perm, "stats_perm");
  TORCH_CHECK(keep_prob > 0.0 && keep_prob <= 1.0, "fused attention: keep_prob must be in (0, 1], got ", keep_prob);
  std::vector<at::Tensor> keep_alive;
  Problem p = make_problem(q, k, v, bias, mask, sink, SequenceSpec{q_starts, q_lens, kv_starts, kv_lens, packed}, scale, bias_scale, keep_prob, seed, offset,
                           band_lo, band_hi, bottom_right, keep_alive);
  at::Tensor out = empty_in_order({p.B, p.N1, p.Sq, p.Dv}, out_perm, q.options());
  auto fopts = q.options().dtype(at::kFloat);
  at::Tensor stat0, stat1;
  if (stats_width > 0) {
    stat0 = empty_in_order({p.B, p.N1, p.Sq, stats_width}, stats_perm, fopts);
    stat1 = empty_in_order({p.B, p.N1, p.Sq, stats_width}, stats_perm, fopts);
  } else {
    stat0 = empty_in_order({p.B, p.N1, p.Sq, 1}, stats_perm, fopts).select(3, 0);
    stat1 = at::empty({0}, fopts);
  }
  if (p.partial) {
    // Rows outside every sequence (padding) are zero.
    out.zero_();
    stat0.fill_(kNegInf);
    if (stats_width > 0) stat1.zero_();
  }
  if (out.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, q.scalar_type(), "fused_attention_forward", [&] {
      forward_kernel<scalar_t>(p, q, k, v, out, stat0, stat1, stats_width);
    });
  }
  return {out, stat0, stat1};
}

// ---- backward -------------------------------------------------------------------------------

constexpr int64_t kBwdBlockQ = 64;
constexpr int64_t kBwdBlockKv = 128;

template <typename T>
void backward_kernel(const Problem& p, const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& stat0,
                     const std::optional<at::Tensor>& stat1, const at::Tensor& dq_acc, const at::Tensor& dk,
                     const at::Tensor& dv, const at::Tensor& dbias, const at::Tensor& dsink) {
  const T* qp = q.const_data_ptr<T>();
  const T* kp = k.const_data_ptr<T>();
  const T* vp = v.const_data_ptr<T>();
  const T* dop = dout.const_data_ptr<T>();
  const T* outp = out.const_data_ptr<T>();
  const float* st0 = stat0.const_data_ptr<float>();
  const bool lse_mode = !(stat1.has_value() && stat1->defined());
  const float* st1 = lse_mode ? nullptr : stat1->const_data_ptr<float>();
  float* dqp = dq_acc.data_ptr<float>();
  T* dkp = dk.data_ptr<T>();
  T* dvp = dv.data_ptr<T>();
  float* dbp = dbias.defined() ? dbias.data_ptr<float>() : nullptr;
  const auto qs = q.strides(), ks = k.strides(), vs = v.strides(), dos = dout.strides(), ous = out.strides();
  const auto s0s = stat0.strides();
  const auto s1s = lse_mode ? stat0.strides() : stat1->strides();
  const auto dqs = dq_acc.strides(), dks = dk.strides(), dvs = dv.strides();
  const int64_t D = p.D, Dv = p.Dv, BQ = kBwdBlockQ, BK = kBwdBlockKv, G = p.group;
  const int64_t nseg = static_cast<int64_t>(p.segments.size());

  // Row statistics, gathered once: logsumexp and Delta = rowsum(dout * out), [B, N1, Sq].
  at::Tensor row_stats = at::empty({2, p.B, p.N1, p.Sq}, at::TensorOptions().dtype(at::kFloat));
  float* lse = row_stats.data_ptr<float>();
  float* delta = lse + p.B * p.N1 * p.Sq;
  auto row_index = [&](int64_t b, int64_t n, int64_t i) { return (b * p.N1 + n) * p.Sq + i; };
  at::parallel_for(0, nseg * p.N1, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const Segment& sg = p.segments[t / p.N1];
      const int64_t n = t % p.N1;
      for (int64_t r = 0; r < sg.q_len; ++r) {
        const int64_t i = sg.q_begin + r;
        const int64_t idx = row_index(sg.batch, n, i);
        float a = st0[sg.batch * s0s[0] + n * s0s[1] + i * s0s[2]];
        if (lse_mode) {
          lse[idx] = a;
        } else {
          float sum = st1[sg.batch * s1s[0] + n * s1s[1] + i * s1s[2]];
          lse[idx] = sum > 0.0f ? a + std::log(sum) : kNegInf;
        }
        const T* g = dop + sg.batch * dos[0] + n * dos[1] + i * dos[2];
        const T* o = outp + sg.batch * ous[0] + n * ous[1] + i * ous[2];
        float acc = 0.0f;
        for (int64_t e = 0; e < Dv; ++e) acc += static_cast<float>(g[e * dos[3]]) * static_cast<float>(o[e * ous[3]]);
        delta[idx] = acc;
      }
    }
  });

  // float q/dout/v blocks with unit column stride are read in place; others are converted. The
  // key block is always copied: it carries the scale (s = q . (scale k)), so dQ = dS . K_scaled.
  const bool q_in_place = std::is_same_v<T, float> && qs[3] == 1 && dos[3] == 1 && qs[2] >= D && dos[2] >= Dv;
  const bool v_in_place = std::is_same_v<T, float> && vs[3] == 1 && vs[2] >= Dv;
  const int64_t q_floats = q_in_place ? 0 : BQ * D + BQ * Dv;
  const int64_t v_floats = v_in_place ? 0 : BK * Dv;
  const bool dropout = p.keep_prob < 1.0f;
  // Q block, dO block, K block (scaled), V block, P, dP, P after dropout (only with dropout),
  // dK and dV accumulators, keep row.
  const int64_t dropped_floats = dropout ? BQ * BK : 0;
  const int64_t scratch_floats = q_floats + BK * D + v_floats + 2 * BQ * BK + dropped_floats + BK * D + BK * Dv + BK;
  Scratch scratch = make_scratch(scratch_floats);
  const Philox rng(p.seed);

  // One task per (segment, key/value head): it owns the dK/dV of that head and the dQ rows of
  // the query heads of its group, so no two tasks write the same memory.
  at::parallel_for(0, nseg * p.N2, 1, [&](int64_t begin, int64_t end) {
    float* w = scratch.for_thread();
    float* Qbuf = w;
    float* dObuf = Qbuf + (q_in_place ? 0 : BQ * D);
    float* Kf = w + q_floats;
    float* Vbuf = Kf + BK * D;
    float* P = Vbuf + v_floats;
    float* dP = P + BQ * BK;
    float* X = dP + BQ * BK;
    float* dKa = X + dropped_floats;
    float* dVa = dKa + BK * D;
    float* keep = dVa + BK * Dv;
    for (int64_t t = begin; t < end; ++t) {
      const Segment& sg = p.segments[t / p.N2];
      const int64_t h = t % p.N2;
      for (int64_t j0 = 0; j0 < sg.kv_len; j0 += BK) {
        const int64_t cols = std::min(BK, sg.kv_len - j0);
        load_rows(kp + sg.batch * ks[0] + h * ks[1] + (sg.kv_begin + j0) * ks[2], ks[2], ks[3], cols, D, Kf, p.scale);
        int64_t vld = 0;
        const float* Vf = rows_as_float(vp + sg.batch * vs[0] + h * vs[1] + (sg.kv_begin + j0) * vs[2], vs[2], vs[3],
                                        cols, Dv, Vbuf, vld);
        std::fill(dKa, dKa + cols * D, 0.0f);
        std::fill(dVa, dVa + cols * Dv, 0.0f);
        at::Tensor Kt = matrix(Kf, cols, D, D), Vt = matrix(Vf, cols, Dv, vld);
        at::Tensor dKt = matrix(dKa, cols, D, D), dVt = matrix(dVa, cols, Dv, Dv);
        auto [ib, ie] = p.q_range(sg, j0, j0 + cols);
        for (int64_t g = 0; g < G; ++g) {
          const int64_t n = h * G + g;
          for (int64_t i0 = ib; i0 < ie; i0 += BQ) {
            const int64_t rows = std::min(BQ, ie - i0);
            const int64_t qi = sg.q_begin + i0;
            int64_t qld = 0, dold = 0;
            const float* Qf = rows_as_float(qp + sg.batch * qs[0] + n * qs[1] + qi * qs[2], qs[2], qs[3], rows, D,
                                            Qbuf, qld);
            const float* dOf = rows_as_float(dop + sg.batch * dos[0] + n * dos[1] + qi * dos[2], dos[2], dos[3],
                                             rows, Dv, dObuf, dold);
            at::Tensor Qt = matrix(Qf, rows, D, qld), dOt = matrix(dOf, rows, Dv, dold);
            at::Tensor Pt = matrix(P, rows, cols, cols), dPt = matrix(dP, rows, cols, cols);
            at::Tensor Xt = matrix(X, rows, cols, cols);
            at::cpu::mm_out(Pt, Qt, Kt.t());
            p.finish_scores(sg, n, i0, rows, j0, cols, P);
            at::cpu::mm_out(dPt, dOt, Vt.t());
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t idx = row_index(sg.batch, n, qi + r);
              const float row_lse = lse[idx], row_delta = delta[idx];
              float* pr = P + r * cols;
              float* dpr = dP + r * cols;
              float* xr = X + r * cols;
              if (row_lse == kNegInf) {
                std::fill(pr, pr + cols, 0.0f);
                if (dropout) std::fill(xr, xr + cols, 0.0f);
                std::fill(dpr, dpr + cols, 0.0f);
                continue;
              }
              exp_shifted(pr, cols, row_lse);
              if (dropout) {
                uint64_t first =
                    p.offset + sg.drop_base + static_cast<uint64_t>((n * sg.q_len + i0 + r) * sg.kv_len + j0);
                dropout_row(rng, first, cols, p.keep_prob, keep);
                for (int64_t c = 0; c < cols; ++c) {
                  xr[c] = pr[c] * keep[c];
                  dpr[c] *= keep[c];
                }
              }
              softmax_grad_row(pr, dpr, cols, row_delta);  // dS, kept in dP
            }
            // dV += P_dropped^T dO ; dK += scale * dS^T Q ; dQ += scale * dS K = dS K_scaled.
            at::cpu::addmm_(dVt, dropout ? Xt.t() : Pt.t(), dOt);
            at::cpu::addmm_(dKt, dPt.t(), Qt, 1.0, p.scale);
            at::Tensor dQt = at::from_blob(dqp + sg.batch * dqs[0] + n * dqs[1] + qi * dqs[2], {rows, D},
                                           {dqs[2], dqs[3]}, at::TensorOptions().dtype(at::kFloat));
            at::cpu::addmm_(dQt, dPt, Kt);
            if (dbp != nullptr) {
              for (int64_t r = 0; r < rows; ++r) {
                float* dst = dbp + ((sg.batch * p.N1 + n) * p.Sq + (i0 + r)) * p.Skv + j0;
                const float* src = dP + r * cols;
                for (int64_t c = 0; c < cols; ++c) dst[c] = p.bias_scale * src[c];
              }
            }
          }
        }
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t j = sg.kv_begin + j0 + c;
          T* dkr = dkp + sg.batch * dks[0] + h * dks[1] + j * dks[2];
          T* dvr = dvp + sg.batch * dvs[0] + h * dvs[1] + j * dvs[2];
          for (int64_t e = 0; e < D; ++e) dkr[e * dks[3]] = static_cast<T>(dKa[c * D + e]);
          for (int64_t e = 0; e < Dv; ++e) dvr[e * dvs[3]] = static_cast<T>(dVa[c * Dv + e]);
        }
      }
    }
  });

  if (p.sink != nullptr) {
    // d sink_n = -sum_i exp(sink_n - lse_i) * Delta_i.
    float* ds = dsink.data_ptr<float>();
    for (int64_t n = 0; n < p.N1; ++n) {
      double acc = 0.0;
      for (const Segment& sg : p.segments) {
        for (int64_t r = 0; r < sg.q_len; ++r) {
          const int64_t idx = row_index(sg.batch, n, sg.q_begin + r);
          if (lse[idx] == kNegInf) continue;
          acc -= std::exp(static_cast<double>(p.sink[n]) - lse[idx]) * delta[idx];
        }
      }
      ds[n] = static_cast<float>(acc);
    }
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> attention_backward_cpu(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& stat0, const std::optional<at::Tensor>& stat1, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const std::optional<at::Tensor>& sink, at::OptionalIntArrayRef q_starts,
    at::OptionalIntArrayRef q_lens, at::OptionalIntArrayRef kv_starts, at::OptionalIntArrayRef kv_lens, bool packed,
    double scale, double bias_scale, double keep_prob, int64_t seed, int64_t offset,
    int64_t band_lo, int64_t band_hi, bool bottom_right, bool bias_grad, at::IntArrayRef dq_perm,
    at::IntArrayRef dk_perm, at::IntArrayRef dv_perm) {
  check_perm(dq_perm, "dq_perm");
  check_perm(dk_perm, "dk_perm");
  check_perm(dv_perm, "dv_perm");
  TORCH_CHECK(keep_prob > 0.0 && keep_prob <= 1.0, "fused attention: keep_prob must be in (0, 1], got ", keep_prob);
  std::vector<at::Tensor> keep_alive;
  Problem p = make_problem(q, k, v, bias, mask, sink, SequenceSpec{q_starts, q_lens, kv_starts, kv_lens, packed}, scale, bias_scale, keep_prob, seed, offset,
                           band_lo, band_hi, bottom_right, keep_alive);
  TORCH_CHECK(dout.sizes() == out.sizes() && out.size(0) == p.B && out.size(1) == p.N1 && out.size(2) == p.Sq &&
                  out.size(3) == p.Dv,
              "fused attention backward: grad/out shapes ", dout.sizes(), " ", out.sizes(), " do not match");
  TORCH_CHECK(dout.scalar_type() == q.scalar_type() && out.scalar_type() == q.scalar_type(),
              "fused attention backward: grad and out must have the dtype of query");
  TORCH_CHECK(stat0.dim() == 3 && stat0.scalar_type() == at::kFloat, "fused attention backward: stats must be float [B, N, S]");
  auto fopts = q.options().dtype(at::kFloat);
  at::Tensor dq = empty_in_order(q.sizes(), dq_perm, q.options());
  at::Tensor dq_acc = q.scalar_type() == at::kFloat ? dq : empty_in_order(q.sizes(), dq_perm, fopts);
  dq_acc.zero_();
  at::Tensor dk = empty_in_order(k.sizes(), dk_perm, k.options());
  at::Tensor dv = empty_in_order(v.sizes(), dv_perm, v.options());
  if (p.partial) {  // keys outside every sequence get no gradient
    dk.zero_();
    dv.zero_();
  }
  at::Tensor dbias = bias_grad && p.bias != nullptr ? at::zeros({p.B, p.N1, p.Sq, p.Skv}, fopts) : at::Tensor();
  at::Tensor dsink = p.sink != nullptr ? at::zeros({p.N1}, fopts) : at::empty({0}, fopts);
  if (q.numel() > 0 && k.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, q.scalar_type(), "fused_attention_backward", [&] {
      backward_kernel<scalar_t>(p, dout, q, k, v, out, stat0, stat1, dq_acc, dk, dv, dbias, dsink);
    });
  } else {
    dk.zero_();
    dv.zero_();
  }
  if (!dq.is_same(dq_acc)) dq.copy_(dq_acc);
  if (!dbias.defined()) dbias = at::empty({0}, fopts);
  return {dq, dk, dv, dbias, dsink};
}

}  // namespace

std::vector<int64_t> physical_order(const at::Tensor& t) {
  std::vector<int64_t> order(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) order[i] = i;
  auto strides = t.strides();
  auto sizes = t.sizes();
  // Outermost first: larger strides first; size-1 and broadcast dims keep their logical place.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    int64_t sa = sizes[a] == 1 ? 0 : strides[a], sb = sizes[b] == 1 ? 0 : strides[b];
    if (sa == 0 || sb == 0) return false;
    return sa > sb;
  });
  return order;
}

int64_t draw_dropout_seed(c10::Device device) {
  auto seed_from = [](at::Generator gen) {
    auto* cpu = at::check_generator<at::CPUGeneratorImpl>(gen);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return static_cast<int64_t>(cpu->random64() >> 1);
  };
  if (device.type() != kNpu) return seed_from(at::detail::getDefaultCPUGenerator());
  int64_t seed = 0;
  draw_from(default_generator(device.index()), 2, [&](const at::Generator& engine) { seed = seed_from(engine); });
  return seed;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_attention_forward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const std::optional<at::Tensor>& sink,
    const SequenceSpec& seqs, double scale, double bias_scale,
    double keep_prob, int64_t seed, int64_t offset, int64_t band_lo, int64_t band_hi, bool band_bottom_right,
    int64_t stats_width, at::IntArrayRef out_perm, at::IntArrayRef stats_perm) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("npu::_fused_attention_forward", "")
                       .typed<decltype(attention_forward_cpu)>();
  return op.call(q, k, v, bias, mask, sink, seqs.q_starts, seqs.q_lens, seqs.kv_starts, seqs.kv_lens, seqs.packed, scale, bias_scale, keep_prob, seed, offset,
                 band_lo, band_hi, band_bottom_right, stats_width, out_perm, stats_perm);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& stat0, const std::optional<at::Tensor>& stat1, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const std::optional<at::Tensor>& sink,
    const SequenceSpec& seqs, double scale, double bias_scale,
    double keep_prob, int64_t seed, int64_t offset, int64_t band_lo, int64_t band_hi, bool band_bottom_right,
    bool bias_grad, at::IntArrayRef dq_perm, at::IntArrayRef dk_perm, at::IntArrayRef dv_perm) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("npu::_fused_attention_backward", "")
                       .typed<decltype(attention_backward_cpu)>();
  return op.call(dout, q, k, v, out, stat0, stat1, bias, mask, sink, seqs.q_starts, seqs.q_lens, seqs.kv_starts,
                 seqs.kv_lens, seqs.packed, scale, bias_scale,
                 keep_prob, seed, offset, band_lo, band_hi, band_bottom_right, bias_grad, dq_perm, dk_perm, dv_perm);
}

// Shape functions of the two kernels: NPU graph capture (and anything else that asks the
// Meta key) learns the outputs' sizes and layouts from them without running the kernel, so
// a captured step of an attention model records these ops instead of aborting the capture.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_forward_meta(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, at::OptionalIntArrayRef,
    at::OptionalIntArrayRef, at::OptionalIntArrayRef, at::OptionalIntArrayRef, bool, double, double, double,
    int64_t, int64_t, int64_t, int64_t, bool, int64_t stats_width, at::IntArrayRef out_perm,
    at::IntArrayRef stats_perm) {
  check_perm(out_perm, "out_perm");
  check_perm(stats_perm, "stats_perm");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "fused attention: query, key and value must be 4-D");
  const int64_t B = q.size(0), N1 = q.size(1), Sq = q.size(2), Dv = v.size(3);
  at::Tensor out = empty_in_order({B, N1, Sq, Dv}, out_perm, q.options());
  auto fopts = q.options().dtype(at::kFloat);
  if (stats_width > 0) {
    return {out, empty_in_order({B, N1, Sq, stats_width}, stats_perm, fopts),
            empty_in_order({B, N1, Sq, stats_width}, stats_perm, fopts)};
  }
  return {out, empty_in_order({B, N1, Sq, 1}, stats_perm, fopts).select(3, 0), at::empty({0}, fopts)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> attention_backward_meta(
    const at::Tensor&, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor&,
    const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>& sink, at::OptionalIntArrayRef,
    at::OptionalIntArrayRef, at::OptionalIntArrayRef, at::OptionalIntArrayRef, bool, double, double, double,
    int64_t, int64_t, int64_t, int64_t, bool, bool bias_grad, at::IntArrayRef dq_perm, at::IntArrayRef dk_perm,
    at::IntArrayRef dv_perm) {
  check_perm(dq_perm, "dq_perm");
  check_perm(dk_perm, "dk_perm");
  check_perm(dv_perm, "dv_perm");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "fused attention: query, key and value must be 4-D");
  auto fopts = q.options().dtype(at::kFloat);
  const bool has_bias = bias.has_value() && bias->defined();
  const bool has_sink = sink.has_value() && sink->defined();
  return {empty_in_order(q.sizes(), dq_perm, q.options()), empty_in_order(k.sizes(), dk_perm, k.options()),
          empty_in_order(v.sizes(), dv_perm, v.options()),
          bias_grad && has_bias ? at::empty({q.size(0), q.size(1), q.size(2), k.size(2)}, fopts) : at::empty({0}, fopts),
          has_sink ? at::empty({q.size(1)}, fopts) : at::empty({0}, fopts)};
}

TORCH_LIBRARY_FRAGMENT(npu, m) {
  m.def(
      "_fused_attention_forward(Tensor query, Tensor key, Tensor value, Tensor? bias, Tensor? mask, Tensor? sink, "
      "int[]? q_starts, int[]? q_lens, int[]? kv_starts, int[]? kv_lens, bool packed, float scale, "
      "float bias_scale, float keep_prob, int seed, "
      "int offset, int band_lo, int band_hi, bool band_bottom_right, int stats_width, int[] out_perm, "
      "int[] stats_perm) -> (Tensor, Tensor, Tensor)");
  m.def(
      "_fused_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, "
      "Tensor stat0, Tensor? stat1, Tensor? bias, Tensor? mask, Tensor? sink, int[]? q_starts, int[]? q_lens, "
      "int[]? kv_starts, int[]? kv_lens, bool packed, float scale, float bias_scale, float keep_prob, int seed, int offset, int band_lo, "
      "int band_hi, bool band_bottom_right, bool bias_grad, int[] dq_perm, int[] dk_perm, int[] dv_perm) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  // A dropout seed from the default generator of `like`'s device (seeded by torch.npu.manual_seed on npu).
  m.def("_draw_dropout_seed(Tensor like) -> int");
}

TORCH_LIBRARY_IMPL(npu, CPU, m) {
  m.impl("_fused_attention_forward", TORCH_FN(attention_forward_cpu));
  m.impl("_fused_attention_backward", TORCH_FN(attention_backward_cpu));
  m.impl("_draw_dropout_seed", [](const at::Tensor& like) { return draw_dropout_seed(like.device()); });
}

TORCH_LIBRARY_IMPL(npu, Meta, m) {
  m.impl("_fused_attention_forward", TORCH_FN(attention_forward_meta));
  m.impl("_fused_attention_backward", TORCH_FN(attention_backward_meta));
}

TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) {
  m.impl("_draw_dropout_seed", [](const at::Tensor& like) { return draw_dropout_seed(like.device()); });
}

}  // namespace torch_npu
