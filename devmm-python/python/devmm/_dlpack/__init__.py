"""The DLPack layer at the seed's module path: ``_abi``, ctypes mirrors of
``dlpack.h`` for reading a capsule from Python. The export itself is the
Rust core's (``devmm::dlpack``)."""
