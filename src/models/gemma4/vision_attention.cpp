#include "models/gemma4/vision_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::models::gemma4 {

void vision_attention_ref(const VisionAttnArgs& a, ThreadPool& pool) {
  const int64_t n = a.n, H = a.heads, hd = a.head_dim, w = H * hd;
  std::fill(a.out, a.out + n * w, 0.0f);
  pool.run([&](int ith, int nth) {
    std::vector<float> sc(static_cast<size_t>(n));
    for (int64_t job = ith; job < H * n; job += nth) {
      const int64_t h = job / n, i = job % n;
      const float* qi = a.q + i * w + h * hd;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        const float* kj = a.k + j * w + h * hd;
        float acc = 0.0f;
        for (int64_t e = 0; e < hd; ++e) acc += qi[e] * kj[e];
        sc[j] = acc;
        mx = std::max(mx, acc);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
      const float inv = 1.0f / sum;
      float* o = a.out + i * w + h * hd;
      for (int64_t j = 0; j < n; ++j) {
        const float pj = sc[j] * inv;
        const float* vj = a.v + j * w + h * hd;
        for (int64_t e = 0; e < hd; ++e) o[e] += pj * vj[e];
      }
    }
  });
}

namespace {

constexpr int kRows = 6;        // queries per block
constexpr int64_t kPanel = 8;   // AVX2: blocks sharing each chunk of kᵀ and tile of v
constexpr int64_t kKeys = 256;  // AVX2: keys per chunk of kᵀ (64 KiB at head_dim 64)
constexpr int kCols = 16;       // key columns (q·kᵀ) or value columns (p·v) per register tile

// kernels::exp_ref's sequence (Cody–Waite reduction, Cephes' degree-7 polynomial), written so
// the loop over a row vectorises.
[[gnu::always_inline]] inline float poly_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(n, -0.693359375f, x);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return y * two_n;
}

// s[r][j] = Σ_e q[r][e]·kt[e][j] for R query rows, all n columns (sums over e in order).
template <int R>
[[gnu::always_inline]] inline void scores(const float* const* q, const float* kt, int64_t n, int64_t hd,
                                          float* const* s) {
  int64_t j0 = 0;
  for (; j0 + kCols <= n; j0 += kCols) {
    float acc[R][kCols] = {};
    for (int64_t e = 0; e < hd; ++e) {
      const float* kr = kt + e * n + j0;
      for (int r = 0; r < R; ++r) {
        const float qe = q[r][e];
        for (int c = 0; c < kCols; ++c) acc[r][c] += qe * kr[c];
      }
    }
    for (int r = 0; r < R; ++r) std::memcpy(s[r] + j0, acc[r], sizeof acc[r]);
  }
  for (int r = 0; r < R; ++r)
    for (int64_t j = j0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t e = 0; e < hd; ++e) acc += q[r][e] * kt[e * n + j];
      s[r][j] = acc;
    }
}

// s = softmax(s) in place (max, exp(s − max), then · 1/Σ).
[[gnu::always_inline]] inline void softmax_row(float* s, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  for (int64_t j = 0; j < n; ++j) s[j] = poly_exp(s[j] - mx);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

// o[r][e] = Σ_j p[r][j]·v[j][e] for R rows (v rows `ldv` apart; sums over j in order).
template <int R>
[[gnu::always_inline]] inline void weighted(const float* const* p, const float* v, int64_t ldv, int64_t n, int64_t hd,
                                            float* const* o) {
  int64_t e0 = 0;
  for (; e0 + kCols <= hd; e0 += kCols) {
    float acc[R][kCols] = {};
    for (int64_t j = 0; j < n; ++j) {
      const float* vr = v + j * ldv + e0;
      for (int r = 0; r < R; ++r) {
        const float pj = p[r][j];
        for (int c = 0; c < kCols; ++c) acc[r][c] += pj * vr[c];
      }
    }
    for (int r = 0; r < R; ++r) std::memcpy(o[r] + e0, acc[r], sizeof acc[r]);
  }
  for (int r = 0; r < R; ++r)
    for (int64_t e = e0; e < hd; ++e) {
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j) acc += p[r][j] * v[j * ldv + e];
      o[r][e] = acc;
    }
}

// R queries from i0 of head h: scores into s (R rows of n), softmax, p·v into out.
template <int R>
[[gnu::always_inline]] inline void block(const VisionAttnArgs& a, const float* kt, int64_t h, int64_t i0, float* s) {
  const int64_t n = a.n, hd = a.head_dim, w = a.heads * hd;
  const float* q[R];
  float* srow[R];
  float* o[R];
  for (int r = 0; r < R; ++r) {
    q[r] = a.q + (i0 + r) * w + h * hd;
    srow[r] = s + r * n;
    o[r] = a.out + (i0 + r) * w + h * hd;
  }
  scores<R>(q, kt + h * hd * n, n, hd, srow);
  for (int r = 0; r < R; ++r) softmax_row(srow[r], n);
  weighted<R>(srow, a.v + h * hd, w, n, hd, o);
}

// Blocks [b0, b1) of the (head, 4-query block) list; the last block of a head may be shorter.
[[gnu::always_inline]] inline void blocks(const VisionAttnArgs& a, const float* kt, int64_t b0, int64_t b1, float* s) {
  const int64_t per_head = (a.n + kRows - 1) / kRows;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t h = b / per_head, i0 = (b % per_head) * kRows;
    if (i0 + kRows <= a.n) {
      block<kRows>(a, kt, h, i0, s);
    } else {
      for (int64_t i = i0; i < a.n; ++i) block<1>(a, kt, h, i, s);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SLUICE_AVX2 [[gnu::target("avx2,fma")]]

// exp_ref's sequence on 8 lanes (fused multiply-adds as exp_ref's std::fma).
SLUICE_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

SLUICE_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

SLUICE_AVX2 inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

SLUICE_AVX2 void softmax_avx2(float* s, int64_t n) {
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + j));
  float mx = hmax8(vm);
  for (int64_t t = j; t < n; ++t) mx = std::max(mx, s[t]);
  const __m256 m8 = _mm256_set1_ps(mx);
  __m256 vs = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m8));
    _mm256_storeu_ps(s + j, e);
    vs = _mm256_add_ps(vs, e);
  }
  float sum = hsum8(vs);
  for (int64_t t = j; t < n; ++t) sum += (s[t] = poly_exp(s[t] - mx));
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
  for (int64_t t = j; t < n; ++t) s[t] *= 1.0f / sum;
}

// The AVX2 layout: per head, kᵀ in tiles of 16 keys ([n16/16][hd][16], keys past n zero) and v
// in tiles of 16 columns ([hd/16][n][16]), so each tile streams contiguously.
struct Packed {
  const float* kp;  // [H][n16/16][hd][16]
  const float* vp;  // [H][hd/16][n][16]
  int64_t n16;
};

// R query rows × 16 keys per tile: 2R accumulators, two kᵀ loads and R broadcasts per e.
template <int R>
SLUICE_AVX2 void scores_avx2(const float* const* q, const float* kp, int64_t n16, int64_t hd, float* const* s) {
  for (int64_t j0 = 0; j0 < n16; j0 += 16) {
    const float* t = kp + j0 * hd;
    __m256 a[R][2];
    for (auto& r : a) r[0] = r[1] = _mm256_setzero_ps();
    for (int64_t e = 0; e < hd; ++e) {
      const __m256 k0 = _mm256_loadu_ps(t + e * 16), k1 = _mm256_loadu_ps(t + e * 16 + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 qe = _mm256_broadcast_ss(q[r] + e);
        a[r][0] = _mm256_fmadd_ps(qe, k0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(qe, k1, a[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(s[r] + j0, a[r][0]), _mm256_storeu_ps(s[r] + j0 + 8, a[r][1]);
  }
}

// R probability rows × 16 value columns per tile.
template <int R>
SLUICE_AVX2 void weighted_avx2(const float* const* p, const float* vp, int64_t n, int64_t hd, float* const* o) {
  for (int64_t e0 = 0; e0 < hd; e0 += 16) {
    const float* t = vp + e0 * n;
    __m256 a[R][2];
    for (auto& r : a) r[0] = r[1] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      const __m256 v0 = _mm256_loadu_ps(t + j * 16), v1 = _mm256_loadu_ps(t + j * 16 + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 pj = _mm256_broadcast_ss(p[r] + j);
        a[r][0] = _mm256_fmadd_ps(pj, v0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(pj, v1, a[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(o[r] + e0, a[r][0]), _mm256_storeu_ps(o[r] + e0 + 8, a[r][1]);
  }
}

template <int R>
SLUICE_AVX2 void block_avx2(const VisionAttnArgs& a, const Packed& pk, int64_t h, int64_t i0, float* s) {
  const int64_t n = a.n, hd = a.head_dim, w = a.heads * hd;
  const float* q[R];
  float* srow[R];
  float* o[R];
  for (int r = 0; r < R; ++r) {
    q[r] = a.q + (i0 + r) * w + h * hd;
    srow[r] = s + r * pk.n16;
    o[r] = a.out + (i0 + r) * w + h * hd;
  }
  scores_avx2<R>(q, pk.kp + h * hd * pk.n16, pk.n16, hd, srow);
  for (int r = 0; r < R; ++r) softmax_avx2(srow[r], n);
  weighted_avx2<R>(srow, pk.vp + h * hd * n, n, hd, o);
}

// nb full blocks of kRows queries from i0 of head h (a panel): scores a chunk of kKeys keys
// at a time for all its blocks (the chunk of kᵀ stays in L2 meanwhile), the softmax of every
// row, then p·v one 16-column tile of v at a time for all its blocks. `s` holds nb·kRows rows.
SLUICE_AVX2 void panel_avx2(const VisionAttnArgs& a, const Packed& pk, int64_t h, int64_t i0, int64_t nb, float* s) {
  const int64_t n = a.n, hd = a.head_dim, w = a.heads * hd, n16 = pk.n16;
  const float* kp = pk.kp + h * hd * n16;
  const float* vp = pk.vp + h * hd * n;
  const float* q[kRows];
  float* srow[kRows];
  float* o[kRows];
  for (int64_t j0 = 0; j0 < n16; j0 += kKeys) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < kRows; ++r) {
        q[r] = a.q + (i0 + b * kRows + r) * w + h * hd;
        srow[r] = s + (b * kRows + r) * n16 + j0;
      }
      scores_avx2<kRows>(q, kp + j0 * hd, std::min(kKeys, n16 - j0), hd, srow);
    }
  }
  for (int64_t r = 0; r < nb * kRows; ++r) softmax_avx2(s + r * n16, n);
  for (int64_t e0 = 0; e0 < hd; e0 += 16) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < kRows; ++r) {
        srow[r] = s + (b * kRows + r) * n16;
        o[r] = a.out + (i0 + b * kRows + r) * w + h * hd + e0;
      }
      weighted_avx2<kRows>(srow, vp + e0 * n, n, 16, o);
    }
  }
}

// Blocks [b0, b1) of the (head, kRows-query block) list, up to kPanel consecutive full blocks
// of one head at a time; the head's last, short block query by query.
SLUICE_AVX2 void blocks_avx2(const VisionAttnArgs& a, const Packed& pk, int64_t b0, int64_t b1, float* s) {
  const int64_t per_head = (a.n + kRows - 1) / kRows, full = a.n / kRows;
  for (int64_t b = b0; b < b1;) {
    const int64_t h = b / per_head, bi = b % per_head;
    if (bi < full) {
      const int64_t nb = std::min({kPanel, full - bi, b1 - b});
      panel_avx2(a, pk, h, bi * kRows, nb, s);
      b += nb;
    } else {
      for (int64_t i = bi * kRows; i < a.n; ++i) block_avx2<1>(a, pk, h, i, s);
      ++b;
    }
  }
}

// Packs k and v into `buf`, split over the threads by head.
void pack_avx2(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& buf, Packed& pk) {
  const int64_t n = a.n, H = a.heads, hd = a.head_dim, w = H * hd, n16 = (n + 15) / 16 * 16;
  buf.assign(static_cast<size_t>(H * hd * (n16 + n)), 0.0f);
  float* kp = buf.data();
  float* vp = kp + H * hd * n16;
  pool.run([&](int ith, int nth) {
    for (int64_t h = ith; h < H; h += nth) {
      for (int64_t j = 0; j < n; ++j) {
        const float* kr = a.k + j * w + h * hd;
        const float* vr = a.v + j * w + h * hd;
        float* kt = kp + h * hd * n16 + (j / 16) * hd * 16 + j % 16;
        for (int64_t e = 0; e < hd; ++e) kt[e * 16] = kr[e];
        for (int64_t e0 = 0; e0 < hd; e0 += 16)
          std::memcpy(vp + h * hd * n + e0 * n + j * 16, vr + e0, 16 * sizeof(float));
      }
    }
  });
  pk = {kp, vp, n16};
}

bool use_avx2(const VisionAttnArgs& a) {
  static const bool cpu = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return cpu && a.head_dim % 16 == 0;
}
#undef SLUICE_AVX2
#endif

}  // namespace

void vision_attention(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& kt) {
  const int64_t n = a.n, H = a.heads, hd = a.head_dim, w = H * hd;
  const int64_t total = H * ((n + kRows - 1) / kRows);
#if defined(__x86_64__) && defined(__GNUC__)
  if (use_avx2(a)) {
    Packed pk{};
    pack_avx2(a, pool, kt, pk);
    pool.run([&](int ith, int nth) {
      std::vector<float> s(static_cast<size_t>(kPanel * kRows * pk.n16));
      blocks_avx2(a, pk, total * ith / nth, total * (ith + 1) / nth, s.data());
    });
    return;
  }
#endif
  kt.resize(static_cast<size_t>(H * hd * n));
  pool.run([&](int ith, int nth) {  // kt[h][e][j] = k[j][h·hd + e], split by key rows
    const int64_t j0 = n * ith / nth, j1 = n * (ith + 1) / nth;
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t c = 0; c < w; ++c) kt[c * n + j] = a.k[j * w + c];
  });
  pool.run([&](int ith, int nth) {
    std::vector<float> s(static_cast<size_t>(kRows * n));
    blocks(a, kt.data(), total * ith / nth, total * (ith + 1) / nth, s.data());
  });
}

}  // namespace sluice::models::gemma4
