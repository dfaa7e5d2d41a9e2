#!/usr/bin/env python3
"""Prints the Philox4x32-10 words that tests/ral/library_test.cc expects, from randomgen's
independent implementation (Philox(number=4, width=32); NumPy's own Philox is the 4x64 variant).
kiln's stream of a call site: key = (seed low word, seed high word), block b has the counter
(b low, b high, call_site, run). randomgen increments its counter before each block, hence the -1.

    python3 -m venv /tmp/philox && /tmp/philox/bin/pip install -r scripts/philox-requirements.txt
    /tmp/philox/bin/python scripts/philox-reference.py
"""
from randomgen import Philox

CASES = [  # (seed, call_site, run, first block, blocks)
    (0x0123456789ABCDEF, 7, 3, 0, 2),
    (42, 0, 0, 0, 2),
    (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, (1 << 32) - 1, 2),
]

for seed, site, run, first, blocks in CASES:
    counter = first | (site << 64) | (run << 96)
    g = Philox(key=seed, counter=counter - 1 if counter else (1 << 128) - 1, number=4, width=32)
    words = [int(w) for w in g.random_raw(4 * blocks)]
    print(f"{{0x{seed:016X}ull, {site}u, {run}u, {first}ull, {{" +
          ", ".join(f"0x{w:08x}u" for w in words) + "}},")
