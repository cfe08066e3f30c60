"""Bit operations on 64-bit words for compiled kernels, as single CPU instructions.

Index lookups and pair supports spend their time counting, finding and selecting bits in
words. Written as arithmetic (SWAR sums, a de Bruijn table, clearing the lowest bit in a
loop) each costs tens of cycles; LLVM's ``ctpop``/``cttz`` intrinsics compile to the
POPCNT/TZCNT instructions of the host CPU (numba compiles for it) and to the same
arithmetic where a CPU lacks them. ``prefetch`` is the same kind of intrinsic for a cache
line. Called from ``@numba.njit`` code only.
"""
from __future__ import annotations

from typing import Any, Union

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)

_U1 = np.uint64(1)


@intrinsic
def _count_ones(typingctx: Any, word: Any) -> Any:
    if not isinstance(word, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.zext(builder.ctpop(builder.zext(args[0], ir.IntType(64))), ir.IntType(64))

    return types.int64(word), codegen


@intrinsic
def _count_trailing_zeros(typingctx: Any, word: Any) -> Any:
    if not isinstance(word, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        # The flag says a zero word is allowed (the result is then 64), so nothing is undefined.
        return builder.cttz(builder.zext(args[0], ir.IntType(64)), ir.IntType(1)(0))

    return types.int64(word), codegen


@nb.njit(cache=True, nogil=True)
def popcount(word: np.uint64) -> int:
    """Set bits of ``word``."""
    return _count_ones(word)  # type: ignore[call-arg]  # numba supplies the typing context


@nb.njit(cache=True, nogil=True)
def trailing_zeros(word: np.uint64) -> int:
    """Zeros below the lowest set bit of ``word`` (64 for a zero word)."""
    return _count_trailing_zeros(word)  # type: ignore[call-arg]  # numba supplies the typing context


@nb.njit(cache=True, nogil=True)
def select(word: np.uint64, rank: Union[int, np.int64]) -> int:
    """Position of the ``rank``-th (from 0) set bit of ``word``; ``rank`` < ``popcount(word)``.

    A binary search on the halves' counts, without branches (a mispredicted branch costs
    more than a step): six counts, where clearing the lowest bit ``rank`` times costs up to
    63 dependent steps.
    """
    position = 0
    for width in (32, 16, 8, 4, 2, 1):
        below = popcount(word & ((_U1 << np.uint64(width)) - _U1))
        upper = int(rank >= below)
        rank -= below * upper
        word >>= np.uint64(width * upper)
        position += width * upper
    return position


@intrinsic
def prefetch(typingctx: Any, address: Any) -> Any:
    """Ask the CPU to start loading the cache line at the integer ``address`` (``llvm.prefetch``:
    a read, kept in every cache level); it never faults, whatever the address."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        byte_pointer = ir.IntType(8).as_pointer()
        flag = ir.IntType(32)
        # The intrinsic's name carries its pointer type: "ptr" where llvmlite emits opaque pointers, "i8*" before.
        name = "llvm.prefetch.p0" if str(byte_pointer) == "ptr" else "llvm.prefetch.p0i8"
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, flag, flag, flag]), name
        )
        builder.call(function, [builder.inttoptr(args[0], byte_pointer), flag(0), flag(3), flag(1)])
        return context.get_dummy_value()

    return types.void(address), codegen
