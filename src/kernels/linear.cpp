#include "kernels/linear.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/act.h"
#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/gemm.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {

namespace {
constexpr int kGenericSlot = 3;   // ActScratch slot of the generic path's activation rows
}

uint8_t* ActScratch::get(int fmt, uint64_t bytes) {
  AlignedBytes& b = buf_[fmt];
  if (b.size < bytes) b = AlignedBytes::alloc(bytes);
  return b.data();
}

Linear Linear::build(std::span<const Mat> parts, ThreadPool& pool, std::string name, bool wide_q6_k, ByteArena* arena) {
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
      p.packed = pack_alloc(first.type, p.rows, l.cols_,
                            wide_q6_k && first.type == DType::Q6_K ? PackedFormat::kQ6_K8 : PackedFormat::kNone, arena);
      PackedMatrix& pm = p.packed;
      pool.run([&](int ith, int nth) {
        int64_t g0, g1;
        split_range(pm.groups, ith, nth, &g0, &g1);
        pack_groups(pm, src.data(), static_cast<int>(src.size()), g0, g1);
      });
      p.bytes = pm.group_bytes * static_cast<uint64_t>(pm.groups);
      l.file_bytes_ += pm.file_bytes;
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

void Linear::run(ThreadPool& pool, const float* x, int64_t m, float* y, ActScratch& scratch, const CpuKernels* isa) const {
  if (m <= 0 || parts_.empty()) return;
  const CpuKernels& k = isa ? *isa : cpu_kernels();
  // The activation rows each format needs; f32 is x itself.
  ActRows acts[3];
  acts[static_cast<int>(ActFormat::kF32)] =
      ActRows{ActFormat::kF32, reinterpret_cast<const uint8_t*>(x), 4 * static_cast<uint64_t>(cols_), cols_};
  bool quantize[3] = {false, false, false};
  // Fewer rows than threads (decode): every thread quantizes all rows into its own copy — no
  // barrier, nobody idle while one thread quantizes, and its copy stays in its own cache.
  // Otherwise the rows are split over the threads and shared after a barrier.
  const int nth_all = pool.size();
  const bool private_copies = m < nth_all;
  uint64_t copy_bytes[4] = {0, 0, 0, 0};
  const Part* generic = nullptr;
  for (const Part& p : parts_) {
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
    acts[fi] = ActRows{f, scratch.get(fi, copy_bytes[fi] * (private_copies ? nth_all : 1)), stride, cols_};
  }
  uint8_t* generic_act = nullptr;
  uint64_t generic_stride = 0;
  if (generic) {
    generic_stride = (act_row_bytes(generic->raw.type, cols_) + 63) / 64 * 64;
    copy_bytes[kGenericSlot] = generic_stride * static_cast<uint64_t>(m);
    generic_act = scratch.get(kGenericSlot, copy_bytes[kGenericSlot] * (private_copies ? nth_all : 1));
  }
  const bool any_quant = quantize[1] || quantize[2] || generic;

  WorkSplit& split = scratch.split();
  split.reset(units_, nth_all);
  pool.run([&](int ith, int nth) {
    ActRows my[3] = {acts[0], acts[1], acts[2]};
    uint8_t* my_generic = generic_act;
    if (private_copies) {
      for (int fi = 1; fi < 3; ++fi) my[fi].base += copy_bytes[fi] * static_cast<uint64_t>(ith);
      if (generic) my_generic += copy_bytes[kGenericSlot] * static_cast<uint64_t>(ith);
    }
    if (any_quant) {
      int64_t r0 = 0, r1 = m;
      if (!private_copies) split_range(m, ith, nth, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x + r * cols_;
        for (int fi = 1; fi < 3; ++fi)
          if (quantize[fi])
            cpu_quantize_act(k, static_cast<ActFormat>(fi), xr, cols_, const_cast<uint8_t*>(my[fi].base) + r * my[fi].stride);
        if (generic) quantize_act_row(generic->raw.type, xr, my_generic + r * generic_stride, cols_);
      }
      if (!private_copies) pool.barrier();
    }
    int64_t b, e;
    while (split.next(ith, &b, &e)) {
      for (const Part& p : parts_) {
        const int64_t u0 = std::max(b, p.unit0) - p.unit0, u1 = std::min(e, p.unit0 + p.units) - p.unit0;
        if (u0 >= u1) continue;
        if (p.packed.format != PackedFormat::kNone) {
          GemmArgs a;
          a.format = p.packed.format;
          a.w = p.packed.data.data();
          a.group_bytes = p.packed.group_bytes;
          a.k = cols_;
          a.rows = p.rows;
          a.a = my[static_cast<int>(packed_act_format(p.packed.format))];
          a.m = m;
          a.y = y + p.row0;
          a.ldy = rows_;
          cpu_gemm(k, p.packed.format)(a, u0, u1);
        } else {
          for (int64_t r = u0; r < u1; ++r)
            for (int64_t i = 0; i < m; ++i)
              y[i * rows_ + p.row0 + r] = cpu_dot(k, p.raw.type, p.raw.row(r), my_generic + i * generic_stride, cols_);
        }
      }
    }
  });
}

}  // namespace sluice::kernels
