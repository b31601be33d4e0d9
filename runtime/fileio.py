"""Files: outputs written whole or not at all, .npy inputs checked before they
are read.

Outputs (``atomic_write``): the data goes to a fresh temporary file beside the
target and is renamed onto it, so a failure, Ctrl-C, SIGTERM or SIGHUP leaves
the old file whole and no temporary file behind. Before any work
``check_output`` refuses what must not be replaced:

* an existing output that is not a regular file (a device, FIFO, socket or
  folder): clayout writes regular files only;
* an existing output the user may not write (a read-only file);
* an output that is the same file as one of the inputs;
* a folder that does not exist.

A symbolic link is followed: its target is replaced (keeping its permission
bits) and the link stays a link; a dangling link creates its target, when
the target's folder exists. Every message names the path the user gave,
never the temporary one. Several outputs (tiles) are all written before the
first is renamed into place.

Inputs (``load_npy``): anything but a regular file (a FIFO, device, socket or
folder) is refused without reading it; the header is read first and the data
size it claims is compared with the host memory limit and the file's size,
so a header promising petabytes is refused before anything is allocated. The
header's own length is checked too (at most ``NPY_MAX_HEADER`` bytes, and no
longer than the file) before it is read; a header that does not parse, an
object dtype (never unpickled), a negative or overflowing shape: each is one
ClayoutError naming the file (``not_npy``).

>>> import tempfile, os
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "x.npy")
>>> save_npy(path, np.arange(3, dtype=np.float32))
>>> load_npy(path)
array([0., 1., 2.], dtype=float32)
"""
from __future__ import annotations

import math
import os
import secrets
import stat
import tokenize
import warnings

import numpy as np

from .algebra import dtypes
from .errors import ClayoutError
from .limits import check_host_bytes

_KINDS = ((stat.S_ISDIR, "folder"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO (named pipe)"),
          (stat.S_ISSOCK, "socket"))


def file_kind(mode: int) -> str:
    """What a stat mode is, in words: 'folder', 'FIFO', 'socket', ..."""
    return next((name for test, name in _KINDS if test(mode)), "special file")


def check_output(path: str, inputs=()) -> str:
    """The file ``path`` will be written as (a symlink's target), after
    refusing a special file, a missing folder, a file without write
    permission or an output that is an input."""
    if not path:
        raise ClayoutError("cannot write '': the output path is empty")
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            if os.path.islink(path):   # a dangling link: its target's folder is the missing one
                raise ClayoutError(f"cannot write {path}: it is a symbolic link to "
                                   f"{os.readlink(path)}, whose folder does not exist") from None
            raise ClayoutError(f"cannot write {path}: folder {os.path.dirname(path) or '.'} "
                               "does not exist") from None
        return target
    except OSError as exc:
        raise ClayoutError(f"cannot write {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ClayoutError(f"cannot write {path}: it is a {file_kind(st.st_mode)}, not a regular "
                           "file; clayout writes regular files only (choose another path)")
    if not os.access(target, os.W_OK):   # replacing it would be allowed, but not wanted
        raise ClayoutError(f"cannot write {path}: Permission denied (the file is read-only)")
    for source in inputs:
        try:
            same = os.path.samefile(target, source)
        except OSError:
            continue
        if same:
            raise ClayoutError(f"cannot write {path}: it is the same file as the input "
                               f"{source}; write the output to another path")
    return target


# outputs renamed into place since the CLI's command began (its last words name them)
COMMITTED: list[str] = []


def atomic_write(path: str, write, inputs=(), check=None) -> None:
    """Call ``write(file)`` on a fresh temporary file beside ``path`` (beside
    its target when it is a symlink), then rename it into place; on any
    failure or signal the temporary file is removed and ``path`` is unchanged.
    A file replaced keeps its permission bits. ``check(temporary path)``, when
    given, reads the written file back before the rename (``clayout model
    --verify``): an error there leaves ``path`` as it was too."""
    atomic_write_all([(path, write)], inputs, check)


def atomic_write_all(outputs, inputs=(), check=None) -> None:
    """``atomic_write`` of several files ``[(path, write), ...]``: every one
    is written to its temporary file first and the renames come last, so a
    failure while writing any of them leaves all of the old files as they were
    (``check``, given one file, reads it back before its rename)."""
    targets = [check_output(path, inputs) for path, _ in outputs]
    temps = []
    try:
        for (path, write), target in zip(outputs, targets):
            folder, name = os.path.split(target)
            tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
            # listed before it exists: a signal handled right after the open (between
            # two bytecodes) must find it to remove; a name never made is skipped below
            temps.append(tmp)
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
            except OSError as exc:
                temps.pop()   # not ours: another process's file of that name stays
                raise ClayoutError(f"cannot write {path}: {exc.strerror}") from None
            try:
                with os.fdopen(fd, "wb") as f:
                    _keep_mode(f.fileno(), target)
                    write(f)
            except OSError as exc:
                raise ClayoutError(f"cannot write {path}: {exc.strerror or exc}") from None
        if check is not None:
            check(temps[-1])
        for (path, _), tmp, target in zip(outputs, temps, targets):
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise ClayoutError(f"cannot write {path}: {exc.strerror or exc}") from None
            COMMITTED.append(path)
    except BaseException:
        for tmp in temps:
            try:
                os.unlink(tmp)
            except OSError:   # renamed into place already, or never made
                pass
        raise


def _keep_mode(fd: int, target: str) -> None:
    """The permission bits of the file ``target`` replaces (none when new)."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return
    os.fchmod(fd, mode)


def refuse_special(path: str, mode: int, want: str = "a .npy file") -> None:
    """Refuse an input that is not a regular file (a folder, FIFO, device...),
    saying what to give instead (``want``)."""
    if not stat.S_ISREG(mode):
        raise ClayoutError(f"cannot read {path}: it is a {file_kind(mode)}, not a regular file; "
                           f"give {want}")


def input_size(path: str, want: str) -> int:
    """The size of the input file ``path``, which must be a regular file
    with bytes in it; else one ClayoutError saying what it is and what to
    give (``want``: "an ONNX model")."""
    try:
        st = os.stat(path)
    except OSError:
        raise ClayoutError(f"{path}: no such file") from None
    refuse_special(path, st.st_mode, want)
    if st.st_size == 0:
        raise ClayoutError(f"{path}: empty file, not {want}")
    return st.st_size


# the longest .npy header read (numpy.save writes headers of a few hundred bytes; numpy's
# own reader refuses over 10000 without trusting the file): a longer one is refused unread
NPY_MAX_HEADER = 1 << 16
# numpy's versions and the size of their header-length field
_NPY_VERSIONS = {(1, 0): 2, (2, 0): 4, (3, 0): 4}
_NPY_READERS = {(1, 0): "read_array_header_1_0", (2, 0): "read_array_header_2_0",
                (3, 0): "read_array_header_2_0"}
_INTP_MAX = int(np.iinfo(np.intp).max)
_NPY_MAX_DIMS = 32   # numpy 1.x's limit (numpy 2: 64)
# numpy's messages about a header that parsed, clear enough to pass on
_NUMPY_SAYS = ("Header is not a dictionary", "Header does not contain", "shape is not valid",
               "fortran_order is not", "descr is not a valid")


def not_npy(path: str, why: str) -> ClayoutError:
    """The one error of a malformed .npy file: its name, and what is wrong."""
    return ClayoutError(f"{path}: not a readable .npy array: {why}; a valid .npy file is what "
                        "numpy.save writes")


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _npy_header(path: str, f, size: int):
    """(shape, fortran_order, dtype, data offset) of an open .npy file of
    ``size`` bytes. The header's length is checked against NPY_MAX_HEADER
    and the file's size before it is read; every malformed header, shape or
    dtype is one ClayoutError naming the file (not_npy)."""
    head = f.read(8)
    if len(head) < 8:
        raise not_npy(path, f"the file ends inside its header ({size} bytes)")
    version = (head[6], head[7])
    if version not in _NPY_VERSIONS:
        raise not_npy(path, f"unknown format version {version[0]}.{version[1]} (numpy writes "
                      "1.0, 2.0 and 3.0)")
    field = f.read(_NPY_VERSIONS[version])
    if len(field) < _NPY_VERSIONS[version]:
        raise not_npy(path, f"the file ends inside its header ({size} bytes)")
    length = int.from_bytes(field, "little")
    offset = 8 + len(field) + length
    if length > NPY_MAX_HEADER:
        raise not_npy(path, f"its header claims {length} bytes, over the {NPY_MAX_HEADER} a "
                      ".npy header may have")
    if offset > size:
        raise not_npy(path, f"its header claims {length} bytes, but only "
                      f"{size - 8 - len(field)} bytes follow its length field")
    f.seek(8)   # numpy's reader reads the length field, then the header
    reader = getattr(np.lib.format, _NPY_READERS[version])
    try:
        with warnings.catch_warnings():   # numpy's note on Python 2 headers: read as well
            warnings.simplefilter("ignore")
            shape, fortran, dtype = reader(f, max_header_size=NPY_MAX_HEADER)
    except (SyntaxError, ValueError, TypeError, KeyError, IndexError, OverflowError, EOFError,
            RecursionError, tokenize.TokenError) as exc:
        why = str(exc).splitlines()[0] if str(exc).strip() else ""
        if not why.startswith(_NUMPY_SAYS):   # a parser's words (TokenError, ast nodes...)
            why = "its header is not the dictionary of 'descr', 'fortran_order' and 'shape'"
        raise not_npy(path, _short(why)) from None
    if len(shape) > _NPY_MAX_DIMS:
        raise not_npy(path, f"its header's shape has {len(shape)} dims (at most "
                      f"{_NPY_MAX_DIMS})")
    if any(d < 0 for d in shape):
        raise not_npy(path, f"its header's shape {tuple(shape)} has a negative dim")
    nonzero = math.prod(d for d in shape if d) * max(dtype.itemsize, 1)
    if nonzero > _INTP_MAX:
        raise not_npy(path, f"its header's shape {tuple(shape)} {dtype} overflows: more "
                      f"bytes than an array can index ({_INTP_MAX})")
    if f.tell() != offset:   # numpy read exactly the header it was told of
        raise not_npy(path, "its header's length does not match its text")
    return shape, fortran, dtype, offset


def load_npy(path: str) -> np.ndarray:
    """A .npy array, its header checked against the file's size first; a
    2-byte void array ('V2', how numpy saves ml_dtypes' bfloat16) is read as
    bf16, and a non-native byte order is converted (losslessly) to native."""
    try:  # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        try:  # a socket cannot be opened at all: say what it is
            refuse_special(path, os.stat(path).st_mode)
        except OSError:
            pass
        raise ClayoutError(f"cannot read {path}: {exc.strerror}") from None
    st = os.fstat(fd)
    try:
        refuse_special(path, st.st_mode)
    except ClayoutError:
        os.close(fd)
        raise
    size = st.st_size
    with os.fdopen(fd, "rb") as f:
        if size == 0:
            raise ClayoutError(f"{path}: empty file (0 bytes), not a .npy array")
        if f.read(6) != b"\x93NUMPY":
            raise ClayoutError(f"{path}: not a .npy file (no NUMPY header); give an array "
                               "saved with numpy.save")
        f.seek(0)
        shape, fortran, dtype, offset = _npy_header(path, f, size)
        if dtype.hasobject:   # refused from the header: never unpickled
            raise ClayoutError(f"{path}: holds Python objects (a pickled array); give a "
                               "numeric array")
        need = math.prod(shape) * dtype.itemsize
        check_host_bytes(need, f"{path}: its header's shape {tuple(shape)} {dtype}",
                         "a corrupt or foreign .npy file?")
        have = size - offset
        if need != have:
            raise ClayoutError(f"{path}: header says shape {tuple(shape)} {dtype} "
                               f"({need} bytes of data) but the file holds {have} bytes "
                               f"({'truncated' if have < need else 'extra bytes'}); not a "
                               "valid .npy file")
        try:
            arr = _read_data(f, shape, fortran, dtype)
        except (ValueError, OSError) as exc:
            raise ClayoutError(f"{path}: not a readable .npy array ({exc})") from None
    if arr.dtype == np.dtype("V2"):
        arr = arr.view(dtypes.dtype("bf16").np)
    return dtypes.native(arr)


def _read_data(f, shape, fortran: bool, dtype: np.dtype) -> np.ndarray:
    data = np.fromfile(f, dtype=dtype, count=math.prod(shape))
    if fortran:
        return data.reshape(shape[::-1]).transpose()
    return data.reshape(shape)


def npy_writer(arr: np.ndarray):
    """The ``write(file)`` of ``arr`` as a .npy file, for ``atomic_write``."""
    return lambda f: np.save(f, np.ascontiguousarray(arr), allow_pickle=False)


def save_npy(path: str, arr: np.ndarray, inputs=()) -> None:
    """Write ``arr`` as a .npy file atomically (see ``atomic_write``)."""
    atomic_write(path, npy_writer(arr), inputs)

# -- tiles of an image over a limit, one .npy each -------------------------------------------
def tile_path(path: str, tile) -> str:
    """OUT.npy -> OUT.tile-R-C.npy: the file of the tile at row R, column C."""
    stem = path[:-4] if path.endswith(".npy") else path
    return f"{stem}.tile-{tile.row}-{tile.col}.npy"


def save_tiles(path: str, arrays, plan, inputs=()) -> list[str]:
    """One .npy per tile beside ``path``, all written before any is renamed
    into place: a failure leaves every old tile file as it was."""
    paths = [tile_path(path, tile) for tile in plan.tiles]
    atomic_write_all([(p, npy_writer(arr)) for p, arr in zip(paths, arrays)], inputs)
    return paths


def load_tiles(path: str, plan):
    """The tuple of tiles ``to-image --max-image`` wrote for ``path`` under ``plan``."""
    paths = [tile_path(path, t) for t in plan.tiles]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise ClayoutError(f"the {plan.layout.name} image {plan.image[0]}x{plan.image[1]} over "
                           f"--max-image {plan.max_image[0]},{plan.max_image[1]} comes as "
                           f"{len(paths)} tiles {paths[0]} .. {paths[-1]}; missing: "
                           + ", ".join(missing))
    return tuple(load_npy(p) for p in paths)
