"""The ONNX front end: ``reader`` (the file, its tensors and attributes),
``constants`` (every constant of the graphs, constant subgraphs evaluated by
``fold``), ``roles`` (what each ONNX operator makes of its constant inputs)."""
