//! Adaptors: resources that wrap an upstream resource they own and add one
//! behaviour (counting, limiting, logging) while forwarding the rest.
//!
//! They compose in any order over any resource, including
//! `Arc<dyn MemoryResource>`, so the whole chain lives as long as the
//! outermost adaptor and every buffer allocated through it.

/// The probes an adaptor forwards unchanged to the field `$field`:
/// everything but `allocate`, `deallocate` and `available_memory`.
macro_rules! forward_probes {
    ($field:ident) => {
        fn device(&self) -> $crate::Device {
            self.$field.device()
        }

        fn stream_ordered(&self) -> bool {
            self.$field.stream_ordered()
        }

        fn guaranteed_alignment(&self) -> usize {
            self.$field.guaranteed_alignment()
        }

        fn upstream(&self) -> Option<&dyn $crate::MemoryResource> {
            Some(&self.$field)
        }

        fn detects_misuse(&self) -> bool {
            self.$field.detects_misuse()
        }

        fn live_count(&self) -> Option<usize> {
            self.$field.live_count()
        }
    };
}

mod limiting;
mod logging;
mod statistics;

pub use limiting::LimitingAdaptor;
pub use logging::{LOG_TARGET, LoggingAdaptor};
pub use statistics::{Statistics, StatisticsAdaptor};
