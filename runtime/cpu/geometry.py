"""The cache geometry the cpu engine cuts its copies to: every size and
threshold in one place. Cache sizes and cores are this machine's, read from
the OS (runtime/cpu/machine.py; ``clayout devices`` prints them); the ratios
below were measured on a 2-vCPU Zen 5 with 32 KiB L1d and 1 MiB L2 per core
(1x64x512x512 f32 unless said), which is also the fallback where the OS
says nothing.
"""
from __future__ import annotations

from ..settings import env_int
from .machine import machine


def _pow2_floor(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1)


MACHINE = machine()
THREADS = max(1, min(8, MACHINE.cores))   # threads of a job: the caller and the pool's

LINE_BYTES = MACHINE.line     # one cache line
L1_BYTES = MACHINE.l1d_bytes  # lines one pass of a blocked transpose's inner axis may touch
L2_BYTES = MACHINE.l2_bytes   # one core's L2
ALIAS_BYTES = 1024            # strides that are multiples of this map to 4 of L1's 64 sets
PLANE_BYTES = 4096            # source elements this far apart lie in different planes

SMALL_ELEMS = 1 << 19         # up to this many elements (2 MiB of f32): one copy, no threads
SMALL_BYTES = 1 << 20         # a compiled box of up to this many bytes: one call, no threads
# how long the worker pool's idle threads spin after a compiled job before they sleep (a
# sleeping thread took 50-90 us to wake on a 2-vCPU VM); CLAYOUT_CPU_SPIN_US=0: at once
SPIN_NS = 1000 * env_int("CLAYOUT_CPU_SPIN_US", 200, "a time in microseconds (0 or more)",
                         minimum=0)
# a compiled copy writing more than this stores whole lines past the caches: 1x64x512x512
# f32 (64 MiB) NCHW->NHWC 8.2 -> 5.6 ms, NHWC->NCHW 5.0 -> 3.0; at 224 (12 MiB) streaming
# lost (0.65 -> 0.84 ms): the lines were still in cache for the next call
STREAM_BYTES = 8 * L2_BYTES * THREADS
TILE_ELEMS = _pow2_floor(L2_BYTES // 16)  # elements per tile: source and destination tiles
                              # stay in L2 (1 << 16 at 1 MiB)
WRITE_RUN = 64                # a tile first grows along the destination to runs of this many
READ_RUN = 1024               # then along the source to runs of this many
STAGE_RUN = 32                # a tile staged when its destination inner run is this long ...
SHORT_RUN = 64                # a destination inner run this short (channels, 16c, a lane) is
                              # gathered from far planes by the far-plane path
LANE_RUN = 8                  # runs this short are copied one index at a time (the RGBA lane)

# the far-plane path's big tiles: TILE_ELEMS * 4 elements (1 MiB of f32, one core's L2),
# source runs of TILE_ELEMS / 8 (NCHW->NHWC 7.4 -> 6.3 ms at 8x; 4x, in turn, 3 runs:
# 1x64x224x224 ->NHWC 2.8-3.3 -> 2.4-3.0 ms, ->nChw16c 2.2-2.5 -> 1.8-2.1,
# ->in_out_channel 2.8-3.3 -> 2.5-2.9; C17 10-15% faster; 512 within 3% either way)
FAR_TILE_ELEMS = TILE_ELEMS * 4
FAR_READ_RUN = TILE_ELEMS // 8

# rows path: bytes per block of rows, one L2 (OIHW->conv2d_filter 18.5 ms at 256 KiB,
# 15.5 at 512 KiB, 14.8 at 1 MiB)
STAGE_BYTES = L2_BYTES
