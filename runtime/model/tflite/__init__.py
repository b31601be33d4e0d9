"""The TensorFlow Lite front end: ``flatbuffer`` (a bounded reader), ``schema``
(facts of schema.fbs), ``file`` (the model's records), ``sparse`` (densify),
``constants`` (every constant, constant operators evaluated), ``roles`` (what
each operator makes of its constant inputs)."""
