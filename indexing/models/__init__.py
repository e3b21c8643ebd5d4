"""Embedding models: the registry, the torch and ONNX encoders, the e5 conversion and export."""
