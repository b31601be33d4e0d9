## An accessor: OpenCL C functions that read (and write) one tensor by its
## logical index, whatever its layout. Python (runtime/opencl/accessor.py)
## hands in finished C; this file only gives it its structure.
// clayout accessor ${name}: ${summary}
#ifndef ${guard}
#define ${guard}
% for line in pragmas:
${line}
% endfor
#ifndef CLAYOUT_HELPERS
#define CLAYOUT_HELPERS
${helpers}
#endif
#define ${name}_PARAMS ${params}
#define ${name}_ARGS ${args}
#define ${name}_RANK ${rank}
% if lane_axis is not None:
#define ${name}_LANE_AXIS ${lane_axis}
% endif
% for line in notes:
${line}
% endfor
% if sampler:
__constant sampler_t ${name}_sampler =
    CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP_TO_EDGE | CLK_FILTER_NEAREST;
% endif
% for fn in functions:

${fn.signature}
{
%   for line in fn.body:
    ${line}
%   endfor
}
% endfor
#endif
