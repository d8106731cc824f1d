// Top-k attention on the CPU: the scores, selection, softmax and P·V of adaptive_sparse
// (modules/adaptive_sparse/attention.py) at inference, in one pass per head. Built on first use by top_k.py
// (torch.utils.cpp_extension), with AVX2 and FMA, on machines whose CPU has them; with AVX-512 too where torch
// itself runs AVX-512 code (its CPU capability), as its fused SDPA then does: the scores, the selection and the
// sum of value rows below have a 16-lane form for it.
//
// For each query row, with scores s_j = scaling · q·k_j over its keys (masked keys at -inf):
//   the k largest scores, largest first, ties to the lower key index; NaN ranks above every number, as in
//   torch.topk;
//   p = softmax of those k scores (a -inf among them gets 0; a row of -inf only gets no weight at all);
//   out = Σ_i p_i · v[index_i].
//
// Why not torch.topk: on the CPU it costs about 0.75 µs a row at any N up to 512, three times the whole
// fused SDPA call at N = 128 with MiniLM's shape. Here a row costs a pass of vector maxima, one vector
// compare per 8 scores, and a ranking of the few scores that pass.

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
#error "top_k_attention.cpp needs AVX2 (top_k.py builds it with -mavx2 -mfma only where the CPU has them)"
#endif

namespace {

constexpr int64_t kWidth = 8;  // floats in an AVX2 register
constexpr int64_t kWide = 16;  // floats in an AVX-512 register
// More candidates than this (many ties, or rows mostly masked) go to the general path.
constexpr int64_t kMaxCandidates = 64;
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// Any row, any k <= n: a partial sort of the key indices. NaN first, then larger scores, then lower indices.
void select_by_sort(const float* s, int64_t n, int64_t k, float* values, int64_t* indices, int64_t* keys) {
  for (int64_t j = 0; j < n; ++j) keys[j] = j;
  std::partial_sort(keys, keys + k, keys + n, [s](int64_t a, int64_t b) {
    const float x = s[a], y = s[b];
    const bool x_nan = std::isnan(x), y_nan = std::isnan(y);
    if (x_nan != y_nan) return x_nan;
    if (!x_nan && x != y) return x > y;
    return a < b;
  });
  for (int64_t i = 0; i < k; ++i) {
    indices[i] = keys[i];
    values[i] = s[keys[i]];
  }
}

// The k best of `count` (at most kMaxCandidates) candidate keys of the row s, in key order: values and
// indices largest first. Each candidate's rank: the candidates above it, and the equal ones of a lower key
// (earlier in `keys`), 8 at a time. Ranks from k on are written to a spare slot rather than skipped by a branch.
void rank_candidates(const float* s, const int32_t* keys, int64_t count, int64_t k, float* values,
                     int64_t* indices) {
  alignas(32) float scores[kMaxCandidates + kWidth];
  for (int64_t i = 0; i < count; ++i) scores[i] = s[keys[i]];
  for (int64_t i = count; i < count + kWidth; ++i) scores[i] = kNegativeInfinity;  // never above, never equal
  float ranked_values[kMaxCandidates + 1];
  int64_t ranked_keys[kMaxCandidates + 1];
  for (int64_t i = 0; i < count; ++i) {
    const __m256 score = _mm256_set1_ps(scores[i]);
    int64_t rank = 0;
    for (int64_t c = 0; c < count; c += kWidth) {
      const __m256 other = _mm256_load_ps(scores + c);
      const unsigned above = _mm256_movemask_ps(_mm256_cmp_ps(other, score, _CMP_GT_OQ));
      const unsigned equal = _mm256_movemask_ps(_mm256_cmp_ps(other, score, _CMP_EQ_OQ));
      const int64_t earlier = std::clamp<int64_t>(i - c, 0, kWidth);
      rank += __builtin_popcount(above) + __builtin_popcount(equal & ((1u << earlier) - 1));
    }
    rank = std::min(rank, k);
    ranked_values[rank] = scores[i];
    ranked_keys[rank] = keys[i];
  }
  std::copy(ranked_values, ranked_values + k, values);
  std::copy(ranked_keys, ranked_keys + k, indices);
}

#ifndef __AVX512F__
// kPack.lanes[m]: the lanes set in the 8-bit mask m, in order, then zeros: the permutation that packs them.
struct PackTable {
  __m256i lanes[256];
  PackTable() {
    for (int mask = 0; mask < 256; ++mask) {
      alignas(32) int32_t order[kWidth] = {};
      for (int lane = 0, count = 0; lane < kWidth; ++lane)
        if (mask >> lane & 1) order[count++] = lane;
      lanes[mask] = _mm256_load_si256(reinterpret_cast<const __m256i*>(order));
    }
  }
};
const PackTable kPack;

// The common case, k <= 8 * Registers <= n: returns false (the general path takes the row) when a NaN is
// present or more than kMaxCandidates scores pass the bound.
template <int Registers>
bool select_by_bound(const float* s, int64_t n, int64_t k, float* values, int64_t* indices) {
  // 1. Running maxima of the blocks of 8, dealt out in turn to the registers: 8 · Registers lane maxima, each
  //    a different score. The largest lane maximum t with at least k lane maxima >= t has at least k scores
  //    >= it, so the k-th largest score is >= t: every score kept passes s >= t.
  __m256 maxima[Registers];
  for (int r = 0; r < Registers; ++r) maxima[r] = _mm256_loadu_ps(s + r * kWidth);
  const int64_t rounds = n - n % (Registers * kWidth);
  for (int64_t j = Registers * kWidth; j < rounds; j += Registers * kWidth)
    for (int r = 0; r < Registers; ++r)
      maxima[r] = _mm256_max_ps(maxima[r], _mm256_loadu_ps(s + j + r * kWidth));
  alignas(32) float lanes[Registers * kWidth];
  for (int r = 0; r < Registers; ++r) _mm256_store_ps(lanes + r * kWidth, maxima[r]);
  float bound = kNegativeInfinity;
  for (int i = 0; i < Registers * kWidth; ++i) {
    const __m256 lane = _mm256_set1_ps(lanes[i]);
    int at_least = 0;
    for (int r = 0; r < Registers; ++r)
      at_least += __builtin_popcount(_mm256_movemask_ps(_mm256_cmp_ps(maxima[r], lane, _CMP_GE_OQ)));
    bound = at_least >= k && lanes[i] > bound ? lanes[i] : bound;
  }
  if (bound == kNegativeInfinity) return false;  // fewer than k lanes hold an allowed score

  // 2. The candidates: the keys whose score is >= the bound, in key order. Without a branch per block: the
  //    lanes that pass are packed to the front of a register of key indices (kPack), written out, and
  //    counted.
  const __m256 bound_lanes = _mm256_set1_ps(bound);
  alignas(32) int32_t keys[kMaxCandidates + kWidth];
  int64_t count = 0;
  int unordered = 0;
  __m256i block_keys = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i next_block = _mm256_set1_epi32(kWidth);
  const int64_t whole = n - n % kWidth;
  for (int64_t j = 0; j < whole; j += kWidth, block_keys = _mm256_add_epi32(block_keys, next_block)) {
    const __m256 x = _mm256_loadu_ps(s + j);
    const unsigned passed = _mm256_movemask_ps(_mm256_cmp_ps(x, bound_lanes, _CMP_GE_OQ));
    unordered |= _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m256i packed = _mm256_permutevar8x32_epi32(block_keys, kPack.lanes[passed]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(keys + std::min(count, kMaxCandidates)), packed);
    count += __builtin_popcount(passed);
  }
  for (int64_t j = whole; j < n; ++j) {
    unordered |= std::isnan(s[j]);
    if (s[j] >= bound) {
      if (count < kMaxCandidates) keys[count] = static_cast<int32_t>(j);
      ++count;
    }
  }
  if (unordered || count > kMaxCandidates) return false;

  rank_candidates(s, keys, count, k, values, indices);
  return true;
}
#endif

#ifdef __AVX512F__
// select_by_bound with 16-lane registers: the same bound from as many lane maxima (16 · Registers), the
// candidates packed by the instruction made for it (vpcompressd), each rank from 16 comparisons at a time.
template <int Registers>
bool select_by_bound_wide(const float* s, int64_t n, int64_t k, float* values, int64_t* indices) {
  __m512 maxima[Registers];
  for (int r = 0; r < Registers; ++r) maxima[r] = _mm512_loadu_ps(s + r * kWide);
  const int64_t rounds = n - n % (Registers * kWide);
  for (int64_t j = Registers * kWide; j < rounds; j += Registers * kWide)
    for (int r = 0; r < Registers; ++r)
      maxima[r] = _mm512_max_ps(maxima[r], _mm512_loadu_ps(s + j + r * kWide));
  // Each lane maximum's count of lane maxima >= it, for all lanes at once: every register compared with each
  // rotation of every register (independent shuffles, not a chain of scalar steps).
  __m512i at_least[Registers];
  for (int r = 0; r < Registers; ++r) at_least[r] = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi32(1);
  for (int other = 0; other < Registers; ++other) {
    const __m512i others = _mm512_castps_si512(maxima[other]);
    for (int shift = 0; shift < kWide; ++shift) {
      const __m512 rotated = _mm512_castsi512_ps(_mm512_alignr_epi32(others, others, shift));
      for (int r = 0; r < Registers; ++r)
        at_least[r] = _mm512_mask_add_epi32(at_least[r], _mm512_cmp_ps_mask(rotated, maxima[r], _CMP_GE_OQ),
                                            at_least[r], one);
    }
  }
  const __m512i needed = _mm512_set1_epi32(static_cast<int32_t>(k));
  __m512 bounds = _mm512_set1_ps(kNegativeInfinity);
  for (int r = 0; r < Registers; ++r)
    bounds = _mm512_mask_max_ps(bounds, _mm512_cmpge_epi32_mask(at_least[r], needed), bounds, maxima[r]);
  const float bound = _mm512_reduce_max_ps(bounds);
  if (bound == kNegativeInfinity) return false;

  // 2. The candidates, in key order. Up to 16 (the common case) they are gathered in two registers, scores and
  //    keys: each block's passing lanes packed (vcompressps) and moved to the lanes after those already held.
  //    More go to memory (`keys`) and the ranking of the general form below.
  const __m512 bound_lanes = _mm512_set1_ps(bound);
  const __m512 below_all = _mm512_set1_ps(kNegativeInfinity);
  const __m512i lane_index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i next_block = _mm512_set1_epi32(kWide);
  alignas(64) int32_t keys[kMaxCandidates + kWide];
  __m512 held_scores = below_all;  // lanes past the count stay -inf: never above a candidate, never equal
  __m512i held_keys = _mm512_setzero_si512();
  int64_t count = 0;
  __mmask16 unordered = 0;
  __m512i block_keys = lane_index;
  for (int64_t j = 0; j < n; j += kWide, block_keys = _mm512_add_epi32(block_keys, next_block)) {
    // The last, partial block is read with -inf in the lanes past n: never a candidate, never NaN.
    const __mmask16 inside = n - j >= kWide ? 0xFFFF : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 x = _mm512_mask_loadu_ps(below_all, inside, s + j);
    const __mmask16 passed = _mm512_cmp_ps_mask(x, bound_lanes, _CMP_GE_OQ);
    unordered |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512i packed_keys = _mm512_maskz_compress_epi32(passed, block_keys);
    const int64_t passing = __builtin_popcount(passed);
    if (count + passing <= kWide) {
      const __m512i from = _mm512_sub_epi32(lane_index, _mm512_set1_epi32(static_cast<int32_t>(count)));
      const __mmask16 to = static_cast<__mmask16>(((1u << passing) - 1) << count);
      held_scores = _mm512_mask_permutexvar_ps(held_scores, to, from, _mm512_maskz_compress_ps(passed, x));
      held_keys = _mm512_mask_permutexvar_epi32(held_keys, to, from, packed_keys);
    }
    _mm512_storeu_si512(keys + std::min(count, kMaxCandidates), packed_keys);
    count += passing;
  }
  if (unordered || count > kMaxCandidates) return false;

  if (count > kWide) {  // more than a register holds
    rank_candidates(s, keys, count, k, values, indices);
    return true;
  }
  // 3. Each candidate's rank, all lanes at once: compared with each rotation of the register, it counts
  //    those above it and the equal ones of a lower key (lane). Ranks from k on go to a spare slot.
  __m512i ranks = _mm512_setzero_si512();
  const __m512i held = _mm512_castps_si512(held_scores);
  for (int shift = 1; shift < kWide; ++shift) {
    const __m512 other = _mm512_castsi512_ps(_mm512_alignr_epi32(held, held, shift));  // lane i: (i + shift) % 16
    const __mmask16 lower = static_cast<__mmask16>(0xFFFFu << (kWide - shift));  // (i + shift) % 16 < i
    const __mmask16 before = _mm512_cmp_ps_mask(other, held_scores, _CMP_GT_OQ) |
                             (_mm512_cmp_ps_mask(other, held_scores, _CMP_EQ_OQ) & lower);
    ranks = _mm512_mask_add_epi32(ranks, before, ranks, one);
  }
  float ranked_values[kWide + 1];
  int64_t ranked_keys[kWide + 1];
  alignas(64) int32_t rank_of[kWide], key_of[kWide];
  alignas(64) float score_of[kWide];
  _mm512_store_si512(rank_of, _mm512_min_epi32(ranks, _mm512_set1_epi32(static_cast<int32_t>(k))));
  _mm512_store_si512(key_of, held_keys);
  _mm512_store_ps(score_of, held_scores);
  for (int64_t i = 0; i < count; ++i) {
    ranked_values[rank_of[i]] = score_of[i];
    ranked_keys[rank_of[i]] = key_of[i];
  }
  std::copy(ranked_values, ranked_values + k, values);
  std::copy(ranked_keys, ranked_keys + k, indices);
  return true;
}
#endif

void select_top_k(const float* s, int64_t n, int64_t k, float* values, int64_t* indices, int64_t* keys) {
  // 16 lane maxima up to 511 keys, 32 beyond: there the tighter bound pays for itself.
#ifdef __AVX512F__
  if (n >= 512 && k <= 2 * kWide && select_by_bound_wide<2>(s, n, k, values, indices)) return;
  if (n < 512 && n >= kWide && k <= kWide && select_by_bound_wide<1>(s, n, k, values, indices)) return;
#else
  if (n >= 512 && k <= 4 * kWidth && select_by_bound<4>(s, n, k, values, indices)) return;
  if (n < 512 && n >= 2 * kWidth && k <= 2 * kWidth && select_by_bound<2>(s, n, k, values, indices)) return;
#endif
  select_by_sort(s, n, k, values, indices, keys);
}

// out (d) = Σ_i softmax(values)_i · value rows[indices_i]; values largest first.
void weighted_sum_scalar(const float* values, const int64_t* indices, int64_t k, const float* value,
                         int64_t key_stride, int64_t d, float* out) {
  std::fill(out, out + d, 0.0f);
  const float largest = values[0];
  if (largest == kNegativeInfinity) return;  // no allowed key: output 0
  float weights[kMaxCandidates];
  std::vector<float> spilled;  // k beyond kMaxCandidates (the general path)
  float* w = weights;
  if (k > kMaxCandidates) {
    spilled.resize(k);
    w = spilled.data();
  }
  float total = 0.0f;
  for (int64_t i = 0; i < k; ++i) total += (w[i] = std::exp(values[i] - largest));
  for (int64_t i = 0; i < k; ++i) {
    const float p = w[i] / total;
    const float* row = value + indices[i] * key_stride;
    for (int64_t c = 0; c < d; ++c) out[c] += p * row[c];
  }
}

#ifdef __AVX512F__
// exp(x) for x <= 0 (kept scores minus the row's largest), -inf (0) or NaN (NaN), within 2 ulp of expf: x =
// n·ln 2 + r, |r| <= ln 2 / 2, e^r by Cephes' polynomial for expf, times 2^n by vscalefps. A row's k weights are
// one register where std::exp would be k calls.
__m512 exp_wide(__m512 x) {
  // Below -104 the result is under half the smallest float: 0 (-inf included). max(bound, x) keeps a NaN x.
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln 2 in two parts, as Cephes does
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// out (d) = Σ_i softmax(values)_i · value rows[indices_i]; values largest first. The k weights in one register
// (k <= 16, as KERNEL_MAX_K), each 16 columns of out summed in a register over the k rows.
void weighted_sum(const float* values, const int64_t* indices, int64_t k, const float* value,
                  int64_t key_stride, int64_t d, float* out) {
  const float largest = values[0];
  if (largest == kNegativeInfinity || k > kWide)  // no allowed key (output 0), or more keys than a register
    return weighted_sum_scalar(values, indices, k, value, key_stride, d, out);
  const __mmask16 kept = static_cast<__mmask16>((1u << k) - 1);
  const __m512 shifted = _mm512_sub_ps(_mm512_maskz_loadu_ps(kept, values), _mm512_set1_ps(largest));
  const __m512 weights = _mm512_maskz_mov_ps(kept, exp_wide(shifted));
  alignas(64) float w[kWide];
  _mm512_store_ps(w, _mm512_div_ps(weights, _mm512_set1_ps(_mm512_reduce_add_ps(weights))));
  for (int64_t c = 0; c < d; c += kWide) {
    const __mmask16 columns = d - c >= kWide ? 0xFFFF : static_cast<__mmask16>((1u << (d - c)) - 1);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; ++i)
      sum = _mm512_fmadd_ps(_mm512_set1_ps(w[i]), _mm512_maskz_loadu_ps(columns, value + indices[i] * key_stride + c),
                            sum);
    _mm512_mask_storeu_ps(out + c, columns, sum);
  }
}
#else
void weighted_sum(const float* values, const int64_t* indices, int64_t k, const float* value,
                  int64_t key_stride, int64_t d, float* out) {
  weighted_sum_scalar(values, indices, k, value, key_stride, d, out);
}
#endif

// Scores of `Rows` query rows (q, row stride q_step) against 16 keys whose D values lie transposed in
// keys_t (key_step floats apart per d): scaling · q·k into scores (row stride score_step).
template <int Rows>
void score_block(const float* q, int64_t q_step, const float* keys_t, int64_t key_step, int64_t d,
                 float scaling, float* scores, int64_t score_step) {
  __m256 low[Rows], high[Rows];
  for (int r = 0; r < Rows; ++r) low[r] = high[r] = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; ++c) {
    const __m256 k_low = _mm256_loadu_ps(keys_t + c * key_step);
    const __m256 k_high = _mm256_loadu_ps(keys_t + c * key_step + 8);
    for (int r = 0; r < Rows; ++r) {
      const __m256 q_rc = _mm256_set1_ps(q[r * q_step + c]);
      low[r] = _mm256_fmadd_ps(q_rc, k_low, low[r]);
      high[r] = _mm256_fmadd_ps(q_rc, k_high, high[r]);
    }
  }
  const __m256 scale = _mm256_set1_ps(scaling);
  for (int r = 0; r < Rows; ++r) {
    _mm256_storeu_ps(scores + r * score_step, _mm256_mul_ps(low[r], scale));
    _mm256_storeu_ps(scores + r * score_step + 8, _mm256_mul_ps(high[r], scale));
  }
}

constexpr int64_t kKeyBlock = 16;  // keys per block of the transposed keys
constexpr int64_t kChunkRows = 36;  // query rows scored at a time: their scores stay in the L1 and L2 caches

#ifdef __AVX512F__
// score_block with 16-lane registers: `Rows` query rows against `Blocks` blocks of 16 keys (the blocks lie
// 16 · d floats apart in the panels).
template <int Rows, int Blocks>
void score_block_wide(const float* q, int64_t q_step, const float* keys_t, int64_t d, float scaling,
                      float* scores, int64_t score_step) {
  __m512 sums[Rows][Blocks];
  for (int r = 0; r < Rows; ++r)
    for (int b = 0; b < Blocks; ++b) sums[r][b] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; ++c) {
    __m512 key_columns[Blocks];
    for (int b = 0; b < Blocks; ++b) key_columns[b] = _mm512_loadu_ps(keys_t + (b * d + c) * kKeyBlock);
    for (int r = 0; r < Rows; ++r) {
      const __m512 q_rc = _mm512_set1_ps(q[r * q_step + c]);
      for (int b = 0; b < Blocks; ++b) sums[r][b] = _mm512_fmadd_ps(q_rc, key_columns[b], sums[r][b]);
    }
  }
  const __m512 scale = _mm512_set1_ps(scaling);
  for (int r = 0; r < Rows; ++r)
    for (int b = 0; b < Blocks; ++b)
      _mm512_storeu_ps(scores + r * score_step + b * kKeyBlock, _mm512_mul_ps(sums[r][b], scale));
}

// 12 query rows against 32 keys: 24 accumulators, 2 key vectors and a broadcast of the 32 registers.
constexpr int64_t kRowBlock = 12;

// The scores of `rows` (at most kRowBlock) query rows against every key of the panels.
template <int Rows>
void score_rows(const float* q, int64_t q_step, const float* panels, int64_t padded, int64_t d, float scaling,
                float* scores) {
  int64_t j = 0;
  for (; j + 2 * kKeyBlock <= padded; j += 2 * kKeyBlock)
    score_block_wide<Rows, 2>(q, q_step, panels + j * d, d, scaling, scores + j, padded);
  if (j < padded) score_block_wide<Rows, 1>(q, q_step, panels + j * d, d, scaling, scores + j, padded);
}
#else
constexpr int64_t kRowBlock = 6;  // query rows per score block: 12 accumulators, 2 key vectors, 1 broadcast

template <int Rows>
void score_rows(const float* q, int64_t q_step, const float* panels, int64_t padded, int64_t d, float scaling,
                float* scores) {
  for (int64_t j = 0; j < padded; j += kKeyBlock)
    score_block<Rows>(q, q_step, panels + j * d, kKeyBlock, d, scaling, scores + j, padded);
}
#endif

// score_rows for a count of rows known only at run time (the last block of a chunk may be short).
template <int Rows = kRowBlock>
void score_any_rows(int64_t rows, const float* q, int64_t q_step, const float* panels, int64_t padded, int64_t d,
                    float scaling, float* scores) {
  if constexpr (Rows > 1) {
    if (rows < Rows) return score_any_rows<Rows - 1>(rows, q, q_step, panels, padded, d, scaling, scores);
  }
  score_rows<Rows>(q, q_step, panels, padded, d, scaling, scores);
}

// query (B, H, Nq, D), key and value (B, H, Nk, D), out (B, H, Nq, D): float32 on the CPU, last dimensions
// contiguous, any other strides. mask: empty, or boolean, broadcastable to (B, H, Nq, Nk) (size-1 or stride-0
// dimensions), last dimension contiguous, true where a query may attend. causal (used without a mask):
// query i attends to keys j <= i + Nk - Nq. Writes out. With keep, returns each row's k kept scores, largest
// first, and their key indices, (B, H, Nq, k) each; else two empty tensors. Memory beyond the inputs and
// outputs, per thread: one head's keys transposed and 36 rows of scores; never Nq × Nk.
std::tuple<at::Tensor, at::Tensor> top_k_attention(const at::Tensor& query, const at::Tensor& key,
                                                   const at::Tensor& value, const at::Tensor& mask,
                                                   bool causal, double scaling, int64_t k, bool keep,
                                                   at::Tensor out) {
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4 && out.dim() == 4,
              "query, key, value and out must be (B, H, N, D)");
  const at::Tensor* tensors[] = {&query, &key, &value, &out};
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->device().is_cpu(),
                "top_k_attention takes float32 CPU tensors");
    TORCH_CHECK(t->stride(3) == 1 || t->size(3) == 1,
                "the last dimension of query, key, value and out must be contiguous");
  }
  const int64_t batch = query.size(0), heads = query.size(1), n_q = query.size(2), d = query.size(3);
  const int64_t n_k = key.size(2);
  TORCH_CHECK(key.size(0) == batch && key.size(1) == heads && key.size(3) == d, "key must be (B, H, Nk, D)");
  TORCH_CHECK(value.sizes() == key.sizes(), "value must be shaped like key");
  TORCH_CHECK(out.sizes() == query.sizes(), "out must be shaped like query");
  TORCH_CHECK(k >= 1 && k <= n_k, "k must be between 1 and the number of keys");
  const bool masked = mask.numel() > 0;
  if (masked) {
    TORCH_CHECK(mask.dim() == 4 && mask.scalar_type() == at::kBool && mask.size(2) == n_q &&
                    mask.size(3) == n_k && (mask.size(3) == 1 || mask.stride(3) == 1),
                "mask must be boolean (B or 1, H or 1, Nq, Nk) with a contiguous last dimension");
    TORCH_CHECK((mask.size(0) == 1 || mask.size(0) == batch) && (mask.size(1) == 1 || mask.size(1) == heads),
                "mask must be boolean (B or 1, H or 1, Nq, Nk)");
  }
  auto kept = at::empty({keep ? batch : 0, heads, n_q, k}, query.options());
  auto indices = at::empty({keep ? batch : 0, heads, n_q, k}, query.options().dtype(at::kLong));

  const float* qp = query.data_ptr<float>();
  const float* kp = key.data_ptr<float>();
  const float* vp = value.data_ptr<float>();
  float* op = out.data_ptr<float>();
  float* kept_p = kept.data_ptr<float>();
  int64_t* index_p = indices.data_ptr<int64_t>();
  const bool* mp = masked ? mask.data_ptr<bool>() : nullptr;
  const auto qs = query.strides(), ks = key.strides(), vs = value.strides(), os = out.strides();
  int64_t ms[3] = {0, 0, 0};
  if (masked)
    for (int i = 0; i < 3; ++i) ms[i] = mask.size(i) == 1 ? 0 : mask.stride(i);
  const float scale = static_cast<float>(scaling);
  const int64_t padded = (n_k + kKeyBlock - 1) / kKeyBlock * kKeyBlock;

  // Each thread's scratch, from torch's allocator on this thread, so that it counts in the allocator's peak
  // as the tensors do (and a worker's own malloc opens no heap arena of its own).
  const int64_t floats_per_thread = padded * d + kChunkRows * padded + k;
  const int64_t longs_per_thread = n_k + k;
  at::Tensor float_scratch = at::empty({at::get_num_threads() * floats_per_thread}, query.options());
  at::Tensor long_scratch = at::empty({at::get_num_threads() * longs_per_thread}, query.options().dtype(at::kLong));
  float* float_scratch_p = float_scratch.data_ptr<float>();
  int64_t* long_scratch_p = long_scratch.data_ptr<int64_t>();

  // One task per head: its keys are transposed once, for all its rows.
  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    // The keys transposed by blocks, (key blocks, D, 16), zeros after Nk: the 16 values of a key block at one
    // d are two vector loads, and a block's values are contiguous. (Transposed whole, (D, Nk), the rows of a
    // block would lie Nk floats apart and, at Nk = 512, fall into two sets of the L1 cache.)
    float* panels = float_scratch_p + at::get_thread_num() * floats_per_thread;
    float* scores = panels + padded * d;
    float* row_kept = scores + kChunkRows * padded;
    int64_t* order = long_scratch_p + at::get_thread_num() * longs_per_thread;
    int64_t* row_indices = order + n_k;
    std::fill(panels, panels + padded * d, 0.0f);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      const float* head_keys = kp + b * ks[0] + h * ks[1];
      for (int64_t j = 0; j < n_k; ++j)
        for (int64_t c = 0; c < d; ++c)
          panels[(j / kKeyBlock * d + c) * kKeyBlock + j % kKeyBlock] = head_keys[j * ks[2] + c];
      for (int64_t first = 0; first < n_q; first += kChunkRows) {
        const int64_t rows = std::min(kChunkRows, n_q - first);
        const float* q = qp + b * qs[0] + h * qs[1] + first * qs[2];
        for (int64_t r = 0; r < rows; r += kRowBlock)
          score_any_rows(std::min(kRowBlock, rows - r), q + r * qs[2], qs[2], panels, padded, d, scale,
                         scores + r * padded);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = first + r;
          float* row = scores + r * padded;
          int64_t allowed = n_k;  // causal: the keys after the last allowed one are left out of the selection
          if (masked) {
            const bool* m = mp + b * ms[0] + h * ms[1] + i * ms[2];
            for (int64_t j = 0; j < n_k; ++j) row[j] = m[j] ? row[j] : kNegativeInfinity;
          } else if (causal) {
            allowed = std::clamp<int64_t>(i + n_k - n_q + 1, 0, n_k);
            for (int64_t j = allowed; j < n_k; ++j) row[j] = kNegativeInfinity;
          }
          float* top = keep ? kept_p + (bh * n_q + i) * k : row_kept;
          int64_t* top_keys = keep ? index_p + (bh * n_q + i) * k : row_indices;
          const int64_t row_k = std::min(k, std::max<int64_t>(allowed, 1));
          select_top_k(row, std::max(allowed, row_k), row_k, top, top_keys, order);
          for (int64_t extra = row_k; extra < k; ++extra) {  // fewer allowed keys than k: the rest at -inf
            top[extra] = kNegativeInfinity;
            top_keys[extra] = std::min(extra, n_k - 1);
          }
          weighted_sum(top, top_keys, k, vp + b * vs[0] + h * vs[1], vs[2], d,
                       op + b * os[0] + h * os[1] + i * os[2]);
        }
      }
    }
  });
  return {kept, indices};
}

// scores (..., N) float32 on the CPU: each row's k largest and their indices (..., k), largest first, as
// torch.topk gives them (ties to the lower index; NaN first). For adaptive_sparse's training, whose masked
// softmax needs the selection over scores autograd already holds, faster than torch.topk on short rows
// (docs/benchmarks.md, "Kernel constants").
std::tuple<at::Tensor, at::Tensor> top_k_rows(const at::Tensor& scores, int64_t k) {
  TORCH_CHECK(scores.scalar_type() == at::kFloat && scores.device().is_cpu() && scores.dim() >= 1,
              "top_k_rows takes a float32 CPU tensor of rows");
  const int64_t n = scores.size(-1);
  TORCH_CHECK(k >= 1 && k <= n, "k must be between 1 and the row length");
  const at::Tensor rows_of = scores.contiguous();
  auto sizes = rows_of.sizes().vec();
  sizes.back() = k;
  auto values = at::empty(sizes, rows_of.options());
  auto indices = at::empty(sizes, rows_of.options().dtype(at::kLong));
  const int64_t rows = n == 0 ? 0 : rows_of.numel() / n;
  const float* sp = rows_of.data_ptr<float>();
  float* vp = values.data_ptr<float>();
  int64_t* ip = indices.data_ptr<int64_t>();
  // Each thread's order buffer from torch's allocator on this thread (see top_k_attention).
  at::Tensor order_scratch = at::empty({at::get_num_threads() * n}, rows_of.options().dtype(at::kLong));
  int64_t* order_p = order_scratch.data_ptr<int64_t>();
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    int64_t* order = order_p + at::get_thread_num() * n;
    for (int64_t r = begin; r < end; ++r) select_top_k(sp + r * n, n, k, vp + r * k, ip + r * k, order);
  });
  return {values, indices};
}

}  // namespace

// The CPU implementations of operators top_k.py defines, with their schemas and fake implementations.
TORCH_LIBRARY_IMPL(attncard, CPU, m) {
  m.impl("top_k_rows", &top_k_rows);
  m.impl("top_k_attention", &top_k_attention);
}
