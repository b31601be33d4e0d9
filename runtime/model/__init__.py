"""Offline conversion of an ONNX model's weights (``clayout model``): read the
graph's constants, folding the chains exporters write (onnx_graph.py); give
each a role and the steps to its logical tensor (roles.py), quantized ones
their integer form and parameters (quantization.py, integer_weights.py);
place each on its image and write one safetensors file with a manifest
(convert.py, manifest.py). The conversion's functions are importable from
here: ``runtime.model.convert_file(...)``.
"""
from .convert import (MAX_IMAGE, QUANTIZED_FORMS, check_dtype, convert_file, convert_model,
                      plan, read_back, verify, weight_arrays, winograd_layouts)
from .onnx_graph import load
from .roles import Weight, logical_weight, onnx_weight, stored_values

__all__ = ["MAX_IMAGE", "QUANTIZED_FORMS", "check_dtype", "convert_file", "convert_model", "plan", "read_back",
           "verify", "weight_arrays", "winograd_layouts", "load", "Weight", "logical_weight", "onnx_weight",
           "stored_values"]
