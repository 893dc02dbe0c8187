#![doc = include_str!("../../docs/api.md")]

mod adaptor;
mod buffer;
mod callback;
mod device;
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

pub use adaptor::{LimitingAdaptor, LoggingAdaptor, Statistics, StatisticsAdaptor, LOG_TARGET};
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
    get_current_memory_resource, set_current_memory_resource, using_memory_resource, ResourceGuard,
};
pub use resource::{resource_chain, MemoryInfo, MemoryResource};
pub use runtime::{
    default_device, register_runtime, runtime_for, runtime_names, ActivationGuard, DeviceRuntime,
    RuntimeRegistration, RuntimeSelector,
};
pub use size::SizeOverflow;
pub use stream::{Stream, StreamOps, StreamSentinel, DEFAULT, LEGACY_DEFAULT, PER_THREAD_DEFAULT};
pub use tensor::{empty, empty_like, EmptyOptions, Tensor};

pub use devmm_macros::{layout, memory_resource, Element};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
