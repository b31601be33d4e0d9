"""``clayout model``'s file written as a stream: one weight in memory at a time.

The plan (runtime.model.plan) says every stored tensor's key, dtype and
shape, so the safetensors header is laid out first
(runtime.model.safetensors_file), and then each tensor is read from the
model (a FileSpan is read only now: runtime.model.tensor_data), converted
(runtime.model.apply.convert_tensor), handed to a writer thread and let go,
in the file's order; while one image is written the next is converted, and
no more: at any moment the process holds the image being written, and the
source, logical copy and image of the tensor being converted, beside the
values held since reading (small constants, what folding made). The file is
written to a temporary file and renamed into place (runtime.fileio), never
half-written; ``--verify`` reads it back from that temporary file one tensor
at a time before the rename.

:func:`peak_estimate` is that rule as a number, for ``--dry-run``.

Example::

    >>> plan, sources = plan_file("m.onnx")                          # doctest: +SKIP
    >>> write_plan(plan, sources, "w.safetensors", verify_all=True)  # doctest: +SKIP
    ({'format': 'clayout-model/7', ...}, 11)
"""
from __future__ import annotations

import json
import queue
import resource
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import manifest as mf
from ..algebra import dtypes
from ..errors import ClayoutError
from .. import engine as engines
from ..fileio import atomic_write, check_output
from .apply import convert_tensor, plan_file, verify
from .plan import MAX_IMAGE, Options
from .graph import printable
from .safetensors_file import NAMES, FileLayout, layout, read_slot
from .tensor_data import FileSpan, held_bytes, values

CHUNK = 8 << 20   # bytes written at a time: Ctrl-C or SIGTERM stops a large write between them
PREFETCH_BYTES = 256 << 20   # the next tensor is read during this one's conversion up to this


def file_layout(plan, manifest: dict) -> FileLayout:
    """The file of ``plan``: every stored key with its dtype and shape, and
    the manifest in the metadata under ``clayout``."""
    tensors = [(key, dtypes.dtype(p.dtype).np, shape) for p in plan.stored
               for key, shape in zip(mf.keys_of(p), mf.array_shapes(p))]
    return layout(tensors, {mf.MANIFEST_KEY: json.dumps(manifest)})


class _Writer:
    """A thread writing one array at a time to ``f``; :meth:`put` hands it
    the next once it has written the last, so at most one image waits."""

    def __init__(self, f):
        self.f, self.failed, self.stop = f, None, False
        self.queue: queue.Queue = queue.Queue(maxsize=1)
        self.thread = threading.Thread(target=self._run, name="clayout model writer",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (array := self.queue.get()) is not None:
            try:
                if self.failed is None:
                    self._write(array)
            except BaseException as exc:  # noqa: BLE001 - raised again on the main thread
                self.failed = exc
            finally:
                del array   # before task_done: the next put may come at once
                self.queue.task_done()
        self.queue.task_done()

    def _write(self, array) -> None:
        data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
        for start in range(0, len(data), CHUNK):
            if self.stop:
                return
            self.f.write(data[start:start + CHUNK])

    def put(self, array) -> None:
        self.queue.join()        # the last one written: its memory is free
        self._raise()
        self.queue.put(array)

    def _raise(self) -> None:
        if self.failed is not None:
            raise self.failed

    def close(self, ok: bool) -> None:
        """Wait for the last array (``ok``) or stop after the current chunk."""
        self.stop = not ok
        self.queue.put(None)
        self.thread.join()
        if ok:
            self._raise()


class _ReadAhead:
    """Reads the next tensor's FileSpan on a thread of its own while the
    current one converts, when it is at most PREFETCH_BYTES (a larger one is
    read when its turn comes: memory before speed)."""

    def __init__(self, sources):
        self.sources, self.pending = sources, None
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="clayout model reader")

    def ahead(self, name: str | None) -> None:
        source = self.sources.get(name) if name is not None else None
        if isinstance(source, FileSpan) and source.nbytes <= PREFETCH_BYTES:
            self.pending = (name, self.pool.submit(source.read))

    def get(self, name: str):
        if self.pending is not None and self.pending[0] == name:
            future, self.pending = self.pending[1], None
            return future.result()
        return values(self.sources[name])

    def close(self) -> None:
        self.pending = None
        self.pool.shutdown(wait=True)


def _arrays_in_file_order(plan, sources, file: FileLayout, progress):
    """Each slot's array, converted when its tensor's first key comes (the
    other tiles of a weight wait for theirs); each tensor's source is read
    just before (the next one's meanwhile) and let go just after."""
    owner = {key: p for p in plan.stored for key in mf.keys_of(p)}
    order = list({owner[s.key].name: owner[s.key] for s in file.slots}.values())
    waiting: dict[str, np.ndarray] = {}
    reader = _ReadAhead(sources)
    try:
        yield from _converted(plan, file, owner, order, reader, waiting, progress)
    finally:
        reader.close()


def _converted(plan, file, owner, order, reader, waiting, progress):
    done, done_bytes, total = 0, 0, len(order)
    for slot in file.slots:
        if slot.key not in waiting:
            p = owner[slot.key]
            source = reader.get(p.name)
            reader.ahead(order[done + 1].name if done + 1 < total else None)
            arrays = convert_tensor(plan, p, source)
            del source
            waiting.update(zip(mf.keys_of(p), arrays))
            del arrays
            done, done_bytes = done + 1, done_bytes + p.bytes
            if progress:
                progress(done, total, done_bytes)
        array = waiting.pop(slot.key)
        if array.dtype != slot.dtype or tuple(array.shape) != slot.shape:
            raise AssertionError(f"tensor {printable(slot.key)!r}: {array.dtype} {array.shape}, "
                                 f"its slot says {slot.dtype} {slot.shape}")
        yield array
        del array


class _FileTensors(Mapping):
    """The tensors of a written file, each read when asked for (no cache)."""

    def __init__(self, fd: int, file: FileLayout):
        self.fd, self.header = fd, len(file.header)
        self.slots = {s.key: s for s in file.slots}

    def __getitem__(self, key):
        return read_slot(self.fd, self.header, self.slots[key])

    def __contains__(self, key) -> bool:
        return key in self.slots

    def __iter__(self):
        return iter(self.slots)

    def __len__(self):
        return len(self.slots)


class _Originals(Mapping):
    """The arrays the stored tensors hold, a FileSpan read when asked for."""

    def __init__(self, sources):
        self.sources = sources

    def __getitem__(self, name):
        return values(self.sources[name])

    def __iter__(self):
        return iter(self.sources)

    def __len__(self):
        return len(self.sources)


def verify_file(path: str, plan, sources, file: FileLayout, output: str) -> int:
    """``--verify`` of the written file at ``path`` (the temporary one):
    safetensors' own reader finds the keys, dtypes, shapes and manifest the
    plan laid out; the accounting adds up; every tensor, read back one at a
    time, holds what it should (runtime.model.apply.verify). Returns the
    number of tensors verified; any difference is a ClayoutError."""
    from safetensors import safe_open
    with safe_open(path, framework="numpy") as f:
        again = mf.upgrade(json.loads((f.metadata() or {})[mf.MANIFEST_KEY]))
        found = {key: (f.get_slice(key).get_dtype(), tuple(f.get_slice(key).get_shape()))
                 for key in f.keys()}
    want = {s.key: (NAMES[s.dtype.name], s.shape) for s in file.slots}
    if found != want:
        raise ClayoutError(f"--verify: the written file's tensors are not those planned; "
                           f"{output} not written")
    problems = mf.accounting_problems(again)
    if problems:
        raise ClayoutError(f"--verify: the manifest's accounting of the float constants: "
                           f"{'; '.join(problems[:4])}; {output} not written")
    with open(path, "rb") as f:
        bad = verify(_FileTensors(f.fileno(), file), again, _Originals(sources),
                     engine=plan.options.engine)
    if bad:
        how = ("bit for bit (Winograd images: within their transform's inverse_bound)"
               if any("transform" in e for e in again["tensors"]) else "bit for bit")
        raise ClayoutError(f"--verify: {len(bad)} of {len(again['tensors'])} tensors do "
                           f"not read back {how}: "
                           + ", ".join(repr(printable(n)) for n in bad[:8])
                           + (" ..." if len(bad) > 8 else "") + f"; {output} not written")
    return len(again["tensors"])


def convert_file(path: str, output: str, dtype=None, max_image=MAX_IMAGE, engine=None,
                 keep_buffers=True, verify_all=False, progress=None, tiles=True,
                 quantized="fold", winograd=None):
    """``clayout model``: convert ``path`` and write ``output`` atomically
    (:func:`runtime.model.apply.plan_file`, then :func:`write_plan`; the
    options as in runtime.model.apply.convert_model). Returns (manifest,
    number verified or None)."""
    options = Options(dtype, max_image, engines.get(engine), keep_buffers, tiles, quantized,
                      winograd)
    check_output(output, [path])   # before the work: a special file, a missing folder, the input
    the_plan, sources = plan_file(path, options)
    return write_plan(the_plan, sources, output, verify_all, progress, inputs=[path])


def write_plan(plan, sources: dict, output: str, verify_all=False, progress=None, inputs=()):
    """Convert ``plan`` and write ``output`` atomically: the images and the
    plan's manifest, streamed one tensor at a time (the header laid out from
    the plan, then each tensor converted, written and let go).

    With ``verify_all`` every tensor of the written file is read back (images
    with ``from_image``) and compared with what it holds before the file is
    renamed into place (bit for bit; Winograd images within their bound).
    Returns (manifest, number verified or None)."""
    manifest = plan.manifest()
    file = file_layout(plan, manifest)
    verified = []

    def write(f) -> None:
        f.write(file.header)
        writer, ok = _Writer(f), False
        try:
            for array in _arrays_in_file_order(plan, sources, file, progress):
                writer.put(array)
                del array
            ok = True
        finally:
            writer.close(ok)

    def check(path: str) -> None:
        if verify_all:
            verified.append(verify_file(path, plan, sources, file, output))

    atomic_write(output, write, inputs, check=check)
    return manifest, verified[0] if verified else None


def resident_bytes() -> tuple[int, int]:
    """(resident now, peak resident so far) of this process, in bytes:
    Linux's VmRSS and VmHWM (not ru_maxrss, which counts the parent's memory
    at the fork); elsewhere ru_maxrss for both."""
    found = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    found[line[:5]] = int(line.split()[1]) * 1024
        return found["VmRSS"], found["VmHWM"]
    except (OSError, ValueError, KeyError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return peak, peak


def peak_estimate(plan, sources) -> dict:
    """The peak memory converting ``plan`` will take, in bytes, by the rule
    of this module, from this process after planning (``now``: the
    interpreter, the modules, and ``held``, the sources already in memory):
    ``largest`` (the most one tensor's conversion holds: its source read from
    the file, its logical copy when a step moves elements, its image),
    ``writing`` (the largest image, written meanwhile), ``ahead`` (the
    largest tensor read ahead meanwhile, at most PREFETCH_BYTES), and
    ``total``: now + largest + writing + ahead, or the peak planning already
    reached if higher."""
    held = held_bytes(sources[p.name] for p in plan.stored)
    largest = writing = ahead = 0
    for p in plan.stored:
        source = sources[p.name]
        read = int(source.nbytes) if isinstance(source, FileSpan) else 0
        copy = int(source.nbytes) if p.steps and p.kind != "buffer" else 0
        largest = max(largest, read + copy + p.bytes)
        writing = max(writing, p.bytes)
        if read <= PREFETCH_BYTES:
            ahead = max(ahead, read)
    now, peak = resident_bytes()
    return {"now": now, "held": held, "largest": largest, "writing": writing, "ahead": ahead,
            "total": max(peak, now + largest + writing + ahead)}
