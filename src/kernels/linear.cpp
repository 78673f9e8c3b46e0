#include "kernels/linear.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "base/error.h"
#include "kernels/act.h"
#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/gemm.h"
#include "kernels/tuning.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {

namespace {
constexpr int64_t kEpilogueUnits = 16;  // row groups per epilogue span (run with `post`)

// A call whose f32 activation rows exceed kRowSplitBytes is split by activation rows: blocks
// of at most kRowBlockBytes of rows (they stay in L2 while every row group of the matrix passes
// them) instead of row groups that each stream all the rows from L3 or DRAM. A prefill of the
// vision tower (2520 rows × 768-3072 floats: 8-31 MB) was held by that stream to a third of
// the FMA peak (bench/kernels_bench Linear/f16/vit_*; docs/perf-log.md). Each output is still
// computed by one kernel call over its whole row, so results do not change.
constexpr uint64_t kRowSplitBytes = uint64_t{1} << 20;
constexpr uint64_t kRowBlockBytes = uint64_t{384} << 10;

// Source bytes repacked between two releases (with a ReleasePages): the load holds at most this
// much of a matrix twice, its file pages and its repacked bytes, at once.
constexpr uint64_t kReleaseSlabBytes = uint64_t{32} << 20;

// Hands `release` the bytes of rows [r0, r1) of the stacked sources, adjacent runs merged (the
// interleaved gate|up sources of build_glu are two runs per slab, not one per 16 rows).
void release_rows(const std::vector<PackSource>& src, int64_t r0, int64_t r1, const ReleasePages& release) {
  std::vector<std::pair<const uint8_t*, const uint8_t*>> runs;
  int64_t base = 0;
  for (const PackSource& s : src) {
    const int64_t a = std::max(r0, base), b = std::min(r1, base + s.rows);
    if (a < b)
      runs.emplace_back(s.data + static_cast<uint64_t>(a - base) * s.row_bytes,
                        s.data + static_cast<uint64_t>(b - base) * s.row_bytes);
    base += s.rows;
  }
  std::sort(runs.begin(), runs.end());
  for (size_t i = 0; i < runs.size();) {
    const uint8_t *b = runs[i].first, *e = runs[i].second;
    for (++i; i < runs.size() && runs[i].first <= e; ++i) e = std::max(e, runs[i].second);
    release(b, static_cast<uint64_t>(e - b));
  }
}

// A packed matrix of `rows` rows from the stacked sources, repacked by all threads. With
// `release`, slab by slab, each slab's source bytes released once it is packed.
PackedMatrix pack_all(ThreadPool& pool, DType t, int64_t rows, int64_t cols, PackedFormat f,
                      const std::vector<PackSource>& src, ByteArena* arena, const ReleasePages& release) {
  PackedMatrix pm = pack_alloc(t, rows, cols, f, arena);
  const uint64_t group_src_bytes = src.empty() ? 1 : std::max<uint64_t>(1, src[0].row_bytes * kGroupRows);
  const int64_t slab = release ? std::max<int64_t>(1, static_cast<int64_t>(kReleaseSlabBytes / group_src_bytes))
                               : pm.groups;
  for (int64_t s0 = 0; s0 < pm.groups; s0 += slab) {
    const int64_t s1 = std::min(pm.groups, s0 + slab);
    pool.run([&](int ith, int nth) {
      int64_t g0, g1;
      split_range(s1 - s0, ith, nth, &g0, &g1);
      pack_groups(pm, src.data(), static_cast<int>(src.size()), s0 + g0, s0 + g1);
    });
    if (release) release_rows(src, s0 * kGroupRows, std::min(rows, s1 * kGroupRows), release);
  }
  return pm;
}

// Calls fn(v0, v1) over the units [b, e) of a decode run in the tuning's order: `streams`
// contiguous parts read in turn, `interleave` units of a part at a time. One call for the whole
// run with one stream. Only the order changes: every unit is computed once, the same way.
template <class Fn>
void for_each_stream_run(int64_t b, int64_t e, const Tuning& t, Fn&& fn) {
  const int64_t n = e - b;
  const int64_t s = std::min<int64_t>(t.streams, n);
  if (s <= 1) {
    if (n > 0) fn(b, e);
    return;
  }
  int64_t pos[kMaxStreams], end[kMaxStreams];
  for (int64_t j = 0; j < s; ++j) {
    pos[j] = b + n * j / s;
    end[j] = b + n * (j + 1) / s;
  }
  for (bool any = true; any;) {
    any = false;
    for (int64_t j = 0; j < s; ++j) {
      if (pos[j] >= end[j]) continue;
      const int64_t v1 = std::min(end[j], pos[j] + t.interleave);
      fn(pos[j], v1);
      pos[j] = v1;
      any = true;
    }
  }
}

}  // namespace

ActSlot act_slot(ActFormat f) {
  if (f == ActFormat::kF32) fail("internal: f32 activations have no scratch slot");
  return f == ActFormat::kA8_32 ? ActSlot::kA8_32 : ActSlot::kA8_256;
}

uint8_t* ActScratch::get(ActSlot slot, uint64_t bytes) {
  AlignedBytes& b = buf_[static_cast<int>(slot)];
  if (b.size < bytes) b = AlignedBytes::alloc(bytes);
  return b.data();
}

Linear Linear::build(std::span<const Mat> parts, ThreadPool& pool, std::string name, bool wide_q6_k, ByteArena* arena,
                     const ReleasePages& release) {
  Linear l;
  l.name_ = std::move(name);
  if (parts.empty()) return l;
  l.cols_ = parts[0].cols;
  DType generic_type = DType::F32;
  bool has_generic = false;
  for (size_t i = 0; i < parts.size();) {
    const Mat& first = parts[i];
    if (first.cols != l.cols_)
      fail("cannot fuse '%s' ([%lld, ...]) with '%s' ([%lld, ...]): different input widths", first.name.c_str(),
           static_cast<long long>(first.cols), parts[0].name.c_str(), static_cast<long long>(l.cols_));
    Part p;
    p.row0 = l.rows_;
    const PackedFormat f = packed_format(first.type);
    const bool packable = f != PackedFormat::kNone && first.cols % packed_block_elems(f) == 0;
    if (!packable) {
      if (has_generic && vec_dot_type(first.type) != vec_dot_type(generic_type))
        fail("cannot fuse '%s' (%s) with another part of a different activation format", first.name.c_str(),
             std::string(dtype_name(first.type)).c_str());
      has_generic = true;
      generic_type = first.type;
      p.raw = first;
      p.rows = first.rows;
      p.bytes = first.row_bytes * static_cast<uint64_t>(first.rows);
      l.file_bytes_ += p.bytes;
      ++i;
    } else {
      // Adjacent parts of the same type become one packed matrix.
      std::vector<PackSource> src;
      size_t j = i;
      for (; j < parts.size() && parts[j].type == first.type && parts[j].cols == first.cols; ++j) {
        src.push_back({parts[j].data, parts[j].row_bytes, parts[j].rows});
        p.rows += parts[j].rows;
      }
      p.packed = pack_all(pool, first.type, p.rows, l.cols_,
                          wide_q6_k && first.type == DType::Q6_K ? PackedFormat::kQ6_K8 : PackedFormat::kNone, src,
                          arena, release);
      p.bytes = p.packed.group_bytes * static_cast<uint64_t>(p.packed.groups);
      l.file_bytes_ += p.packed.file_bytes;
      i = j;
    }
    l.rows_ += p.rows;
    l.stream_bytes_ += p.bytes;
    l.parts_.push_back(std::move(p));
  }
  for (Part& p : l.parts_) {
    p.unit0 = l.units_;
    p.units = p.packed.format != PackedFormat::kNone ? p.packed.groups : p.rows;
    l.units_ += p.units;
  }
  return l;
}

const PackedMatrix* Linear::packed_whole() const {
  if (glu_ || parts_.size() != 1 || parts_[0].packed.format == PackedFormat::kNone) return nullptr;
  return &parts_[0].packed;
}

std::string Linear::describe() const {
  std::string s;
  for (const Part& p : parts_) {
    if (!s.empty()) s += " + ";
    s += p.packed.format != PackedFormat::kNone ? packed_format_name(p.packed.format)
                                                : std::string(dtype_name(p.raw.type)) + " (generic)";
    s += strfmt(" [%lld]", static_cast<long long>(p.rows));
  }
  return strfmt("%s: %lld -> %lld, ", name_.c_str(), static_cast<long long>(cols_), static_cast<long long>(rows_)) + s;
}

// The activation rows of one call, per thread (private copies for decode, see drive()).
struct Linear::Acts {
  ActRows rows[3];
  uint8_t* generic = nullptr;
  uint64_t generic_stride = 0;
};

template <class Body>
void Linear::drive(ThreadPool& pool, const float* x, int64_t m, ActScratch& scratch, const CpuKernels& k, int64_t units,
                   const ActRows* pre, Body&& body) const {
  // The activation rows each format needs; f32 is x itself.
  Acts acts;
  acts.rows[static_cast<int>(ActFormat::kF32)] = ActRows{ActFormat::kF32, reinterpret_cast<const uint8_t*>(x),
                                                         4 * static_cast<uint64_t>(cols_), cols_};
  // Rows quantized by the caller (quantized_input()'s format): shared by every thread as given,
  // so nothing below is quantized or copied.
  if (pre) acts.rows[static_cast<int>(pre->format)] = *pre;
  bool quantize[3] = {false, false, false};
  // Fewer rows than threads (decode): every thread quantizes all rows into its own copy — no
  // barrier, nobody idle while one thread quantizes, and its copy stays in its own cache.
  // Otherwise the rows are split over the threads and shared after a barrier.
  const int nth_all = pool.size();
  const bool private_copies = m < nth_all;
  uint64_t copy_bytes[3] = {0, 0, 0};  // per ActFormat; the generic rows' in generic_bytes
  uint64_t generic_bytes = 0;
  const Part* generic = nullptr;
  for (const Part& p : pre ? std::span<const Part>() : std::span<const Part>(parts_)) {
    if (p.packed.format == PackedFormat::kNone) {
      generic = &p;
      continue;
    }
    const ActFormat f = packed_act_format(p.packed.format);
    const int fi = static_cast<int>(f);
    if (f == ActFormat::kF32 || quantize[fi]) continue;
    quantize[fi] = true;
    const uint64_t stride = act_row_stride(f, cols_);
    copy_bytes[fi] = stride * static_cast<uint64_t>(m);
    uint8_t* rows = scratch.get(act_slot(f), copy_bytes[fi] * (private_copies ? nth_all : 1));
    acts.rows[fi] = ActRows{f, rows, stride, cols_};
  }
  if (generic) {
    acts.generic_stride = (act_row_bytes(generic->raw.type, cols_) + 63) / 64 * 64;
    generic_bytes = acts.generic_stride * static_cast<uint64_t>(m);
    acts.generic = scratch.get(ActSlot::kGeneric, generic_bytes * (private_copies ? nth_all : 1));
  }
  const bool any_quant = quantize[1] || quantize[2] || generic;

  WorkSplit& split = scratch.split();
  split.set_run_div(tuning().split_div);
  split.reset(units, nth_all);
  pool.run([&](int ith, int nth) {
    Acts my = acts;
    if (private_copies) {
      for (int fi = 1; fi < 3; ++fi) my.rows[fi].base += copy_bytes[fi] * static_cast<uint64_t>(ith);
      if (generic) my.generic += generic_bytes * static_cast<uint64_t>(ith);
    }
    if (any_quant) {
      int64_t r0 = 0, r1 = m;
      if (!private_copies) split_range(m, ith, nth, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x + r * cols_;
        for (int fi = 1; fi < 3; ++fi)
          if (quantize[fi])
            cpu_quantize_act(k, static_cast<ActFormat>(fi), xr, cols_,
                             const_cast<uint8_t*>(my.rows[fi].base) + r * my.rows[fi].stride);
        if (generic) quantize_act_row(generic->raw.type, xr, my.generic + r * my.generic_stride, cols_);
      }
      if (!private_copies) pool.barrier();
    }
    int64_t b, e;
    while (split.next(ith, &b, &e)) body(ith, my, b, e);
  });
}

// Output rows [u0, u1) (row groups, or rows for a generic part) of part p into y (ldy floats
// per activation row; y points at the part's first output row).
void Linear::compute(const CpuKernels& k, const Part& p, const Acts& my, int64_t m, int64_t u0, int64_t u1, float* y,
                     int64_t ldy, const Tuning& tu) const {
  if (p.packed.format != PackedFormat::kNone) {
    GemmArgs a;
    a.weight_ahead = tu.weight_ahead[static_cast<int>(p.packed.format)];
    a.act_ahead = tu.act_ahead;
    a.format = p.packed.format;
    a.w = p.packed.data.data();
    a.group_bytes = p.packed.group_bytes;
    a.k = cols_;
    a.rows = p.rows;
    a.a = my.rows[static_cast<int>(packed_act_format(p.packed.format))];
    a.m = m;
    a.y = y;
    a.ldy = ldy;
    cpu_gemm(k, p.packed.format)(a, u0, u1);
  } else {
    for (int64_t r = u0; r < u1; ++r)
      for (int64_t i = 0; i < m; ++i)
        y[i * ldy + r] = cpu_dot(k, p.raw.type, p.raw.row(r), my.generic + i * my.generic_stride, cols_);
  }
}

void Linear::run(ThreadPool& pool, const float* x, int64_t m, float* y, ActScratch& scratch, const CpuKernels* isa,
                 const Epilogue* post) const {
  run_impl(pool, x, nullptr, m, y, scratch, isa, post);
}

ActFormat Linear::quantized_input() const {
  if (glu_ || parts_.empty()) return ActFormat::kF32;
  ActFormat f = ActFormat::kF32;
  for (const Part& p : parts_) {
    if (p.packed.format == PackedFormat::kNone) return ActFormat::kF32;
    const ActFormat pf = packed_act_format(p.packed.format);
    if (pf == ActFormat::kF32 || (f != ActFormat::kF32 && pf != f)) return ActFormat::kF32;
    f = pf;
  }
  return f;
}

void Linear::run_quantized(ThreadPool& pool, const ActRows& a, int64_t m, float* y, ActScratch& scratch,
                           const CpuKernels* isa) const {
  const ActFormat f = quantized_input();
  if (f == ActFormat::kF32 || a.format != f || a.k != cols_)
    fail("%s: run_quantized needs rows of %lld elements in the one quantized format this matrix reads", name_.c_str(),
         static_cast<long long>(cols_));
  run_impl(pool, nullptr, &a, m, y, scratch, isa, nullptr);
}

void Linear::run_impl(ThreadPool& pool, const float* x, const ActRows* pre, int64_t m, float* y, ActScratch& scratch,
                      const CpuKernels* isa, const Epilogue* post) const {
  if (m <= 0 || parts_.empty()) return;
  if (glu_) fail("%s: a fused gate|up matrix runs through run_glu", name_.c_str());
  const CpuKernels& k = isa ? *isa : cpu_kernels();
  const Tuning tu = tuning();
  if (const int64_t rows = pre ? 0 : row_block(m, pool.size()); rows > 0) {
    drive(pool, x, m, scratch, k, (m + rows - 1) / rows, nullptr,
          [&](int, const Acts& my, int64_t b, int64_t e) { run_row_blocks(k, my, m, rows, b, e, y, post, tu); });
    return;
  }
  drive(pool, x, m, scratch, k, units_, pre, [&](int, const Acts& my, int64_t rb, int64_t re) {
    // Decode reads the run in the tuned stream order; several rows take it front to back.
    for_each_stream_run(rb, re, m == 1 ? tu : Tuning{},
                        [&](int64_t b, int64_t e) { run_units(k, my, m, b, e, y, post, tu); });
  });
}

// Units [b, e) of the call's numbering, over every part they cover.
void Linear::run_units(const CpuKernels& k, const Acts& my, int64_t m, int64_t b, int64_t e, float* y,
                       const Epilogue* post, const Tuning& tu) const {
  for (const Part& p : parts_) {
    const int64_t u0 = std::max(b, p.unit0) - p.unit0, u1 = std::min(e, p.unit0 + p.units) - p.unit0;
    // With an epilogue, spans of kEpilogueUnits units (256 outputs of a packed part per
    // activation row), each capped while its outputs are in L1; without, the run at once.
    const bool packed = p.packed.format != PackedFormat::kNone;
    const int64_t step = !post ? u1 - u0 : packed ? kEpilogueUnits : kEpilogueUnits * kGroupRows;
    for (int64_t v0 = u0; v0 < u1; v0 += step) {
      const int64_t v1 = std::min(u1, v0 + step);
      compute(k, p, my, m, v0, v1, y + p.row0, rows_, tu);
      if (!post) continue;
      const int64_t r0 = packed ? v0 * kGroupRows : v0, r1 = packed ? std::min(p.rows, v1 * kGroupRows) : v1;
      for (int64_t i = 0; i < m; ++i) post->fn(y + i * rows_ + p.row0 + r0, r1 - r0, post->arg);
    }
  }
}

// Only matrices whose every part is a packed float format (f32 activations: nothing to quantize,
// so a block's rows are x's rows as they are).
int64_t Linear::row_block(int64_t m, int nth) const {
  const uint64_t row_bytes = 4 * static_cast<uint64_t>(cols_);
  if (glu_ || row_bytes * static_cast<uint64_t>(m) <= kRowSplitBytes) return 0;
  for (const Part& p : parts_)
    if (p.packed.format == PackedFormat::kNone || packed_act_format(p.packed.format) != ActFormat::kF32) return 0;
  // The fewest blocks under kRowBlockBytes, rounded up to a multiple of the threads, of equal rows.
  const int64_t most = std::max<int64_t>(8, static_cast<int64_t>(kRowBlockBytes / row_bytes));
  int64_t blocks = (m + most - 1) / most;
  blocks = (blocks + nth - 1) / nth * nth;
  return (m + blocks - 1) / blocks;
}

// Blocks [b, e) of `rows` activation rows each (the last may be shorter): every part's outputs
// for the block's rows, then the epilogue over them.
void Linear::run_row_blocks(const CpuKernels& k, const Acts& my, int64_t m, int64_t rows, int64_t b, int64_t e,
                            float* y, const Epilogue* post, const Tuning& tu) const {
  for (int64_t blk = b; blk < e; ++blk) {
    const int64_t i0 = blk * rows, n = std::min(m, i0 + rows) - i0;
    Acts sub = my;
    ActRows& a = sub.rows[static_cast<int>(ActFormat::kF32)];
    a.base += a.stride * static_cast<uint64_t>(i0);
    float* yb = y + i0 * rows_;
    for (const Part& p : parts_) {
      compute(k, p, sub, n, 0, p.units, yb + p.row0, rows_, tu);
      if (post)
        for (int64_t i = 0; i < n; ++i) post->fn(yb + i * rows_ + p.row0, p.rows, post->arg);
    }
  }
}

Linear Linear::build_glu(const Mat& gate, const Mat& up, ThreadPool& pool, std::string name, ByteArena* arena,
                         const ReleasePages& release) {
  if (gate.type != up.type || gate.rows != up.rows || gate.cols != up.cols)
    fail("cannot fuse '%s' [%lld, %lld] (%s) with '%s' [%lld, %lld] (%s)", gate.name.c_str(),
         static_cast<long long>(gate.cols), static_cast<long long>(gate.rows),
         std::string(dtype_name(gate.type)).c_str(), up.name.c_str(), static_cast<long long>(up.cols),
         static_cast<long long>(up.rows), std::string(dtype_name(up.type)).c_str());
  const PackedFormat f = packed_format(gate.type);
  if (f == PackedFormat::kNone || gate.cols % packed_block_elems(f) != 0 || gate.rows % kGroupRows != 0) {
    // No packed layout to interleave: the plain [gate | up] matmul, GELU as a second pass.
    const Mat parts[2] = {gate, up};
    Linear l = build(parts, pool, std::move(name), false, arena, release);
    l.glu_ff_ = gate.rows;
    return l;
  }
  // Row groups alternate gate, up: group 2j = gate rows [16j, 16j+16), group 2j+1 = up's.
  std::vector<PackSource> src;
  for (int64_t r = 0; r < gate.rows; r += kGroupRows) {
    src.push_back({gate.data + static_cast<uint64_t>(r) * gate.row_bytes, gate.row_bytes, kGroupRows});
    src.push_back({up.data + static_cast<uint64_t>(r) * up.row_bytes, up.row_bytes, kGroupRows});
  }
  Linear l;
  l.name_ = std::move(name);
  l.cols_ = gate.cols;
  l.rows_ = 2 * gate.rows;
  l.glu_ = true;
  l.glu_ff_ = gate.rows;
  Part p;
  p.rows = l.rows_;
  p.packed = pack_all(pool, gate.type, p.rows, l.cols_, PackedFormat::kNone, src, arena, release);
  p.bytes = p.packed.group_bytes * static_cast<uint64_t>(p.packed.groups);
  p.units = p.packed.groups / 2;  // a unit is a (gate, up) pair of groups
  l.units_ = p.units;
  l.file_bytes_ = p.packed.file_bytes;
  l.stream_bytes_ = p.bytes;
  l.parts_.push_back(std::move(p));
  return l;
}

void Linear::run_glu(ThreadPool& pool, const float* x, int64_t m, float* act, ActScratch& scratch,
                     const CpuKernels* isa, const ActRows* q) const {
  if (m <= 0 || parts_.empty()) return;
  const CpuKernels& k = isa ? *isa : cpu_kernels();
  const auto gelu_mul = merged_ops(k).gelu_mul;
  const int64_t ff = glu_ff_;
  if (q && (q->format != ActFormat::kA8_32 || q->k != ff || ff % 32 != 0))
    fail("%s: run_glu quantizes its output only as kA8_32 rows of %lld elements", name_.c_str(),
         static_cast<long long>(ff));
  // Blocks [b0, b1) of act's row i into q's row i: quantized as a row of their own into `tmp`,
  // then each of its arrays (codes, scales, sums) to its place in q's row.
  auto quantize_blocks = [&](int64_t i, int64_t b0, int64_t b1, uint8_t* tmp) {
    const int64_t n = b1 - b0;
    cpu_quantize_act(k, ActFormat::kA8_32, act + i * ff + 32 * b0, 32 * n, tmp);
    const ActRows part{ActFormat::kA8_32, tmp, 0, 32 * n};
    std::memcpy(const_cast<int8_t*>(q->qs(i) + 32 * b0), part.qs(0), static_cast<size_t>(32 * n));
    std::memcpy(const_cast<float*>(q->d(i) + b0), part.d(0), static_cast<size_t>(4 * n));
    std::memcpy(const_cast<int32_t*>(q->sums(i) + b0), part.sums(0), static_cast<size_t>(4 * n));
  };
  const uint64_t qtmp_bytes = q ? act_row_stride(ActFormat::kA8_32, ff) : 0;
  if (!glu_) {
    // [gate | up] rows, then out = gelu(gate)·up per row, over the same threads.
    const uint64_t gu_bytes = 4 * static_cast<uint64_t>(m * rows_) + qtmp_bytes * pool.size();
    float* gu = reinterpret_cast<float*>(scratch.get(ActSlot::kGlu, gu_bytes));
    uint8_t* qtmp_all = reinterpret_cast<uint8_t*>(gu + m * rows_);
    run(pool, x, m, gu, scratch, isa);
    pool.run([&](int ith, int nth) {
      int64_t r0, r1;
      split_range(m, ith, nth, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) {
        gelu_mul(gu + r * rows_, gu + r * rows_ + ff, act + r * ff, ff);
        if (q) quantize_blocks(r, 0, ff / 32, qtmp_all + qtmp_bytes * static_cast<uint64_t>(ith));
      }
    });
    return;
  }
  // Each unit's 32 output rows land in a small per-thread buffer; the GELU product of its 16
  // gate and 16 up rows goes straight to `act` while they are in L1. Quantizing (q): the units
  // go in pairs (one block of 32), and each run's blocks are quantized at its end, still in L1.
  const uint64_t tmp_floats = 2 * kGroupRows * static_cast<uint64_t>(m);
  const uint64_t tmp_bytes = 4 * tmp_floats + qtmp_bytes;
  uint8_t* tmp_all = scratch.get(ActSlot::kGlu, tmp_bytes * static_cast<uint64_t>(pool.size()));
  const Part& p = parts_[0];
  const GemmKernel gemm = cpu_gemm(k, p.packed.format);
  const int64_t per = q ? 2 : 1;  // glu units per work unit
  const Tuning tu = tuning();
  drive(pool, x, m, scratch, k, units_ / per, nullptr, [&](int ith, const Acts& my, int64_t b, int64_t e) {
    float* tmp = reinterpret_cast<float*>(tmp_all + tmp_bytes * static_cast<uint64_t>(ith));
    GemmArgs a;  // the unit's two groups as a 32-row matrix of their own
    a.format = p.packed.format;
    a.group_bytes = p.packed.group_bytes;
    a.k = cols_;
    a.rows = 2 * kGroupRows;
    a.a = my.rows[static_cast<int>(packed_act_format(p.packed.format))];
    a.m = m;
    a.y = tmp;
    a.ldy = 2 * kGroupRows;
    a.weight_ahead = tu.weight_ahead[static_cast<int>(p.packed.format)];
    a.act_ahead = tu.act_ahead;
    for_each_stream_run(b * per, e * per, m == 1 ? tu : Tuning{}, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        a.w = p.packed.data.data() + static_cast<uint64_t>(2 * u) * p.packed.group_bytes;
        gemm(a, 0, 2);
        for (int64_t i = 0; i < m; ++i)
          gelu_mul(tmp + i * 2 * kGroupRows, tmp + i * 2 * kGroupRows + kGroupRows, act + i * ff + u * kGroupRows,
                   kGroupRows);
      }
    });
    if (q)
      for (int64_t i = 0; i < m; ++i) quantize_blocks(i, b, e, reinterpret_cast<uint8_t*>(tmp + tmp_floats));
  });
}

}  // namespace sluice::kernels
