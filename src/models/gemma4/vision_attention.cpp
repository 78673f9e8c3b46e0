// GCC 12's AVX-512 intrinsics read _mm512_undefined values (false positives, as in the
// kernels/cpu/x86_avx512 files).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "models/gemma4/vision_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "kernels/rowops.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/x86_avx2/exp8.h"
#include "kernels/cpu/x86_avx512/exp16.h"
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

constexpr int kRows = kVisionQueryBlock;  // queries per block
constexpr int64_t kPanel = 8;             // AVX2: blocks sharing each chunk of kᵀ and tile of v
constexpr int64_t kKeys = 256;            // AVX2: keys per chunk of kᵀ (64 KiB at head_dim 64)
constexpr int kCols = 16;                 // key columns (q·kᵀ) or value columns (p·v) per register tile

// y[r][c] = Σ_d x[r][d]·t[d·ld + c] for R rows and `cols` columns (sums over d in order).
// q·kᵀ is (q, kᵀ, ld n, n keys, head_dim); p·v is (p, v, ld H·hd, head_dim, n keys).
template <int R>
[[gnu::always_inline]] inline void tiles(const float* const* x, const float* t, int64_t ld, int64_t cols, int64_t depth,
                                         float* const* y) {
  int64_t c0 = 0;
  for (; c0 + kCols <= cols; c0 += kCols) {
    float acc[R][kCols] = {};
    for (int64_t d = 0; d < depth; ++d) {
      const float* tr = t + d * ld + c0;
      for (int r = 0; r < R; ++r) {
        const float xd = x[r][d];
        for (int c = 0; c < kCols; ++c) acc[r][c] += xd * tr[c];
      }
    }
    for (int r = 0; r < R; ++r) std::memcpy(y[r] + c0, acc[r], sizeof acc[r]);
  }
  for (int r = 0; r < R; ++r)
    for (int64_t c = c0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t d = 0; d < depth; ++d) acc += x[r][d] * t[d * ld + c];
      y[r][c] = acc;
    }
}

// s = softmax(s) in place (max, exp(s − max), then · 1/Σ).
[[gnu::always_inline]] inline void softmax_row(float* s, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  for (int64_t j = 0; j < n; ++j) s[j] = kernels::exp_ref(s[j] - mx);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

// The row pointers of R queries from i0 of head h: q, score rows (ld_s apart in s), out.
template <int R>
struct Rows {
  const float* q[R];
  float* s[R];
  float* o[R];
  Rows(const VisionAttnArgs& a, int64_t h, int64_t i0, float* sbuf, int64_t ld_s) {
    const int64_t w = a.heads * a.head_dim;
    for (int r = 0; r < R; ++r) {
      q[r] = a.q + (i0 + r) * w + h * a.head_dim;
      s[r] = sbuf + r * ld_s;
      o[r] = a.out + (i0 + r) * w + h * a.head_dim;
    }
  }
};

// R queries from i0 of head h: scores into s (R rows of n), softmax, p·v into out.
template <int R>
[[gnu::always_inline]] inline void block(const VisionAttnArgs& a, const float* kt, int64_t h, int64_t i0, float* s) {
  const int64_t n = a.n, hd = a.head_dim, w = a.heads * hd;
  const Rows<R> x(a, h, i0, s, n);
  tiles<R>(x.q, kt + h * hd * n, n, n, hd, x.s);
  for (int r = 0; r < R; ++r) softmax_row(x.s[r], n);
  tiles<R>(x.s, a.v + h * hd, w, hd, n, x.o);
}

// The queries [i0, i1) as a list of (head, kRows-query block) items; the last block of a head
// may be shorter (only where i1 = n).
struct QueryBlocks {
  int64_t i0, i1, per_head, total;
  QueryBlocks(const VisionAttnArgs& a, int64_t q0, int64_t q1)
      : i0(q0), i1(q1), per_head((q1 - q0 + kRows - 1) / kRows), total(a.heads * per_head) {}
  int64_t head(int64_t b) const { return b / per_head; }
  int64_t first(int64_t b) const { return i0 + (b % per_head) * kRows; }
};

// Blocks [b0, b1) of `qb`.
[[gnu::always_inline]] inline void blocks(const VisionAttnArgs& a, const QueryBlocks& qb, const float* kt, int64_t b0,
                                          int64_t b1, float* s) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t h = qb.head(b), i0 = qb.first(b);
    if (i0 + kRows <= qb.i1) {
      block<kRows>(a, kt, h, i0, s);
    } else {
      for (int64_t i = i0; i < qb.i1; ++i) block<1>(a, kt, h, i, s);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SLUICE_AVX2 [[gnu::target("avx2,fma")]]
#define SLUICE_AVX512 [[gnu::target("avx512f,avx2,fma")]]

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
    const __m256 e = kernels::avx2::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m8));
    _mm256_storeu_ps(s + j, e);
    vs = _mm256_add_ps(vs, e);
  }
  float sum = hsum8(vs);
  for (int64_t t = j; t < n; ++t) sum += (s[t] = kernels::exp_ref(s[t] - mx));
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
  for (int64_t t = j; t < n; ++t) s[t] *= 1.0f / sum;
}

// softmax_avx2's bits, 16 lanes at a time: the same maximum, the same exp per lane (exp16 is
// exp8's operations) and the same sum, its 8-lane partial sums taking the two halves of each 16
// in turn as the 8-lane loop takes consecutive 8s.
SLUICE_AVX512 void softmax_avx512(float* s, int64_t n) {
  __m512 vm = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(s + j));
  float mx = _mm512_reduce_max_ps(vm);
  for (int64_t t = j; t < n; ++t) mx = std::max(mx, s[t]);
  const __m512 m16 = _mm512_set1_ps(mx);
  __m256 vs = _mm256_setzero_ps();
  for (j = 0; j + 16 <= n; j += 16) {
    const __m512 e = kernels::avx512::exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), m16));
    _mm512_storeu_ps(s + j, e);
    vs = _mm256_add_ps(vs, _mm512_castps512_ps256(e));
    vs = _mm256_add_ps(vs, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
  if (j + 8 <= n) {
    const __m256 e = kernels::avx2::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm512_castps512_ps256(m16)));
    _mm256_storeu_ps(s + j, e);
    vs = _mm256_add_ps(vs, e);
    j += 8;
  }
  float sum = hsum8(vs);
  for (int64_t t = j; t < n; ++t) sum += (s[t] = kernels::exp_ref(s[t] - mx));
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (j = 0; j + 16 <= n; j += 16) _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inv));
  for (int64_t t = j; t < n; ++t) s[t] *= 1.0f / sum;
}

// The AVX2 layout: per head, kᵀ in tiles of 16 keys ([n16/16][hd][16], keys past n zero) and v
// in tiles of 16 columns ([hd/16][n][16]), so each tile streams contiguously.
struct Packed {
  const float* kp;  // [H][n16/16][hd][16]
  const float* vp;  // [H][hd/16][n][16]
  int64_t n16;
};

// y[r][c] = Σ_d x[r][d]·t[c][d] for R rows and `cols` columns (a multiple of 16), t packed in
// tiles of 16 columns ([cols/16][depth][16]): 2R accumulators, two loads and R broadcasts per d.
// q·kᵀ is (q, kᵀ tiles, n16 keys, head_dim); p·v is (p, v tiles, head_dim, n keys).
template <int R>
SLUICE_AVX2 void tiles_avx2(const float* const* x, const float* t, int64_t cols, int64_t depth, float* const* y) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const float* tc = t + c0 * depth;
    __m256 a[R][2];
    for (auto& r : a) r[0] = r[1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < depth; ++d) {
      const __m256 t0 = _mm256_loadu_ps(tc + d * 16), t1 = _mm256_loadu_ps(tc + d * 16 + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 xd = _mm256_broadcast_ss(x[r] + d);
        a[r][0] = _mm256_fmadd_ps(xd, t0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(xd, t1, a[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(y[r] + c0, a[r][0]), _mm256_storeu_ps(y[r] + c0 + 8, a[r][1]);
  }
}

template <int R>
SLUICE_AVX2 void block_avx2(const VisionAttnArgs& a, const Packed& pk, int64_t h, int64_t i0, float* s) {
  const int64_t n = a.n, hd = a.head_dim;
  const Rows<R> x(a, h, i0, s, pk.n16);
  tiles_avx2<R>(x.q, pk.kp + h * hd * pk.n16, pk.n16, hd, x.s);
  for (int r = 0; r < R; ++r) softmax_avx2(x.s[r], n);
  tiles_avx2<R>(x.s, pk.vp + h * hd * n, hd, n, x.o);
}

using TileFn = void (*)(const float* const* x, const float* t, int64_t cols, int64_t depth, float* const* y);

// nb full blocks of kRows queries from i0 of head h (a panel): scores a chunk of kKeys keys
// at a time for all its blocks (the chunk of kᵀ stays in L2 meanwhile), the softmax of every
// row, then p·v `vcols` columns (16 or 64) of v at a time for all its blocks. `s` holds nb·kRows
// rows. Inlined into each ISA's panel, with that ISA's tile and softmax functions.
template <TileFn Tiles, void (*Softmax)(float*, int64_t)>
[[gnu::always_inline]] inline void panel_body(const VisionAttnArgs& a, const Packed& pk, int64_t h, int64_t i0,
                                              int64_t nb, float* s, int64_t vcols) {
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
      Tiles(q, kp + j0 * hd, std::min(kKeys, n16 - j0), hd, srow);
    }
  }
  for (int64_t r = 0; r < nb * kRows; ++r) Softmax(s + r * n16, n);
  for (int64_t e0 = 0; e0 < hd; e0 += vcols) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < kRows; ++r) {
        srow[r] = s + (b * kRows + r) * n16;
        o[r] = a.out + (i0 + b * kRows + r) * w + h * hd + e0;
      }
      Tiles(srow, vp + e0 * n, std::min(vcols, hd - e0), n, o);
    }
  }
}

SLUICE_AVX2 void panel_avx2(const VisionAttnArgs& a, const Packed& pk, int64_t h, int64_t i0, int64_t nb, float* s) {
  panel_body<tiles_avx2<kRows>, softmax_avx2>(a, pk, h, i0, nb, s, 16);
}

// y[r][c] = Σ_d x[r][d]·t[c][d] as tiles_avx2 computes it (one FMA chain per output, d in
// order: the same bits), NT tiles of 16 columns a pass in 512-bit registers: R·NT accumulators,
// NT loads and R broadcasts per d. Zen 5 retires two 512-bit FMAs a cycle: the 256-bit tiles
// ran at half the core's rate (docs/perf-log.md).
template <int R, int NT>
SLUICE_AVX512 inline void tiles_zmm(const float* const* x, const float* tc, int64_t depth, float* const* y,
                                    int64_t c0) {
  __m512 acc[R][NT];
  for (auto& r : acc)
    for (auto& v : r) v = _mm512_setzero_ps();
  for (int64_t d = 0; d < depth; ++d) {
    __m512 t[NT];
    for (int j = 0; j < NT; ++j) t[j] = _mm512_loadu_ps(tc + j * depth * 16 + d * 16);
    for (int r = 0; r < R; ++r) {
      const __m512 xd = _mm512_set1_ps(x[r][d]);
      for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_fmadd_ps(xd, t[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NT; ++j) _mm512_storeu_ps(y[r] + c0 + 16 * j, acc[r][j]);
}

// tiles_avx2's contract (cols a multiple of 16), four tiles a pass, then single tiles.
template <int R>
SLUICE_AVX512 void tiles_avx512(const float* const* x, const float* t, int64_t cols, int64_t depth, float* const* y) {
  int64_t c0 = 0;
  for (; c0 + 64 <= cols; c0 += 64) tiles_zmm<R, 4>(x, t + c0 * depth, depth, y, c0);
  for (; c0 < cols; c0 += 16) tiles_zmm<R, 1>(x, t + c0 * depth, depth, y, c0);
}

SLUICE_AVX512 void panel_avx512(const VisionAttnArgs& a, const Packed& pk, int64_t h, int64_t i0, int64_t nb,
                                float* s) {
  panel_body<tiles_avx512<kRows>, softmax_avx512>(a, pk, h, i0, nb, s, 64);
}

// Blocks [b0, b1) of `qb`, up to kPanel consecutive full blocks of one head at a time (by
// `panel`: panel_avx2 or panel_avx512); the head's last, short block query by query.
SLUICE_AVX2 void blocks_avx2(const VisionAttnArgs& a, const QueryBlocks& qb, const Packed& pk, int64_t b0, int64_t b1,
                             float* s, decltype(&panel_avx2) panel) {
  const int64_t full = (qb.i1 - qb.i0) / kRows;
  for (int64_t b = b0; b < b1;) {
    const int64_t h = qb.head(b), bi = b % qb.per_head;
    if (bi < full) {
      const int64_t nb = std::min({kPanel, full - bi, b1 - b});
      panel(a, pk, h, qb.first(b), nb, s);
      b += nb;
    } else {
      for (int64_t i = qb.first(b); i < qb.i1; ++i) block_avx2<1>(a, pk, h, i, s);
      ++b;
    }
  }
}

// The packed k and v inside `buf` (pack_avx2's layout).
Packed packed_view(const VisionAttnArgs& a, const std::vector<float>& buf) {
  const int64_t n16 = (a.n + 15) / 16 * 16;
  return {buf.data(), buf.data() + a.heads * a.head_dim * n16, n16};
}

// Packs k and v into `buf`, split over the threads by head.
void pack_avx2(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& buf) {
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
}

#undef SLUICE_AVX2
#undef SLUICE_AVX512
#endif

// The path `want` asks for, or the best this CPU runs (kAuto), for head_dim `hd`: the SIMD
// paths need a multiple of 16.
VisionAttnPath pick(VisionAttnPath want, int64_t hd) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  if (hd % 16 != 0) return VisionAttnPath::kPortable;
  if (want == VisionAttnPath::kAuto) return avx512 ? VisionAttnPath::kAvx512 : avx2 ? VisionAttnPath::kAvx2 : want;
  if ((want == VisionAttnPath::kAvx512 && avx512) || (want == VisionAttnPath::kAvx2 && avx2)) return want;
#else
  (void)want, (void)hd;
#endif
  return VisionAttnPath::kPortable;
}

}  // namespace

bool vision_attention_runs(VisionAttnPath path, int64_t head_dim) { return pick(path, head_dim) == path; }

void vision_attention_pack(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& kt, VisionAttnPath path) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (pick(path, a.head_dim) != VisionAttnPath::kPortable) {
    pack_avx2(a, pool, kt);
    return;
  }
#endif
  const int64_t n = a.n, w = a.heads * a.head_dim;
  kt.resize(static_cast<size_t>(w * n));
  pool.run([&](int ith, int nth) {  // kt[h][e][j] = k[j][h·hd + e], split by key rows
    const int64_t j0 = n * ith / nth, j1 = n * (ith + 1) / nth;
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t c = 0; c < w; ++c) kt[c * n + j] = a.k[j * w + c];
  });
}

void vision_attention_rows(const VisionAttnArgs& a, ThreadPool& pool, const std::vector<float>& kt, int64_t i0,
                           int64_t i1, VisionAttnPath path) {
  if (i0 < 0 || i1 > a.n || i0 > i1 || i0 % kRows != 0 || (i1 % kRows != 0 && i1 != a.n))
    fail("vision_attention_rows: query range [%lld, %lld) of %lld is not aligned to blocks of %d", (long long)i0,
         (long long)i1, (long long)a.n, kRows);
  const QueryBlocks qb(a, i0, i1);
#if defined(__x86_64__) && defined(__GNUC__)
  path = pick(path, a.head_dim);
  if (path != VisionAttnPath::kPortable) {
    const Packed pk = packed_view(a, kt);
    const auto panel = path == VisionAttnPath::kAvx512 ? panel_avx512 : panel_avx2;
    pool.run([&](int ith, int nth) {
      std::vector<float> s(static_cast<size_t>(kPanel * kRows * pk.n16));
      blocks_avx2(a, qb, pk, qb.total * ith / nth, qb.total * (ith + 1) / nth, s.data(), panel);
    });
    return;
  }
#endif
  pool.run([&](int ith, int nth) {
    std::vector<float> s(static_cast<size_t>(kRows * a.n));
    blocks(a, qb, kt.data(), qb.total * ith / nth, qb.total * (ith + 1) / nth, s.data());
  });
}

void vision_attention(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& kt, VisionAttnPath path) {
  vision_attention_pack(a, pool, kt, path);
  vision_attention_rows(a, pool, kt, 0, a.n, path);
}

}  // namespace sluice::models::gemma4
