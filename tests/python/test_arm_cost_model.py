"""python/arm_cost_model.py: the loop cut out of an assembly listing, the MACs counted in it and
the E2B MACs per token (hand-computed from gemma4.md's shapes). llvm-mca and clang are not run."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
import arm_cost_model as acm   # noqa: E402

# An outer loop (.LBB0_1) holding an inner loop (.LBB0_2) with 2 SDOTs and one SMMLA; a later
# loop (.LBB0_4) with one SMULL and an FMLA (a float op, not counted for quantized kernels).
ASM = """\
_Z5probev:
// %bb.0:
\tmov\tx8, xzr
.LBB0_1:                                // =>This Loop Header: Depth=1
\tldr\tq0, [x0]
\tsdot\tv1.4s, v0.16b, v2.4b[0]
.LBB0_2:                                //   Parent Loop BB0_1 Depth=1
\tldr\tq3, [x1], #16
\tsdot\tv4.4s, v3.16b, v2.4b[0]
\tsdot\tv5.4s, v3.16b, v2.4b[1]
\tsmmla\tv6.4s, v3.16b, v7.16b
\tsubs\tx2, x2, #1
\tb.ne\t.LBB0_2
// %bb.3:
\tsubs\tx3, x3, #1
\tb.ne\t.LBB0_1
.LBB0_4:
\tsmull\tv8.8h, v9.8b, v10.8b
\tfmla\tv11.4s, v12.4s, v13.4s
\tcbnz\tx4, .LBB0_4
\tret
.Lfunc_end0:
_Z5otherv:
\tsdot\tv1.4s, v0.16b, v2.4b[0]
"""


def test_mac_counts_per_instruction():
    assert acm.macs_of("sdot\tv4.4s, v3.16b, v2.4b[0]", False) == 16
    assert acm.macs_of("udot\tv4.2s, v3.8b, v2.8b", False) == 8
    assert acm.macs_of("smmla\tv6.4s, v3.16b, v7.16b", False) == 32
    assert acm.macs_of("smull2\tv8.8h, v9.16b, v10.16b", False) == 8
    assert acm.macs_of("smull\tv8.4s, v9.4h, v10.4h", False) == 0      # a widening step, not a code MAC
    assert acm.macs_of("fmla\tv11.4s, v12.4s, v13.4s", False) == 0     # a quantized kernel's fold
    assert acm.macs_of("fmla\tv11.4s, v12.4s, v13.s[1]", True) == 4
    assert acm.macs_of("sdot\tv4.4s, v3.16b, v2.4b[0]", True) == 0


def test_innermost_loop_with_the_most_macs():
    body = acm.function_body(ASM, "probe")
    insns, macs = acm.innermost_mac_loop(body, False)
    # The inner loop, not the outer one (which holds it) and not the later SMULL loop (8 MACs).
    assert macs == 16 + 16 + 32
    assert insns[0].startswith("ldr") and insns[-1].startswith("b.ne")
    assert len(insns) == 6
    insns, macs = acm.innermost_mac_loop(body, True)
    assert macs == 4 and insns[-1].startswith("cbnz")


def test_function_body_stops_at_its_end():
    body = acm.function_body(ASM, "probe")
    assert not any("_Z5otherv" in ln for ln in body)


def test_e2b_macs_and_bytes_per_token():
    wc = acm.weight_classes()
    # Q4_0 per layer: attn q + o 2·1536·8·hd; K + V 2·1536·hd on the 15 unshared layers only;
    # gate, up, down 3·1536·ffn (6144, doubled on the 20 shared layers); PLE gate + proj 2·1536·256.
    # 28 sliding layers (hd 256), 7 global (hd 512, layers 4, 9, ..., 34; 3 of them unshared).
    attn = 28 * 2 * 1536 * 2048 + 7 * 2 * 1536 * 4096
    kv = 12 * 2 * 1536 * 256 + 3 * 2 * 1536 * 512
    ffn = 15 * 3 * 1536 * 6144 + 20 * 3 * 1536 * 12288
    ple = 35 * 2 * 1536 * 256
    assert wc["q4_0"][0] == attn + kv + ffn + ple == 1_863_057_408
    assert wc["q4_0"][1] == wc["q4_0"][0] * 18 / 32
    assert wc["q6_k"] == (1536 * 262144, 1536 * 262144 * 210 / 256)   # the tied lm_head
    assert wc["bf16"] == (1536 * 35 * 256, 1536 * 35 * 256 * 2)        # per_layer_model_proj
