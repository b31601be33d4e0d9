"""Offline conversion of a model's weights (``clayout model``), by what each
part reads:

* ``onnx/`` and ``tflite/``: the two front ends, each reading its format into
  one format-neutral graph record of constants and the operators that read
  them (runtime.model.graph), constant subgraphs evaluated on the host, and
  each format's role table; ``front_ends.py`` chooses by the file's first
  bytes; a large tensor stays in its file until converted (a FileSpan,
  ``tensor_data.py``; a large inline .onnx read without its tensors:
  ``onnx/inline.py``);
* ``weights.py``: what each constant becomes (a Weight holding its source
  Tensor, runtime.model.tensor), quantized ones with their integer form and
  parameters (``integer_weights.py``, ``quantization.py``), Winograd filters
  (``winograd_weights.py``);
* ``plan.py``: the options and one frozen Placement per tensor, settled
  before converting anything (what ``--dry-run`` prints);
* ``apply.py``: the plan carried out, tensor by tensor; ``stream.py``: the
  file written as a stream, one weight in memory at a time, with its
  manifest (``manifest.py``), laid out first (``safetensors_file.py``), and
  verified; ``left_out.py``: what ``--images-only`` would leave out.

The conversion's functions are importable from here:
``runtime.model.convert_file(...)``; ``plan_file`` alone is ``--dry-run``.
"""
from .apply import (MAX_IMAGE, QUANTIZED_FORMS, check_dtype, convert_model, convert_plan,
                    plan, plan_file, read_back, verify, weight_arrays, winograd_layouts)
from .front_ends import load
from .plan import ModelPlan, Options, Placement, plan_model, plan_table
from .stream import convert_file, peak_estimate, write_plan
from .tensor import Reshape, Tensor, Transpose, logical_weight, source_weight
from .weights import Weight, stored_values

__all__ = ["MAX_IMAGE", "QUANTIZED_FORMS", "check_dtype", "convert_file", "convert_model",
           "convert_plan", "plan", "plan_file", "read_back", "verify", "weight_arrays",
           "winograd_layouts", "write_plan", "load", "ModelPlan", "Options", "Placement",
           "plan_model", "plan_table", "peak_estimate", "Reshape", "Tensor", "Transpose", "Weight",
           "logical_weight", "source_weight", "stored_values"]
