"""Arrows that provide a devmm resource to another library's allocator.
Each is an explicit ``install(mr)`` returning an installer whose
``uninstall()`` (or the end of its ``with`` block) restores the prior state;
importing never changes anything."""
