"""Reference compute on clayout layouts: convolution, fully connected,
pooling, batch normalization, add and relu (ops.py), each one kernel of
cl_kernels/compute.cl written once against accessors and compiled with the
accessors of whatever layouts its inputs and output have; and a runner that
takes a small ONNX CNN through them, weights placed by ``clayout model``
(network.py). Correct and plain, not fast: what an engine's own kernels
are checked against."""
