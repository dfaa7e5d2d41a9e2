#!/usr/bin/env python3
"""Writes the binary seed files of tests/fuzz/corpus/{npy,disk_cache} (checked in; rerun after a
format change). Standard library only: .npy headers are written by hand, as numpy would."""
import hashlib
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, data, version=(1, 0), fortran=False):
    shape_text = "(" + ", ".join(map(str, shape)) + (",)" if len(shape) == 1 else ")")
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    size_bytes = 2 if version[0] == 1 else 4
    total = 6 + 2 + size_bytes + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    length = struct.pack("<H" if size_bytes == 2 else "<I", len(header))
    return b"\x93NUMPY" + bytes(version) + length + header.encode("latin1") + data


def write(folder, name, data):
    path = os.path.join(here, "corpus", folder, name)
    with open(path, "wb") as f:
        f.write(data)


def main():
    write("npy", "f32_2x3.npy", npy("<f4", [2, 3], struct.pack("<6f", 1, -2, 0.5, 3, 4, 5)))
    write("npy", "f64_4.npy", npy("<f8", [4], struct.pack("<4d", 1e300, -0.0, 2, float("inf"))))
    write("npy", "i32_2x2x2.npy", npy("<i4", [2, 2, 2], struct.pack("<8i", *range(-4, 4))))
    write("npy", "f32_scalar.npy", npy("<f4", [], struct.pack("<f", 7)))
    write("npy", "f32_empty_0x5.npy", npy("<f4", [0, 5], b""))
    write("npy", "v2_i32_3.npy", npy("<i4", [3], struct.pack("<3i", 1, 2, 3), version=(2, 0)))
    write("npy", "v3_f32_1.npy", npy("<f4", [1], struct.pack("<f", 1), version=(3, 0)))
    write("npy", "fortran_f32_2x2.npy", npy("<f4", [2, 2], struct.pack("<4f", 1, 2, 3, 4), fortran=True))
    write("npy", "big_endian_f4.npy", npy(">f4", [2], struct.pack(">2f", 1, 2)))
    write("npy", "truncated_data.npy", npy("<f8", [3], struct.pack("<2d", 1, 2)))
    # Language version 3: a file of every element type (bf16 as NumPy writes ml_dtypes.bfloat16,
    # '<V2', and as '<u2' bit patterns), bool bytes other than 0 / 1, byte orders.
    write("npy", "b1_2x2.npy", npy("|b1", [2, 2], bytes([0, 1, 1, 0])))
    write("npy", "b1_not_0_or_1.npy", npy("|b1", [3], bytes([0, 2, 1])))
    write("npy", "i1_4.npy", npy("|i1", [4], struct.pack("<4b", -128, -1, 0, 127)))
    write("npy", "u1_3_big_endian.npy", npy(">u1", [3], bytes([0, 128, 255])))
    write("npy", "i2_3.npy", npy("<i2", [3], struct.pack("<3h", -32768, -1, 32767)))
    write("npy", "u2_bf16_bits_2.npy", npy("<u2", [2], struct.pack("<2H", 0x3F80, 0xC000)))
    write("npy", "u4_2.npy", npy("<u4", [2], struct.pack("<2I", 0, 0xFFFFFFFF)))
    write("npy", "i8_2.npy", npy("<i8", [2], struct.pack("<2q", -(1 << 63), (1 << 63) - 1)))
    write("npy", "u8_scalar.npy", npy("<u8", [], struct.pack("<Q", (1 << 64) - 1)))
    write("npy", "f2_3.npy", npy("<f2", [3], struct.pack("<3e", 1, -65504, float("inf"))))
    write("npy", "V2_bf16_2x1.npy", npy("<V2", [2, 1], struct.pack("<2H", 0x3F80, 0x7FC0)))
    write("npy", "big_endian_i2.npy", npy(">i2", [1], struct.pack(">h", 1)))
    # Disk-cache entries in today's format: payload | "KILNCAC1" | length (u64 LE) | SHA-256.
    for name, payload in [("empty.entry", b""), ("text.entry", b"int kernel(void) { return 0; }\n"),
                          ("binary.entry", bytes(range(256)))]:
        trailer = b"KILNCAC1" + struct.pack("<Q", len(payload)) + hashlib.sha256(payload).digest()
        write("disk_cache", name, payload + trailer)
    write("disk_cache", "short_trailer.entry", b"KILNCAC1" + b"\0" * 8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
