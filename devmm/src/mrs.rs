//! Concrete memory resources, grouped by platform (the seed's `devmm.mrs`).

/// Host memory: libc's allocator and the checked heap resource.
pub mod cpu {
    pub use crate::runtime::cpu::memory::{
        CPU_DEFAULT_ALIGNMENT, HeapMemoryResource, MallocMemoryResource,
    };
}
