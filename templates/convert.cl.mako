## One kernel for every conversion: buffer->buffer, buffer->image,
## image->buffer. Python (runtime/opencl/render.py) hands in finished C
## snippets; this file only gives them their structure. The direct family:
## one work item writes one destination vector (a buffer run of V elements)
## or one pixel. The tiled family (``tile`` set): a work-group loads a tile of
## such cells into local memory with consecutive work items along the
## source's contiguous direction, then stores it with consecutive work items
## along the destination's.
<%def name="load_cell(pad)">\
% for j in range(vector):
${pad}${dst_type} v${j};
% endfor
% for run in runs:
%   if run["guard"] is None:
${pad}{
${pad}    ${run["load"]}
%     for j, value in run["fast"]:
${pad}    v${j} = ${value};
%     endfor
${pad}}
%   else:
${pad}if (${run["guard"]}) {
${pad}    ${run["load"]}
%     for j, value in run["fast"]:
${pad}    v${j} = ${value};
%     endfor
${pad}} else {
%     for j, value in run["slow"]:
${pad}    v${j} = ${value};
%     endfor
${pad}}
%   endif
% endfor
</%def>\
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

% if tile is None:
__kernel void ${name}(${src_param}, ${dst_param}${params})
{
    ${ids}
    if (${guard})
        return;
% for line in prologue:
    ${line}
% endfor
${load_cell("    ")}\
    ${store}
}
% else:
__kernel __attribute__((reqd_work_group_size(${tile["items"]}, 1, 1)))
void ${name}(${src_param}, ${dst_param}${params})
{
    __local ${dst_type} tile[${tile["words"]}];
    ${ids}
% if tile["by_element"]:
    for (uint e = lid; e < ${tile["elements"]}; e += ${tile["items"]}u) {
        const uint j = ${tile["element"][0]}, ca = ${tile["element"][1]}, cb = ${tile["element"][2]};
        const idx_t g0 = ta * ${tile["across"]} + ca, g1 = tb * ${tile["along"]} + cb;
        if (${guard}) {
%   for line in prologue:
            ${line}
%   endfor
            ${element}
            ${tile["put_element"]}
        }
    }
% else:
    for (uint e = lid; e < ${tile["cells"]}; e += ${tile["items"]}u) {
        const uint ca = ${tile["load"][0]}, cb = ${tile["load"][1]};
        const idx_t g0 = ta * ${tile["across"]} + ca, g1 = tb * ${tile["along"]} + cb;
        if (${guard}) {
% for line in prologue:
            ${line}
% endfor
${load_cell("            ")}\
% for j in range(vector):
            ${tile["put"][j]}
% endfor
        }
    }
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint e = lid; e < ${tile["cells"]}; e += ${tile["items"]}u) {
        const uint ca = ${tile["store"][0]}, cb = ${tile["store"][1]};
        const idx_t g0 = ta * ${tile["across"]} + ca, g1 = tb * ${tile["along"]} + cb;
        if (${guard}) {
% for j in range(vector):
            const ${dst_type} v${j} = ${tile["get"][j]};
% endfor
            ${store}
        }
    }
}
% endif
