"""The seed's value types, ``Device`` and ``DType``, as Python dataclasses,
and the dataclass surface of the native layout policies.

They live at the seed's module paths (``devmm._core.device``,
``devmm._core.dtypes``, ``devmm._core.layout``) and are re-exported from
``devmm``. Their rules
(which ordinals and dtype triples are valid, the string forms, item sizes)
are the Rust core's, called through ``devmm._devmm``; these modules only
give the values their Python shape."""
