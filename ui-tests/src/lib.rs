//! trybuild tests of the devmm macros live in `tests/`.
