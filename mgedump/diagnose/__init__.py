"""Diagnosis: where a model's results go wrong.

- :mod:`.iodump`: every tensor of a run on a test case, written to a folder
  (the format's specification is its docstring), in parts under a memory budget;
- :mod:`.diff`: two runs compared tensor by tensor, and the node that first
  introduces error beyond ``maxerr`` (the first divergence), with its cause
  where it is recognisable (a float16 overflow).
"""
