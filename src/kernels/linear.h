// A linear layer of the model over load-time repacked weights: y[M × rows] = x[M × cols]·Wᵀ,
// where W is one file matrix or several with the same cols stacked along rows (shard fusion:
// q|k|v, gate|up run as ONE matmul: one activation quantization, one dispatch).
//
// Parts whose type has a packed format (packed.h) are repacked; adjacent parts of the same type
// become one packed matrix. Parts of other types keep their file rows and go through the
// generic path (activations in dot_ref's formats, dot per row): correct for every type, not
// fast. One call: each needed activation format is produced once (rows split over threads),
// then the row groups of all parts are split over the threads by bytes, so every thread
// streams an equal share. Results depend only on (row, activation row): batch and thread
// invariant.
//
// A call hands the row groups (rows, for generic parts) of all parts, numbered end to end, to
// the threads through a WorkSplit: each thread streams its own contiguous run front to back,
// and one that finishes early takes groups from the back of another's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/act.h"
#include "kernels/packed.h"
#include "tensor/weights.h"
#include "threading/work_split.h"

namespace sluice {
class ThreadPool;
}

namespace sluice::kernels {

struct CpuKernels;
struct Tuning;

// What one ActScratch buffer holds: a call's activation rows quantized to kA8_32 or kA8_256,
// the generic path's activation rows, or run_glu's gate|up outputs.
enum class ActSlot : uint8_t { kA8_32, kA8_256, kGeneric, kGlu };
inline constexpr int kActSlotCount = 4;
// The slot of a quantized activation format (not kF32, which is never copied).
ActSlot act_slot(ActFormat f);

// Per-caller state of Linear::run, reused across calls so a steady-state step allocates
// nothing: growable 64-byte aligned buffers, one per slot, and the dynamic work split.
class ActScratch {
 public:
  uint8_t* get(ActSlot slot, uint64_t bytes);
  WorkSplit& split() { return split_; }

 private:
  AlignedBytes buf_[kActSlotCount];
  WorkSplit split_;
};

// An elementwise op on a call's outputs, applied to each span of them right after the span is
// computed, while it is still in L1 (e.g. the final logit softcap: no second pass over the
// logits, and in decode its arithmetic hides under the weight stream). fn must be elementwise,
// so that results do not depend on where spans start: bit-identical to a pass afterwards.
struct Epilogue {
  void (*fn)(float* y, int64_t n, float arg) = nullptr;
  float arg = 0.0f;
};

class Linear {
 public:
  Linear() = default;
  // Repacks `parts` (all with the same cols) using the pool. `name` is for messages/profiles.
  // `wide_q6_k`: Q6_K parts get the byte-code layout (PackedFormat::kQ6_K8) instead.
  // `arena`: where the repacked bytes go (it must outlive the Linear); default: their own.
  // `release`: told the file bytes of the parts that were repacked, slab by slab as they are
  // (parts of the generic path are read in place: never released).
  static Linear build(std::span<const Mat> parts, ThreadPool& pool, std::string name, bool wide_q6_k = false,
                      ByteArena* arena = nullptr, const ReleasePages& release = {});

  bool empty() const { return rows_ == 0; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const std::string& name() const { return name_; }
  // Weight bytes one call streams (the repacked bytes; equal to the file's for all packed
  // formats but Q4_K) and the same rows' bytes in the file.
  uint64_t stream_bytes() const { return stream_bytes_; }
  uint64_t file_bytes() const { return file_bytes_; }
  std::string describe() const;  // e.g. "q4_0x16 [1536 -> 2560]"

  // y[m × rows] = x[m × cols]·Wᵀ with the kernels of ISA set `isa` (default: cpu_kernels()),
  // then y = post(y) elementwise when `post` is given.
  void run(ThreadPool& pool, const float* x, int64_t m, float* y, ActScratch& scratch, const CpuKernels* isa = nullptr,
           const Epilogue* post = nullptr) const;

  // A gated FFN's gate and up projections as one matmul whose row groups alternate (16 gate
  // rows, the same 16 up rows), so the GELU product is taken as soon as a pair is computed:
  // act[m × ff] = gelu_tanh(x·Wgateᵀ) ⊙ (x·Wupᵀ). Bit-identical to the two matmuls followed by
  // the row op. (Types without a packed layout: the plain fused matmul, then a GELU pass.)
  static Linear build_glu(const Mat& gate, const Mat& up, ThreadPool& pool, std::string name,
                          ByteArena* arena = nullptr, const ReleasePages& release = {});
  // The matrix when it is exactly one packed part (not a fusion, not generic); nullptr otherwise.
  // The tied embedding reads its rows from the packed lm_head through it (unpack_row).
  const PackedMatrix* packed_whole() const;
  // With `q` (format kA8_32, k = ff, row i at q->base + i·q->stride, ff a multiple of 32),
  // act's rows are also quantized into q as they are produced, while in L1: the input of a
  // following FFN down matrix that reads kA8_32 (run_quantized), so that call quantizes
  // nothing. Blocks of 32 are quantized independently: the bytes equal quantizing whole rows.
  void run_glu(ThreadPool& pool, const float* x, int64_t m, float* act, ActScratch& scratch,
               const CpuKernels* isa = nullptr, const ActRows* q = nullptr) const;

  // The activation format every part of this matrix reads, when they all read the same
  // quantized one and none is generic; kF32 otherwise (then run_quantized is not available).
  ActFormat quantized_input() const;
  // y = x·Wᵀ from activation rows already in quantized_input()'s format (e.g. from run_glu):
  // bit-identical to run() on the rows they were quantized from.
  void run_quantized(ThreadPool& pool, const ActRows& a, int64_t m, float* y, ActScratch& scratch,
                     const CpuKernels* isa = nullptr) const;

 private:
  struct Part {
    int64_t row0 = 0;  // first output row
    int64_t rows = 0;
    PackedMatrix packed;           // format kNone: generic rows below
    Mat raw;                       // generic path: the file's rows
    uint64_t bytes = 0;            // weight bytes streamed
    int64_t unit0 = 0, units = 0;  // its row groups (rows) in the call's numbering
  };
  struct Acts;
  void run_impl(ThreadPool& pool, const float* x, const ActRows* pre, int64_t m, float* y, ActScratch& scratch,
                const CpuKernels* isa, const Epilogue* post) const;
  // Runs body(ith, acts, b, e) over runs of `units` units split across the threads, after
  // quantizing x's rows into the formats the parts read — or with `pre`'s rows as given.
  template <class Body>
  void drive(ThreadPool& pool, const float* x, int64_t m, ActScratch& scratch, const CpuKernels& k, int64_t units,
             const ActRows* pre, Body&& body) const;
  void run_units(const CpuKernels& k, const Acts& my, int64_t m, int64_t b, int64_t e, float* y, const Epilogue* post,
                 const Tuning& tu) const;
  // Rows per block of a call split by activation rows instead of row groups (0: not split so),
  // and that split's body: blocks [b, e) of `rows` rows, every output of each.
  int64_t row_block(int64_t m, int nth) const;
  void run_row_blocks(const CpuKernels& k, const Acts& my, int64_t m, int64_t rows, int64_t b, int64_t e, float* y,
                      const Epilogue* post, const Tuning& tu) const;
  void compute(const CpuKernels& k, const Part& p, const Acts& my, int64_t m, int64_t u0, int64_t u1, float* y,
               int64_t ldy, const Tuning& tu) const;

  std::vector<Part> parts_;
  int64_t units_ = 0;
  bool glu_ = false;    // build_glu with interleaved groups
  int64_t glu_ff_ = 0;  // build_glu: rows of gate (= of up)
  int64_t rows_ = 0, cols_ = 0;
  uint64_t stream_bytes_ = 0, file_bytes_ = 0;
  std::string name_;
};

}  // namespace sluice::kernels
