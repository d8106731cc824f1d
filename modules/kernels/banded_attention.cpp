// Banded attention on the CPU at inference: adaptive_span's band of keys per query, its distance bias and its
// global token, in one pass per head. Built on first use by banded_cpu.py (torch.utils.cpp_extension), with
// AVX2 and FMA, on machines whose CPU has them, and in an AVX-512 form where torch runs its own (build.py).
// The semantics are dense_banded_reference's (reference.py):
//
//   query i of head h reads key j when |i - j| <= w_h (and j <= i when causal) and key j is real; with a
//   global token g, every query also reads key g and query g reads every key (causal and padding still
//   apply); score = scaling · q_i·k_j + bias_h[|i - j|], global pairs without bias; softmax over the keys read;
//   out_i = Σ_j p_ij v_j. A query with nothing to read, or a padding query, gets 0.
//
// Why: fused SDPA reads every key of every row. With the spans MiniLM learns (w_h of 8 to 31 tokens), a row
// reads 17 to 63 keys here, at any length; the (H, N, N) bias SDPA would need as its mask is never built.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <immintrin.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#ifndef __AVX2__
#error "banded_attention.cpp needs AVX2 (banded_cpu.py builds it with -mavx2 -mfma only where the CPU has them)"
#endif

namespace {

// The vector the kernel computes with: 16 floats under AVX-512, else 8. Everything below is written once
// against these few operations; only the keys' transpose keeps to 8 × 8 blocks of AVX2 registers.
#ifdef __AVX512F__
using Vec = __m512;
constexpr int64_t kWidth = 16;
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
inline Vec broadcast(float x) { return _mm512_set1_ps(x); }
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec maximum(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec fnmadd(Vec a, Vec b, Vec c) { return _mm512_fnmadd_ps(a, b, c); }
inline float horizontal_max(Vec x) { return _mm512_reduce_max_ps(x); }
inline float horizontal_sum(Vec x) { return _mm512_reduce_add_ps(x); }
inline Vec round_to_integer(Vec x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// p · 2^n for integral n in the normal range, through the exponent bits.
inline Vec times_power_of_two(Vec p, Vec n) {
  const __m512i exponent = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return mul(p, _mm512_castsi512_ps(_mm512_slli_epi32(exponent, 23)));
}
// value, with 0 in the lanes where x < bound.
inline Vec zero_below(Vec value, Vec x, float bound) {
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~_mm512_cmp_ps_mask(x, broadcast(bound), _CMP_LT_OQ)), value);
}
#else
using Vec = __m256;
constexpr int64_t kWidth = 8;
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
inline Vec broadcast(float x) { return _mm256_set1_ps(x); }
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec maximum(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec fnmadd(Vec a, Vec b, Vec c) { return _mm256_fnmadd_ps(a, b, c); }

inline float horizontal_max(Vec x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float horizontal_sum(Vec x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline Vec round_to_integer(Vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline Vec times_power_of_two(Vec p, Vec n) {
  const __m256i exponent = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return mul(p, _mm256_castsi256_ps(_mm256_slli_epi32(exponent, 23)));
}
inline Vec zero_below(Vec value, Vec x, float bound) {
  return _mm256_andnot_ps(_mm256_cmp_ps(x, broadcast(bound), _CMP_LT_OQ), value);
}
#endif

constexpr int64_t kTransposeWidth = 8;  // keys and columns per in-register transpose (AVX2)
constexpr int64_t kRowBlock = 4;  // query rows scored together: 8 accumulators, 2 key vectors, 1 broadcast
constexpr int64_t kChunkRows = 256;  // query rows whose keys are transposed together (a multiple of kRowBlock)
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// exp(x) for x <= 0, a vector at a time, within 2 ulp (Cephes' expf polynomial). Below -80 (e^-80 < 2e-35,
// nothing beside the row's largest weight, 1) it gives 0, and so for -inf: the intermediate results stay normal
// numbers, where -87 made subnormal ones, each a slow microcode assist (a row of one key ran at 0.5 µs).
inline Vec exp_non_positive(Vec x) {
  const Vec bounded = maximum(x, broadcast(-80.0f));
  const Vec n = round_to_integer(mul(bounded, broadcast(1.44269504088896341f)));
  Vec r = fnmadd(n, broadcast(0.693359375f), bounded);  // x - n·ln 2, in two parts
  r = fnmadd(n, broadcast(-2.12194440e-4f), r);
  Vec p = broadcast(1.9875691500e-4f);
  p = fmadd(p, r, broadcast(1.3981999507e-3f));
  p = fmadd(p, r, broadcast(8.3334519073e-3f));
  p = fmadd(p, r, broadcast(4.1665795894e-2f));
  p = fmadd(p, r, broadcast(1.6666665459e-1f));
  p = fmadd(p, r, broadcast(5.0000001201e-1f));
  p = fmadd(p, mul(r, r), add(r, broadcast(1.0f)));
  return zero_below(times_power_of_two(p, n), x, -80.0f);
}

// Keys j of one head (rows `step` floats apart) into keys_t (D, N): keys_t[c * key_step + j]. Blocks of 8 keys by
// 8 columns go through an 8 × 8 transpose in registers: stored one by one, each key's D values landed on D
// different cache lines, and this copy took a quarter of the kernel's time at N = 128.
void transpose_keys(const float* keys, int64_t step, int64_t n, int64_t d, float* keys_t, int64_t key_step) {
  const int64_t whole_keys = n - n % kTransposeWidth, whole_columns = d - d % kTransposeWidth;
  for (int64_t j = 0; j < whole_keys; j += kTransposeWidth) {
    for (int64_t c = 0; c < whole_columns; c += kTransposeWidth) {
      __m256 r[kTransposeWidth];
      for (int i = 0; i < kTransposeWidth; ++i) r[i] = _mm256_loadu_ps(keys + (j + i) * step + c);
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* to = keys_t + c * key_step + j;
      _mm256_storeu_ps(to + 0 * key_step, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(to + 1 * key_step, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(to + 2 * key_step, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(to + 3 * key_step, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(to + 4 * key_step, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(to + 5 * key_step, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(to + 6 * key_step, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(to + 7 * key_step, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (int64_t i = j; i < j + kTransposeWidth; ++i)
      for (int64_t c = whole_columns; c < d; ++c) keys_t[c * key_step + i] = keys[i * step + c];
  }
  for (int64_t i = whole_keys; i < n; ++i)
    for (int64_t c = 0; c < d; ++c) keys_t[c * key_step + i] = keys[i * step + c];
}

// Scores of `rows` (<= kRowBlock) query rows q (row stride q_step, already scaled) against keys first … first +
// count - 1, whose D values lie transposed in keys_t (key_step floats apart per d, readable 2 · kWidth past the
// last key): into scores (row stride score_step, count rounded up to 2 · kWidth).
void score_rows(const float* q, int64_t q_step, int64_t rows, const float* keys_t, int64_t key_step,
                int64_t first, int64_t count, int64_t d, float* scores, int64_t score_step) {
  for (int64_t j = 0; j < count; j += 2 * kWidth) {
    Vec low[kRowBlock], high[kRowBlock];
    for (int r = 0; r < kRowBlock; ++r) low[r] = high[r] = zero();
    const float* column = keys_t + first + j;
    for (int64_t c = 0; c < d; ++c) {
      const Vec k_low = load(column + c * key_step);
      const Vec k_high = load(column + c * key_step + kWidth);
      for (int r = 0; r < kRowBlock; ++r) {  // rows past `rows` repeat the last: no branch in the loop
        const Vec q_rc = broadcast(q[std::min<int64_t>(r, rows - 1) * q_step + c]);
        low[r] = fmadd(q_rc, k_low, low[r]);
        high[r] = fmadd(q_rc, k_high, high[r]);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      store(scores + r * score_step + j, low[r]);
      store(scores + r * score_step + j + kWidth, high[r]);
    }
  }
}

// Columns c … c + kRegisters · kWidth - 1 of out = Σ_j p_j · v_j · inverse (+ extra_p · extra_v): keys inner,
// in four independent sums, where one would wait on each FMA. With fewer than four registers of columns the
// keys are dealt round the sums (kRegisters = 1: four sums of every fourth key), added up at the end.
template <int kRegisters>
inline void weighted_columns(const float* p, int64_t count, const float* rows, int64_t v_step,
                             const float* extra_v, float extra_p, Vec inverse, int64_t c, float* out) {
  constexpr int kSums = 4 / kRegisters;
  Vec sums[kSums][kRegisters];
  for (int s = 0; s < kSums; ++s)
    for (int r = 0; r < kRegisters; ++r) sums[s][r] = zero();
  int64_t j = 0;
  for (; j + kSums <= count; j += kSums)
    for (int s = 0; s < kSums; ++s) {
      const Vec weight = broadcast(p[j + s]);
      const float* row = rows + (j + s) * v_step + c;
      for (int r = 0; r < kRegisters; ++r) sums[s][r] = fmadd(weight, load(row + r * kWidth), sums[s][r]);
    }
  for (; j < count; ++j) {
    const Vec weight = broadcast(p[j]);
    const float* row = rows + j * v_step + c;
    for (int r = 0; r < kRegisters; ++r) sums[0][r] = fmadd(weight, load(row + r * kWidth), sums[0][r]);
  }
  if (extra_v) {
    const Vec weight = broadcast(extra_p);
    for (int r = 0; r < kRegisters; ++r) sums[0][r] = fmadd(weight, load(extra_v + c + r * kWidth), sums[0][r]);
  }
  for (int r = 0; r < kRegisters; ++r) {
    Vec sum = sums[0][r];
    for (int s = 1; s < kSums; ++s) sum = add(sum, sums[s][r]);
    store(out + c + r * kWidth, mul(sum, inverse));
  }
}

// out (d) = Σ_j p_j · v_j / total over the keys first … first + count - 1 (weights p, value rows v_step
// apart), plus extra_p · extra_v when extra_v is set: 4 registers of columns at a time, then 2, then 1.
void weighted_rows(const float* p, int64_t count, const float* v, int64_t v_step, int64_t first,
                   const float* extra_v, float extra_p, float total, int64_t d, float* out) {
  const Vec inverse = broadcast(1.0f / total);
  const float* rows = v + first * v_step;
  int64_t c = 0;
  for (; c + 4 * kWidth <= d; c += 4 * kWidth)
    weighted_columns<4>(p, count, rows, v_step, extra_v, extra_p, inverse, c, out);
  for (; c + 2 * kWidth <= d; c += 2 * kWidth)
    weighted_columns<2>(p, count, rows, v_step, extra_v, extra_p, inverse, c, out);
  for (; c + kWidth <= d; c += kWidth)
    weighted_columns<1>(p, count, rows, v_step, extra_v, extra_p, inverse, c, out);
  for (; c < d; ++c) {
    float sum = 0.0f;
    for (int64_t j = 0; j < count; ++j) sum += p[j] * rows[j * v_step + c];
    if (extra_v) sum += extra_p * extra_v[c];
    out[c] = sum / total;
  }
}

// A row's scores s (count of them, in place; s may be written up to the next multiple of kWidth) -> exp(s -
// max); returns (max, Σ), extra counting in the max. max -inf: nothing to read.
std::pair<float, float> exponentiate(float* s, int64_t count, float extra) {
  const int64_t whole = (count + kWidth - 1) / kWidth * kWidth;
  std::fill(s + count, s + whole, kNegativeInfinity);  // whole vectors only: exp(-inf) is 0
  Vec largest = broadcast(extra);
  for (int64_t j = 0; j < whole; j += kWidth) largest = maximum(largest, load(s + j));
  const float top = horizontal_max(largest);
  if (top == kNegativeInfinity) return {top, 0.0f};
  const Vec shift = broadcast(top);
  Vec sum = zero();
  for (int64_t j = 0; j < whole; j += kWidth) {
    const Vec e = exp_non_positive(sub(load(s + j), shift));
    store(s + j, e);
    sum = add(sum, e);
  }
  return {top, horizontal_sum(sum)};
}

// query, key, value (B, H, N, D) and out (B, H, N, D): float32 on the CPU, last dimension contiguous, any
// other strides. window (H,) int64. distance_bias: empty or (H, W + 1) float32 with W >= min(max window, N - 1).
// key_padding_mask: empty or (B, N) bool, true for real tokens. global_index: empty or (B,) int64. Writes out.
// Memory beyond inputs and output, per thread: one head's keys transposed, the bias of its band, 4 rows of
// scores; never N × N.
void banded_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                      const at::Tensor& window, const at::Tensor& distance_bias,
                      const at::Tensor& key_padding_mask, const at::Tensor& global_index, bool causal,
                      double scaling, at::Tensor out) {
  TORCH_CHECK(query.dim() == 4 && out.dim() == 4, "query and out must be (B, H, N, D)");
  TORCH_CHECK(key.sizes() == query.sizes() && value.sizes() == query.sizes() && out.sizes() == query.sizes(),
              "query, key, value and out must share one (B, H, N, D) shape");
  const at::Tensor* tensors[] = {&query, &key, &value, &out};
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->device().is_cpu(),
                "banded_attention takes float32 CPU tensors");
    TORCH_CHECK(t->stride(3) == 1 || t->size(3) == 1,
                "the last dimension of query, key, value and out must be contiguous");
  }
  const int64_t batch = query.size(0), heads = query.size(1), n = query.size(2), d = query.size(3);
  TORCH_CHECK(window.dim() == 1 && window.size(0) == heads && window.scalar_type() == at::kLong,
              "window must be (H,) int64");
  const at::Tensor windows = window.contiguous();
  std::vector<int64_t> reach(heads);
  int64_t widest = 0;
  for (int64_t h = 0; h < heads; ++h) {
    TORCH_CHECK(windows.data_ptr<int64_t>()[h] >= 0, "window must be non-negative");
    reach[h] = std::min(windows.data_ptr<int64_t>()[h], std::max<int64_t>(n - 1, 0));
    widest = std::max(widest, reach[h]);
  }
  const bool biased = distance_bias.numel() > 0;
  at::Tensor bias;
  if (biased) {
    TORCH_CHECK(distance_bias.dim() == 2 && distance_bias.size(0) == heads && distance_bias.size(1) > widest &&
                    distance_bias.scalar_type() == at::kFloat,
                "distance_bias must be float32 (H, W + 1) with W >= the widest window");
    bias = distance_bias.contiguous();
  }
  const bool padded = key_padding_mask.numel() > 0;
  at::Tensor padding;
  if (padded) {
    TORCH_CHECK(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == batch &&
                    key_padding_mask.size(1) == n && key_padding_mask.scalar_type() == at::kBool,
                "key_padding_mask must be (B, N) bool");
    padding = key_padding_mask.contiguous();
  }
  const bool global = global_index.numel() > 0;
  at::Tensor globals;
  if (global) {
    TORCH_CHECK(global_index.dim() == 1 && global_index.size(0) == batch &&
                    global_index.scalar_type() == at::kLong,
                "global_index must be (B,) int64");
    globals = global_index.contiguous();
    for (int64_t b = 0; b < batch; ++b)
      TORCH_CHECK(globals.data_ptr<int64_t>()[b] >= 0 && globals.data_ptr<int64_t>()[b] < n,
                  "global_index must hold positions in [0, N)");
  }
  if (n == 0) return;

  const float* qp = query.data_ptr<float>();
  const float* kp = key.data_ptr<float>();
  const float* vp = value.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float* bias_p = biased ? bias.data_ptr<float>() : nullptr;
  const int64_t bias_step = biased ? bias.size(1) : 0;
  const bool* pad_p = padded ? padding.data_ptr<bool>() : nullptr;
  const int64_t* global_p = global ? globals.data_ptr<int64_t>() : nullptr;
  const auto qs = query.strides(), ks = key.strides(), vs = value.strides(), os = out.strides();
  const float scale = static_cast<float>(scaling);
  // Query rows are taken kChunkRows at a time, with the keys they read transposed, (D, columns): at most
  // kChunkRows + 2w keys (w the widest window), so a thread's copy of the keys does not grow with N (whole
  // heads transposed, 2 threads held 4 MiB each beside a 50 MiB output at N = 16384, D = 64). The row stride
  // is not a multiple of 256 floats (rows 2 KiB apart fell into two sets of the L1 cache in the top-k kernel),
  // and 2 · kWidth floats past the last key are readable (zeros).
  const int64_t key_columns = std::min(n, kChunkRows + 2 * widest);
  const int64_t key_columns_whole = (key_columns + 2 * kWidth - 1) / (2 * kWidth) * (2 * kWidth);
  const int64_t key_step =
      key_columns_whole + 2 * kWidth + ((key_columns_whole + 2 * kWidth) % 256 == 0 ? kWidth : 0);
  // A block of 4 rows reads at most 4 + 2w keys; rows of scores rounded up to whole blocks of 2 · kWidth keys,
  // with room for a row's last vector past its keys. The global token's row, every key, has a row of its own.
  const int64_t score_step = (kRowBlock + 2 * widest + kWidth + 2 * kWidth - 1) / (2 * kWidth) * (2 * kWidth);
  const int64_t global_row_size = (n + 2 * kWidth - 1) / (2 * kWidth) * (2 * kWidth) + 2 * kWidth;

  // Each thread's scratch, from torch's allocator on this thread: a worker's own malloc would open a heap
  // arena of its own, whose pages then count against the call's peak memory.
  const int64_t band_size = 2 * widest + 1 + kWidth;
  const int64_t per_thread = d * key_step + kRowBlock * score_step + kRowBlock * d + band_size +
                             (padded ? n : 0) + kRowBlock * 2 * kWidth + d * 2 * kWidth +
                             (global ? global_row_size : 0);
  at::Tensor scratch = at::empty({at::get_num_threads() * per_thread}, query.options());
  float* scratch_p = scratch.data_ptr<float>();

  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    float* keys_t = scratch_p + at::get_thread_num() * per_thread;
    float* scores = keys_t + d * key_step;
    float* scaled = scores + kRowBlock * score_step;
    // Per row of the band, the bias of each key as a function of j - i + w: bias[|j - i|], contiguous.
    float* band = scaled + kRowBlock * d;
    float* pad_bias = band + band_size;
    float* global_scores = pad_bias + (padded ? n : 0);
    float* global_key_t = global_scores + kRowBlock * 2 * kWidth;  // key g transposed, then zero keys
    float* global_row = global_key_t + d * 2 * kWidth;
    std::fill(global_key_t, global_key_t + d * 2 * kWidth, 0.0f);
    // Keys first … last into the columns of keys_t, zeros in the 2 · kWidth after.
    auto transpose_range = [&](const float* head_k, int64_t first, int64_t last) {
      transpose_keys(head_k + first * ks[2], ks[2], last - first + 1, d, keys_t, key_step);
      for (int64_t c = 0; c < d; ++c)
        std::fill(keys_t + c * key_step + last - first + 1, keys_t + c * key_step + last - first + 1 + 2 * kWidth,
                  0.0f);
    };
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads, w = reach[h];
      const int64_t g = global ? global_p[b] : -1;
      const bool* real = padded ? pad_p + b * n : nullptr;
      const float* head_q = qp + b * qs[0] + h * qs[1];
      const float* head_k = kp + b * ks[0] + h * ks[1];
      const float* head_v = vp + b * vs[0] + h * vs[1];
      float* head_out = op + b * os[0] + h * os[1];
      if (g >= 0)
        for (int64_t c = 0; c < d; ++c) global_key_t[c * 2 * kWidth] = head_k[g * ks[2] + c];
      for (int64_t t = 0; t <= 2 * w; ++t) band[t] = biased ? bias_p[h * bias_step + std::abs(t - w)] : 0.0f;
      for (int64_t j = 0; j < n && padded; ++j) pad_bias[j] = real[j] ? 0.0f : kNegativeInfinity;

      // One row: its keys first … last (within the scores of `row`, keys from … to), with the band's bias
      // unless `dense`; key g added when it lies outside them.
      auto finish = [&](int64_t i, float* row, int64_t from, int64_t to, int64_t first, int64_t last,
                        bool dense) {
        float* result = head_out + i * os[2];
        if (padded && !real[i]) {
          std::fill(result, result + d, 0.0f);
          return;
        }
        const int64_t count = last - first + 1;
        float* s = row + (first - from);
        if (!dense) {
          const bool global_in_band = g >= first && g <= last;
          const float raw_global = global_in_band ? s[g - first] : 0.0f;
          const float* bias_row = band + (first - i + w);
          int64_t j = 0;
          for (; j + kWidth <= count; j += kWidth) store(s + j, add(load(s + j), load(bias_row + j)));
          for (; j < count; ++j) s[j] += bias_row[j];
          if (global_in_band) s[g - first] = raw_global;  // a global pair: no bias
        }
        if (padded) {
          int64_t j = 0;
          for (; j + kWidth <= count; j += kWidth) store(s + j, add(load(s + j), load(&pad_bias[first + j])));
          for (; j < count; ++j) s[j] += pad_bias[first + j];
        }
        // The global key's score, read apart when outside the band (scored with the row's block).
        const bool outside = g >= 0 && (g < first || g > last) && (!causal || g <= i) && (!padded || real[g]);
        float extra = kNegativeInfinity;
        if (outside)  // among the block's keys (untouched: outside this row's band), or scored apart
          extra = g >= from && g <= to ? row[g - from] : global_scores[(i % kRowBlock) * 2 * kWidth];
        const auto [top, total] = exponentiate(s, count, extra);
        if (top == kNegativeInfinity) {
          std::fill(result, result + d, 0.0f);
          return;
        }
        const float extra_p = outside ? std::exp(extra - top) : 0.0f;
        weighted_rows(s, count, head_v, vs[2], first, outside ? head_v + g * vs[2] : nullptr, extra_p,
                      total + extra_p, d, result);
      };

      for (int64_t c0 = 0; c0 < n; c0 += kChunkRows) {
        const int64_t c1 = std::min(n, c0 + kChunkRows);  // rows c0 … c1 - 1 read keys k0 … k1
        const int64_t k0 = std::max<int64_t>(0, c0 - w), k1 = causal ? c1 - 1 : std::min(n - 1, c1 - 1 + w);
        transpose_range(head_k, k0, k1);
        for (int64_t i0 = c0; i0 < c1; i0 += kRowBlock) {
          const int64_t rows = std::min(kRowBlock, c1 - i0);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < d; ++c) scaled[r * d + c] = scale * head_q[(i0 + r) * qs[2] + c];
          const int64_t from = std::max<int64_t>(0, i0 - w);
          const int64_t to = causal ? i0 + rows - 1 : std::min(n - 1, i0 + rows - 1 + w);
          score_rows(scaled, d, rows, keys_t, key_step, from - k0, to - from + 1, d, scores, score_step);
          if (g >= 0 && (g < from || g > to))  // key g and the zeros after it: one block of 2 · kWidth keys
            score_rows(scaled, d, rows, global_key_t, 2 * kWidth, 0, 1, d, global_scores, 2 * kWidth);
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = i0 + r;
            if (i == g) continue;  // the global token's row reads every key: below
            const int64_t first = std::max<int64_t>(0, i - w), last = causal ? i : std::min(n - 1, i + w);
            finish(i, scores + r * score_step, from, to, first, last, false);
          }
        }
      }
      if (g >= 0) {  // the global token's query: every key (before it, in decoders), without bias
        for (int64_t c = 0; c < d; ++c) scaled[c] = scale * head_q[g * qs[2] + c];
        const int64_t last = causal ? g : n - 1;
        for (int64_t k0 = 0; k0 <= last; k0 += key_columns_whole) {  // the keys a chunk at a time
          const int64_t k1 = std::min(last, k0 + key_columns_whole - 1);
          transpose_range(head_k, k0, k1);
          score_rows(scaled, d, 1, keys_t, key_step, 0, k1 - k0 + 1, d, global_row + k0, global_row_size);
        }
        finish(g, global_row, 0, last, 0, last, true);
      }
    }
  });
}

}  // namespace

// The CPU implementation of an operator banded_cpu.py defines, with its schema and fake implementation.
TORCH_LIBRARY_IMPL(attncard, CPU, m) { m.impl("banded_attention", &banded_attention); }
