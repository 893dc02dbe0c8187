#![doc = include_str!("../../docs/api.md")]

mod adaptor;
mod buffer;
mod callback;
mod device;
pub mod dlpack;
mod dtype;
mod error;
mod layout;
mod ledger;
pub mod mrs;
mod ptr;
mod registry;
mod resource;
pub mod runtime;
mod size;
mod stream;
mod tensor;
pub mod testing;

pub use adaptor::{LOG_TARGET, LimitingAdaptor, LoggingAdaptor, Statistics, StatisticsAdaptor};
pub use buffer::DeviceBuffer;
pub use callback::CallbackMemoryResource;
pub use device::{Device, DeviceType};
pub use dtype::{DType, DTypeCode, Element};
pub use error::{Error, MisuseKind, Result};
pub use layout::{
    Aligned, ColMajor, DeviceOptimal, Dims, Layout, LayoutPlan, LayoutPolicy, LayoutRuleError,
    Permuted, RowMajor, StaticLayout, StaticPlan,
};
pub use ledger::Ledger;
pub use mrs::cpu::{HeapMemoryResource, MallocMemoryResource};
pub use ptr::DevicePtr;
pub use registry::{
    ResourceGuard, get_current_memory_resource, set_current_memory_resource, using_memory_resource,
};
pub use resource::{MemoryInfo, MemoryResource, resource_chain};
pub use runtime::{
    ActivationGuard, DeviceRuntime, RuntimeRegistration, RuntimeSelector, available_runtimes,
    default_device, register_runtime, runtime_for, runtime_names,
};
pub use size::SizeOverflow;
pub use stream::{DEFAULT, LEGACY_DEFAULT, PER_THREAD_DEFAULT, Stream, StreamOps, StreamSentinel};
pub use tensor::{EmptyOptions, Tensor, empty, empty_like};

/// The README's examples, run as doctests so the front page cannot drift.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use devmm_macros::{Element, layout, memory_resource};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
