## One kernel family for every conversion: buffer->buffer, buffer->image,
## image->buffer. Python (runtime/opencl/render.py) hands in finished C
## snippets; this file only gives them their structure. One work item writes
## one destination vector (a buffer run of V elements) or one pixel.
// clayout ${summary}
% for line in pragmas:
${line}
% endfor
${helpers}
% if src_image:
__constant sampler_t clayout_sampler =
    CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
% endif
typedef ${index_type} idx_t;

__kernel void ${name}(${src_param}, ${dst_param}${params})
{
    ${ids}
    if (${guard})
        return;
% for line in prologue:
    ${line}
% endfor
% for j in range(vector):
    ${dst_type} v${j};
% endfor
% for run in runs:
%   if run["guard"] is None:
    {
        ${run["load"]}
%     for j, value in run["fast"]:
        v${j} = ${value};
%     endfor
    }
%   else:
    if (${run["guard"]}) {
        ${run["load"]}
%     for j, value in run["fast"]:
        v${j} = ${value};
%     endfor
    } else {
%     for j, value in run["slow"]:
        v${j} = ${value};
%     endfor
    }
%   endif
% endfor
    ${store}
}
