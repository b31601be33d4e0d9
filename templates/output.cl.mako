## read_output's kernel (runtime/opencl/output.py renders it; the rules are
## runtime/algebra/output.py's). One work item: one (n, s) position of the
## output, s the flat index over dims[2:]; it reads the C channels through
## the source's accessor, four along axis 1 at a time. C, S and the
## decoding of s are literals (baked) or the kernel's last arguments
## (generic: one program per family, whatever the output's shape).
${src.source}
% if dst is not None:
${dst.source}
% endif
#pragma OPENCL FP_CONTRACT OFF
// ${summary}

/* x, the activation's input, of a stored value of channel c */
static inline float out_x(${t} q, int c, __global const float *scale,
                          __global const int *zero${log})
{
% if dequantize:
    return convert_float((long)q - (long)${zero}) * ${scale};
% else:
    return convert_float(q);
% endif
}

## the body of a loop over every channel c with its x, in channel order
<%def name="channels(body)">
    for (int c0 = 0; c0 < ${C}; c0 += 4) {
        ${t} lanes[4];
        vstore4(src_load4_a1(src_ARGS, n, c0${rest_args}), 0, lanes);
        for (int j = 0; j < 4 && c0 + j < ${C}; ++j) {
            const int c = c0 + j;
            const float x = out_x(lanes[j], c, scale, zero${log_arg});
            ${body}
        }
    }
</%def>

__kernel void ${name}(${src.params},
% if result == "tensor":
                      ${dst.params},
% elif result == "argmax":
                      __global int *arg,
% else:
                      __global int *count, __global int *flat, __global float *val,
                      __global float *key, const float bound, const int cap,
% endif
                      __global const float *scale, __global const int *zero${numbers}${log})
{
    const int s = get_global_id(0);
    const int n = get_global_id(1);
% if result != "threshold":
    if (s >= ${S}) return;
% endif
% for line in decode:
    ${line}
% endfor
% if result == "argmax":
    float best = 0.0f;
    int at = 0, nan_seen = 0;
    ${channels("if (c == 0 || (!nan_seen && (isnan(x) || x > best))) { best = x; at = c; nan_seen = isnan(x); }")}
    ${arg}
% else:
%   if result == "threshold":
    /* every work item of the group reaches the barriers: past S it selects nothing */
    const int live = s < ${S};
%   endif
%   if activation == "softmax":
    float m = 0.0f;
    float sum = 0.0f;
%     if result == "threshold":
    if (live) {
%     endif
    ${channels("if (c == 0 || (!isnan(m) && (isnan(x) || x > m))) m = x;")}
    ${channels("sum += exp(x - m);")}
%     if result == "threshold":
    }
%     endif
<% value = "exp(x - m) / sum" %>
%   elif activation == "sigmoid":
<% value = "1.0f / (1.0f + exp(-x))" %>
%   else:
<% value = "x" %>
%   endif
%   if result == "tensor":
    ${channels("dst_store(dst_ARGS, n, c" + dst_args + ", " + value + ");")}
%   else:
<%
    if keys_are_p:   # the key is the activated value: computed in both passes
        count = "const float k = " + value + "; mine += k >= bound;"
        write = "const float k = " + value + "; if (k >= bound) { if (at < cap) { " + selected("k", "k") + " } at++; }"
    else:            # the key is x: the count pass activates nothing
        count = "mine += x >= bound;"
        write = "if (x >= bound) { if (at < cap) { " + selected(value, "x") + " } at++; }"
%>
    /* the group's selected elements counted in local memory, one global
       atomic a group for their place, then written there (any order: the
       host sorts them) */
    __local int group_n, group_at;
    if (get_local_id(0) == 0) group_n = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    int mine = 0;
    if (live) {
        ${channels(count)}
    }
    const int first = mine ? atomic_add(&group_n, mine) : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0 && group_n) group_at = atomic_add(count, group_n);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (mine) {
        int at = group_at + first;
        ${channels(write)}
    }
%   endif
% endif
}
