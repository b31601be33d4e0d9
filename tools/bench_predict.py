"""The access model's prediction beside what a benchmark measures
(runtime/opencl/access.py): for a move, what fraction of the device's own
copy speed a GPU record's plan of it should reach, from the sectors its
loads and stores move (``Figures.of_copy``).

The record is the device's own where the device is one of them (an H100 or
H200 lent), else the H100's: on a CPU device the figure is what the kernels
would do on that GPU, printed beside the CPU's measurement, not a forecast of
it. The traced kernels run on the bench's own device.
"""
from __future__ import annotations

from runtime.opencl import gpus
from runtime.opencl.access import model_move


def record_for(device) -> gpus.Gpu:
    """The GPU record of ``device`` (a runtime.opencl.device.Device), else the H100's."""
    name = device.name.lower()
    return next((r for key, r in gpus.GPUS.items() if key in name and key != "gpu"),
                gpus.GPUS["h100"])


def predicted(src, dst, device, read: int, written: int) -> tuple[str, float]:
    """(the record's name, the fraction of the device copy) the model
    predicts for ``src`` -> ``dst``, reading and writing these bytes."""
    record = record_for(device)
    figures = model_move(src, dst, record, device).figures
    return record.name, figures.of_copy(read, written)
