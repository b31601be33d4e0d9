"""submemory, reshape and permute_axes of a MemoryDesc (oneDNN's rules, docs/formats.md).

Each is a pure function from a desc to a new desc; a refused case raises
ClayoutError naming the rule that refused it. The MemoryDesc methods of the
same names turn their arguments into tuples of integers (or refuse them)
and call these; each result is built with ``desc.replace``, so this module
needs nothing of runtime.algebra.desc but its type (runtime.algebra.desc imports this one).
"""
from __future__ import annotations

import math

from ..errors import ClayoutError

# ``MemoryDesc`` in the annotations is documentation only: runtime.algebra.desc
# imports this module, so this one does not import it back.


def _no_halo(desc, what: str) -> None:
    if desc.has_halo:
        raise ClayoutError(f"{what} of a halo-padded desc ({desc.describe()}) is not supported; "
                           "apply it before adding the halo")


def submemory(desc, dims, offsets):
    _no_halo(desc, "submemory")
    where = f"submemory of {desc.describe()}"
    if len(dims) != desc.ndims or len(offsets) != desc.ndims:
        raise ClayoutError(f"{where}: dims {dims} and offsets {offsets} need "
                           f"{desc.ndims} entries each")
    padded = list(desc.padded_dims)
    offset0 = desc.offset0
    for d, (n, off, parent) in enumerate(zip(dims, offsets, desc.dims)):
        blk = desc.blocks_of(d)
        if off < 0 or n < 0 or off + n > parent:
            raise ClayoutError(f"{where}: dim {d} range [{off}, {off + n}) is outside "
                               f"[0, {parent})")
        if off % blk:
            raise ClayoutError(f"{where}: offset {off} of dim {d} is not a multiple "
                               f"of its block {blk}")
        at_border = off + n == parent
        if not at_border and n % blk and n >= blk:
            raise ClayoutError(f"{where}: dim {d} size {n} is neither a multiple of "
                               f"its block {blk} nor smaller than it, and does not reach the "
                               "right border")
        padded[d] = desc.padded_dims[d] - off if at_border else n
        offset0 += off // blk * desc.strides[d]
    return desc.replace(dims=dims, padded_dims=tuple(padded), offset0=offset0)


def permute_axes(desc, perm):
    if sorted(perm) != list(range(desc.ndims)):
        raise ClayoutError(f"permute_axes of {desc.describe()}: {perm} is not a permutation of "
                           f"0..{desc.ndims - 1}")

    def move(values):
        out = [None] * desc.ndims
        for i, v in enumerate(values):
            out[perm[i]] = v
        return tuple(out)

    return desc.replace(dims=move(desc.dims), padded_dims=move(desc.padded_dims),
                        strides=move(desc.strides), halo_lower=move(desc.halo_lower),
                        halo_upper=move(desc.halo_upper),
                        inner_idxs=tuple(perm[d] for d in desc.inner_idxs),
                        order=tuple(perm[d] for d in desc.order))


def reshape(desc, new_dims):
    where = f"reshape of {desc.describe()} to {new_dims}"
    if math.prod(new_dims) != desc.nelems or min(new_dims, default=0) < 0:
        raise ClayoutError(f"{where}: the volumes differ "
                           f"({desc.nelems} vs {math.prod(new_dims)})")
    if new_dims == desc.dims:
        return desc
    old = desc.dims
    blocked = set(desc.inner_idxs)

    def plain(d):
        return (d not in blocked and desc.padded_dims[d] == old[d]
                and not desc.halo_lower[d] and not desc.halo_upper[d])

    # mapping: for each new dim, ("keep", old d) | ("unit",) | ("split", old d, inner stride)
    new_of = [None] * len(new_dims)
    i, j = len(old) - 1, len(new_dims) - 1
    while i >= 0 or j >= 0:
        if i >= 0 and j >= 0 and old[i] == new_dims[j]:
            new_of[j] = ("keep", i)
            i, j = i - 1, j - 1
        elif j >= 0 and new_dims[j] == 1:
            new_of[j] = ("unit",)
            j -= 1
        elif i >= 0 and old[i] == 1:
            if not plain(i):
                raise ClayoutError(f"{where}: unit dim {i} is blocked "
                                   "or padded and cannot be removed")
            i -= 1
        elif i >= 0 and j >= 0:
            # grow a group from the back until both sides have the same volume
            gi, gj = [i], [j]
            vi, vj = old[i], new_dims[j]
            while vi != vj:
                if vi < vj and gi[-1] > 0:
                    gi.append(gi[-1] - 1)
                    vi *= old[gi[-1]]
                elif vj < vi and gj[-1] > 0:
                    gj.append(gj[-1] - 1)
                    vj *= new_dims[gj[-1]]
                else:
                    break
            if vi != vj:
                raise ClayoutError(f"{where}: dims cannot be grouped "
                                   "into joins and splits")
            for d in gi:
                if not plain(d):
                    raise ClayoutError(f"{where}: dim {d} is blocked or "
                                       "padded; only dense, unblocked, unpadded dims join or split")
            for a, b in zip(gi, gi[1:]):  # gi runs inner to outer
                if desc.strides[b] != desc.strides[a] * old[a]:
                    raise ClayoutError(f"{where}: dims {b} and {a} are "
                                       "not dense in memory, so they cannot be joined")
            stride = desc.strides[gi[0]]
            for jj in gj:
                new_of[jj] = ("split", gi[0], stride)
                stride *= new_dims[jj]
            i, j = gi[-1] - 1, gj[-1] - 1
        else:
            raise ClayoutError(f"{where}: dims cannot be matched")

    nd = len(new_dims)
    padded, strides, lower, upper = [0] * nd, [0] * nd, [0] * nd, [0] * nd
    remap = {}
    for j, how in enumerate(new_of):
        if how[0] == "keep":
            d = how[1]
            remap[d] = j
            padded[j], strides[j] = desc.padded_dims[d], desc.strides[d]
            lower[j], upper[j] = desc.halo_lower[d], desc.halo_upper[d]
        else:
            padded[j] = new_dims[j]
            strides[j] = how[2] if how[0] == "split" else None
    # physical order: old order with each old dim replaced by its new dims
    group_of = {}
    for j, how in enumerate(new_of):
        if how[0] != "unit":
            group_of.setdefault(how[1], []).append(j)
    order = [j for d in desc.order for j in group_of.get(d, [])]
    for j in range(nd):  # a new unit dim sits just outside the next dim to its right
        if new_of[j][0] == "unit":
            right = next((k for k in range(j + 1, nd) if k in order), None)
            pos = order.index(right) if right is not None else len(order)
            order.insert(pos, j)
            strides[j] = (strides[right] * max(1, padded[right] // _blk(desc, new_of[right]))
                          if right is not None else 1)
    return desc.replace(dims=new_dims, padded_dims=tuple(padded), strides=tuple(strides),
                        halo_lower=tuple(lower), halo_upper=tuple(upper), order=tuple(order),
                        inner_idxs=tuple(remap[d] for d in desc.inner_idxs))


def _blk(desc, how) -> int:
    return desc.blocks_of(how[1]) if how[0] == "keep" else 1
