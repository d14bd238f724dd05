"""The model and its runtime: onnxruntime sessions, what a model file needs (read without loading its weights),
the protobuf wire format, strip info, and the environment a model is packed and run in."""
