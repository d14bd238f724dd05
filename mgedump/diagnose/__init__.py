"""Diagnosis: where a model's results go wrong.

- :mod:`.iodump`: the io dump format: every tensor of a run on a test case,
  written to a folder, read and checked (the format's specification is its docstring);
- :mod:`.in_parts`: a model run with every tensor exposed, in parts under a memory budget;
- :mod:`.exposed`: a model file run that way on test cases, into an io dump or memory;
- :mod:`.divergence`: two runs compared tensor by tensor, and the node that first
  introduces error beyond ``maxerr`` (the first divergence), with its cause
  where it is recognisable (a float16 overflow);
- :mod:`.locate`: two models compared that way on the same test cases.
"""
