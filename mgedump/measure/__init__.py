"""Measuring: the AssertEqual metric (docs/assertion.md), timing runs, and onnxruntime's profile per operator."""
