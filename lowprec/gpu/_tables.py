"""Step tables: the emulator's answer for every input, in a few kilobytes.

For a fixed sign, rounding the magnitude ``m`` of an input (its bit pattern
without the sign; bit patterns of floats order like their values) is a
monotone step function: code ``c`` is the answer exactly for ``m`` in
``[lo[c], hi[c]]``. The GPU sweeps look up the code the hardware gave and
check that the input lies in its range, so one table lets the device check
all 2**32 float32 inputs (or 2**32 operand pairs) against the emulator.

Tables are found by bisection on the emulator itself and cost about
``31 * 2 * (number of codes)`` emulator calls per sign. Bisection assumes the
emulator is monotone between two inputs where it gives the same code;
:func:`check_table` tests that on random inputs and at every step edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Largest non-NaN magnitude bit pattern (infinity) per input width.
TOP = {32: np.uint64(0x7F800000), 64: np.uint64(0x7FF0000000000000)}


@dataclass
class StepTable:
    """Per sign: step starts (sorted magnitudes) and the code of each step."""

    bits: int  # 32 or 64: width of the input bit patterns
    ncodes: int
    starts: list[np.ndarray]  # [sign] -> uint64 array
    codes: list[np.ndarray]  # [sign] -> int64 array
    nan_expect: np.ndarray  # [sign] -> code for NaN inputs (-1: none)

    def lo_hi(self) -> tuple[np.ndarray, np.ndarray]:
        """Arrays ``lo, hi`` of shape (2, ncodes) for the device (empty: lo > hi)."""
        dt = np.uint32 if self.bits == 32 else np.uint64
        lo = np.full((2, self.ncodes), np.iinfo(dt).max, dtype=dt)
        hi = np.zeros((2, self.ncodes), dtype=dt)
        top = int(TOP[self.bits])
        for s in (0, 1):
            st = self.starts[s]
            ends = np.append(st[1:] - 1, np.uint64(top))
            lo[s, self.codes[s]] = st.astype(dt)
            hi[s, self.codes[s]] = ends.astype(dt)
        return lo, hi

    def lookup(self, sign: np.ndarray, mag: np.ndarray) -> np.ndarray:
        """The table's code for each (sign, magnitude) (magnitude <= infinity)."""
        out = np.empty(mag.shape, dtype=np.int64)
        for s in (0, 1):
            sel = sign == s
            k = np.searchsorted(self.starts[s], mag[sel].astype(np.uint64), side="right") - 1
            out[sel] = self.codes[s][k]
        return out

    @property
    def steps(self) -> int:
        return int(sum(len(s) for s in self.starts))


def _edges(f: Callable[[np.ndarray], np.ndarray], a0: int, b0: int) -> np.ndarray:
    """All p in (a0, b0] with f(p-1) != f(p), assuming f is monotone."""
    a = np.array([a0], dtype=np.uint64)
    b = np.array([b0], dtype=np.uint64)
    fa, fb = f(a), f(b)
    found = []
    keep = fa != fb
    a, b, fa, fb = a[keep], b[keep], fa[keep], fb[keep]
    while a.size:
        adjacent = (b - a) == 1
        found.append(b[adjacent])
        keep = ~adjacent
        a, b, fa, fb = a[keep], b[keep], fa[keep], fb[keep]
        if not a.size:
            break
        mid = a + (b - a) // np.uint64(2)
        fm = f(mid)
        left, right = fm != fa, fm != fb
        # Keep the halves whose ends still differ: [a, mid] and/or [mid, b].
        a, b = np.concatenate([a[left], mid[right]]), np.concatenate([mid[left], b[right]])
        fa, fb = np.concatenate([fa[left], fm[right]]), np.concatenate([fm[left], fb[right]])
    return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.uint64)


def build_table(
    emulate: Callable[[np.ndarray], np.ndarray], bits: int, ncodes: int
) -> StepTable:
    """The step table of ``emulate`` (float32 or float64 array -> integer codes)."""
    ft, ut = (np.float32, np.uint32) if bits == 32 else (np.float64, np.uint64)
    top = int(TOP[bits])
    starts, codes, nan_expect = [], [], np.full(2, -1, dtype=np.int64)
    for s in (0, 1):
        sign_bit = ut(1) << ut(bits - 1)

        def f(m: np.ndarray, sign_bit=sign_bit, s=s) -> np.ndarray:
            x = (m.astype(ut) | (sign_bit if s else ut(0))).view(ft)
            return np.asarray(emulate(x)).astype(np.int64)

        st = np.concatenate([np.array([0], dtype=np.uint64), _edges(f, 0, top)])
        cs = f(st)
        if len(np.unique(cs)) != len(cs):
            raise ValueError("emulated conversion is not monotone: a code occurs in two steps")
        starts.append(st)
        codes.append(cs)
        quiet_nan = (ut(top) | (ut(1) << ut(22 if bits == 32 else 51))) | (sign_bit if s else ut(0))
        nan_expect[s] = int(np.asarray(emulate(np.array([quiet_nan], dtype=ut).view(ft)))[0])
    return StepTable(bits, ncodes, starts, codes, nan_expect)


def check_table(
    table: StepTable, emulate: Callable[[np.ndarray], np.ndarray], samples: int,
    rng: np.random.Generator,
) -> dict:
    """Compare the table with the emulator on random inputs and on both sides of every edge.

    Returns counts; ``mismatches`` must be 0 for the table to stand for the emulator.
    """
    bits = table.bits
    ft, ut = (np.float32, np.uint32) if bits == 32 else (np.float64, np.uint64)
    sign_bit = np.uint64(1) << np.uint64(bits - 1)
    top = TOP[bits]
    parts = [rng.integers(0, 2 ** bits, size=samples, dtype=np.uint64)]
    for s in (0, 1):
        st = table.starts[s]
        sb = sign_bit if s else np.uint64(0)
        parts += [st | sb, (st[1:] - np.uint64(1)) | sb]
    u = np.concatenate(parts)
    mag = u & ~sign_bit
    sign = (u >> np.uint64(bits - 1)).astype(np.int64)
    finite = mag <= top
    got = np.asarray(emulate(u.astype(ut).view(ft))).astype(np.int64)
    want = np.where(finite, 0, table.nan_expect[sign])
    want[finite] = table.lookup(sign[finite], mag[finite])
    bad = got != want
    first = [hex(int(v)) for v in u[bad][:5]]
    return {"inputs": int(u.size), "mismatches": int(bad.sum()), "first": first}
