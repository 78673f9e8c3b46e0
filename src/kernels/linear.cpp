#include "kernels/linear.h"

#include <algorithm>

#include "base/error.h"
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

Linear Linear::build(std::span<const Mat> parts, ThreadPool& pool, std::string name, bool wide_q6_k) {
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
                            wide_q6_k && first.type == DType::Q6_K ? PackedFormat::kQ6_K8 : PackedFormat::kNone);
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
    acts[fi] = ActRows{f, scratch.get(fi, stride * static_cast<uint64_t>(m)), stride, cols_};
  }
  uint8_t* generic_act = nullptr;
  uint64_t generic_stride = 0;
  if (generic) {
    generic_stride = (act_row_bytes(generic->raw.type, cols_) + 63) / 64 * 64;
    generic_act = scratch.get(kGenericSlot, generic_stride * static_cast<uint64_t>(m));
  }
  const bool any_quant = quantize[1] || quantize[2] || generic;

  pool.run([&](int ith, int nth) {
    if (any_quant) {
      int64_t r0, r1;
      split_range(m, ith, nth, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x + r * cols_;
        for (int fi = 1; fi < 3; ++fi)
          if (quantize[fi])
            cpu_quantize_act(k, static_cast<ActFormat>(fi), xr, cols_, const_cast<uint8_t*>(acts[fi].base) + r * acts[fi].stride);
        if (generic) quantize_act_row(generic->raw.type, xr, generic_act + r * generic_stride, cols_);
      }
      pool.barrier();
    }
    // This thread's share of the weight bytes: [b0, b1) of all parts laid end to end.
    const uint64_t b0 = stream_bytes_ * static_cast<uint64_t>(ith) / static_cast<uint64_t>(nth);
    const uint64_t b1 = stream_bytes_ * static_cast<uint64_t>(ith + 1) / static_cast<uint64_t>(nth);
    uint64_t start = 0;
    for (const Part& p : parts_) {
      const bool packed = p.packed.format != PackedFormat::kNone;
      const int64_t units = packed ? p.packed.groups : p.rows;
      const uint64_t unit_bytes = p.bytes / static_cast<uint64_t>(units);
      // Unit boundary nearest to a byte boundary (the same function for both sides of it, so
      // the threads' ranges tile the part exactly).
      auto unit_at = [&](uint64_t b) -> int64_t {
        if (b <= start) return 0;
        const uint64_t u = (b - start + unit_bytes / 2) / unit_bytes;
        return static_cast<int64_t>(std::min<uint64_t>(u, static_cast<uint64_t>(units)));
      };
      const int64_t u0 = unit_at(b0), u1 = unit_at(b1);
      start += p.bytes;
      if (u0 >= u1) continue;
      if (packed) {
        GemmArgs a;
        a.format = p.packed.format;
        a.w = p.packed.data.data();
        a.group_bytes = p.packed.group_bytes;
        a.k = cols_;
        a.rows = p.rows;
        a.a = acts[static_cast<int>(packed_act_format(p.packed.format))];
        a.m = m;
        a.y = y + p.row0;
        a.ldy = rows_;
        cpu_gemm(k, p.packed.format)(a, u0, u1);
      } else {
        for (int64_t r = u0; r < u1; ++r)
          for (int64_t i = 0; i < m; ++i)
            y[i * rows_ + p.row0 + r] = cpu_dot(k, p.raw.type, p.raw.row(r), generic_act + i * generic_stride, cols_);
      }
    }
  });
}

}  // namespace sluice::kernels
