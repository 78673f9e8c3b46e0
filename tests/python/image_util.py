"""Images for the server tests and the image benchmark: the tiny Gemma 4 with image markers in
its vocabulary (the tiny vocabulary has none), and PNG files written without an image library."""
import random
import struct
import zlib

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

MARKERS = {509: "<|image>", 510: "<|image|>", 511: "<image|>"}  # <unused73..75> in the tiny vocabulary


def with_image_markers(src, out):
    """A copy of the tiny Gemma 4 `src` with three unused tokens renamed to the image markers
    (control tokens), same weights. Returns `out`."""
    r = gguf.GGUFReader(str(src))
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    for i, text in MARKERS.items():
        toks[i], types[i] = text, int(gguf.TokenType.CONTROL)
    w = gguf.GGUFWriter(str(out), r.fields["general.architecture"].contents(), endianess=r.endianess)
    copy_with_new_metadata(r, w, {
        "tokenizer.ggml.tokens": MetadataDetails(gguf.GGUFValueType.ARRAY, toks, sub_type=gguf.GGUFValueType.STRING),
        "tokenizer.ggml.token_type": MetadataDetails(gguf.GGUFValueType.ARRAY, types,
                                                     sub_type=gguf.GGUFValueType.INT32)}, [])
    return out


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def noise_png(width, height, seed=0):
    """An 8-bit RGB PNG of random pixels (`seed`): every seed a different image."""
    rnd = random.Random(seed)
    rows = b"".join(b"\x00" + rnd.randbytes(3 * width) for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(rows, 1)) +
            png_chunk(b"IEND", b""))
