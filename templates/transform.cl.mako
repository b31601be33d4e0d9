## The forward transform stage (runtime/algebra/transform.py) as one kernel.
## Python (runtime/opencl/transform.py) hands in G's float32 numbers as exact
## literals and the C of each step; one work item writes one element of the
## placed tensor, recomputing from the logical tensor, in registers, the
## documented order: axis after axis, terms p = 0, 1, ... summed left to right.
#pragma OPENCL FP_CONTRACT OFF
// clayout transform ${summary}
typedef ${index_type} idx_t;

// G rounded to float32 (${tile} rows of ${taps}); zero terms stay in the sums
__constant float G[${tile}][${taps}] = {
% for row in rows:
    {${", ".join(row)}},
% endfor
};

__kernel void ${name}(__global const float *restrict src, __global float *restrict dst,
% for group in params:
        ${group}${"," if not loop.last else ")"}
% endfor
{
    const idx_t t = get_global_id(0);
    if (t >= total)
        return;
    idx_t rest = t;    // the placed index's digits, innermost first
% for d in reversed(range(1, out_rank)):
    const idx_t o${d} = rest % n${d};
    rest /= n${d};
% endfor
    const idx_t o0 = rest;
% for line in coords:
    ${line}
% endfor
% if pad_guard:
    if (${pad_guard}) {    // the split axis's zero padding
        dst[t] = 0.0f;
        return;
    }
% endif
    const idx_t base = ${base};
% for line in loads:
    ${line}
% endfor
% for axis, lines in steps:
    // along logical axis ${axis}
%   for line in lines:
    ${line}
%   endfor
% endfor
    dst[t] = ${result};
}
