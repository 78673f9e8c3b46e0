// Runtime ISA dispatch of the quantized dot kernels (docs/conventions.md §2), at function granularity.
// Each ISA set lives in its own translation units (src/kernels/cpu/x86_*/, cpu/arm64/), compiled
// with that ISA's -m flags; this header and the selector (cpu_kernels.cpp) are built WITHOUT ISA flags,
// so choosing a set never executes an instruction the CPU lacks.
//
// Every kernel is a pure function of its two rows (batch and thread invariant). It need not be
// bit-identical to dot_ref: the int32 block sums are exact, only the f32 accumulation order of
// the per-block products differs (tests: ~1e-5 of Σ|w·a|).
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/rowops.h"

namespace sluice::kernels {

using DotKernel = float (*)(const void* w, const void* act, int64_t n);

struct CpuKernels {
  const char* isa;  // "scalar", "avx2", "avx512", "avx512gfni"; ARM64: "neon", "dotprod", "i8mm"
  // Dot of one weight row (raw blocks of the type with this id) with one activation row made by
  // quantize_act_row (formats as dot_ref). nullptr = use dot_ref for that type.
  DotKernel dot[kDTypeIdCount];
  // Packed matmul per packed format (gemm.h); nullptr = gemm_ref.
  GemmKernel gemm[kPackedFormatCount];
  // Activation quantizers per act format (act.h), byte-identical to quantize_act_ref;
  // nullptr = the reference.
  void (*quantize_act[3])(const float* x, int64_t k, uint8_t* out);
  // Row ops (rowops.h) and paged attention (attention.h); nullptr entries = the reference.
  RowOps ops;
  AttnKernel attention;
  AttnChunksKernel attention_chunks;
  AttnMergeKernel attention_merge;
  // A plain streaming read of `bytes` (a multiple of 256, 64-aligned) returning a checksum:
  // the bandwidth probe of `sluice bench`. nullptr = the scalar loop.
  uint64_t (*stream_sum)(const uint8_t* p, uint64_t bytes);
};

// The best set this CPU can run, chosen once. The environment variable SLUICE_ISA (x86:
// scalar|avx2|avx512|avx512gfni, ARM64: scalar|neon|dotprod|i8mm) forces one (sluice::Error if it is unknown, not
// compiled in, or this CPU cannot run it).
const CpuKernels& cpu_kernels();

// Every compiled set this CPU can run, scalar first (tests, benchmarks).
std::vector<const CpuKernels*> runnable_cpu_kernels();

// The row ops of set k with the references filling its gaps; `cpu_ops()` is the chosen set's.
RowOps merged_ops(const CpuKernels& k);
const RowOps& cpu_ops();
AttnKernel cpu_attention(const CpuKernels& k);
AttnChunksKernel cpu_attention_chunks(const CpuKernels& k);
AttnMergeKernel cpu_attention_merge(const CpuKernels& k);

uint64_t cpu_stream_sum(const CpuKernels& k, const uint8_t* p, uint64_t bytes);

// The packed kernels of set k, with the scalar references filling its gaps.
GemmKernel cpu_gemm(const CpuKernels& k, PackedFormat f);
void cpu_quantize_act(const CpuKernels& k, ActFormat f, const float* x, int64_t n, uint8_t* out);

// The dot for one row pair through set k: k.dot[type] when provided, else dot_ref.
float cpu_dot(const CpuKernels& k, DType weight_type, const void* w_row, const void* act_row, int64_t n);

}  // namespace sluice::kernels
