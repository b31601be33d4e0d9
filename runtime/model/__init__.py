"""Offline conversion of a model's weights (``clayout model``): a front end
reads the model's constants into one graph record (runtime.model.graph):
ONNX graphs, folding the chains exporters write (onnx_graph.py), or
TensorFlow Lite flatbuffers, folding DEQUANTIZE and DENSIFY (tflite_file.py,
tflite_graph.py), front_ends.py choosing by the file's first bytes; give
each constant a role and the steps to its logical tensor (roles.py,
tflite_roles.py), quantized ones their integer form and parameters
(quantization.py, integer_weights.py); plan where each goes, one frozen
Placement per tensor, before converting anything (placements.py); then
place each on its image and write one safetensors file with the plan's
manifest (convert.py, manifest.py). The conversion's functions are
importable from here: ``runtime.model.convert_file(...)``; ``plan_file``
alone is ``--dry-run``.
"""
from .convert import (MAX_IMAGE, QUANTIZED_FORMS, check_dtype, convert_file, convert_model,
                      convert_plan, plan, plan_file, read_back, verify, weight_arrays,
                      winograd_layouts, write_plan)
from .front_ends import load
from .placements import ModelPlan, Options, Placement, plan_model, plan_table
from .roles import Weight, logical_weight, onnx_weight, stored_values

__all__ = ["MAX_IMAGE", "QUANTIZED_FORMS", "check_dtype", "convert_file", "convert_model",
           "convert_plan", "plan", "plan_file", "read_back", "verify", "weight_arrays",
           "winograd_layouts", "write_plan", "load", "ModelPlan", "Options", "Placement",
           "plan_model", "plan_table", "Weight", "logical_weight", "onnx_weight",
           "stored_values"]
