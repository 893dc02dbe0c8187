// `docs/api.md` in this crate is a link to the repository's `docs/api.md`:
// one file, doctested here, that `cargo package` copies into the crate.
#![doc = include_str!("../docs/api.md")]

mod adaptor;
mod array_interface;
mod buffer;
mod callback;
pub mod callsite;
mod copy;
mod copy_kind;
mod defaults;
mod device;
pub mod dlpack;
mod dtype;
mod error;
mod foreign;
mod host_view;
pub mod interop;
pub mod ipc;
mod ipc_data;
mod layout;
mod ledger;
mod managed;
mod managed_memory;
pub mod mrs;
mod origin;
mod out_of_memory;
mod pool_statistics;
mod ptr;
mod registry;
mod resource;
pub mod runtime;
mod shipped;
mod size;
mod stackwalk;
pub mod statistics;
mod stream;
mod stream_pool;
mod tensor;
pub mod testing;
pub mod trace;

pub use adaptor::{
    DEFAULT_TRACKING_DEPTH, FailureCallbackAdaptor, LEAK_REPORT_ENV, LOG_TARGET, LeakReport,
    LimitingAdaptor, LiveAllocation, LogRecord, LogValue, LoggingAdaptor, PrefetchAdaptor,
    SiteGroup, Statistics, StatisticsAdaptor, TraceAdaptor, TrackingAdaptor, print_leak_reports,
};
pub use array_interface::{ArrayInterface, ArrayInterfaceKind};
pub use buffer::DeviceBuffer;
pub use callback::CallbackMemoryResource;
pub use copy::{copy_device_to_ptr, copy_host_to_ptr, copy_ptr_to_host};
pub use copy_kind::CopyKind;
pub use device::{Device, DeviceType, ParseDeviceError};
pub use dtype::{DType, DTypeCode, Element};
pub use error::{CallbackError, DriverError, Error, ErrorKind, MisuseKind, Result};
pub use foreign::{ForeignMemoryResource, ForeignStatistics, foreign_memory};
pub use host_view::{HostSlice, HostSliceMut};
pub use layout::{
    Aligned, ColMajor, DeviceOptimal, Dims, Layout, LayoutPlan, LayoutPolicy, LayoutRuleError,
    Permuted, RowMajor, StaticLayout, StaticPlan,
};
pub use ledger::{Checked, Ledger, WhileLive, frees_nothing};
pub use managed::{advise, prefetch};
pub use managed_memory::{Advice, ManagedMemory};
pub use mrs::cpu::{HeapMemoryResource, MallocMemoryResource, require_host_device};
pub use origin::WithOrigin;
pub use out_of_memory::{
    OutOfMemoryFigures, OutOfMemoryHook, observe_allocation, on_out_of_memory,
};
pub use pool_statistics::PoolStatistics;
pub use ptr::DevicePtr;
pub use registry::{
    OverrideEntry, OverrideScope, Overrides, ResourceGuard, enter_override, exit_override,
    exit_override_of, get_current_memory_resource, pop_override, push_override,
    set_current_memory_resource, set_override_scope, using_memory_resource,
};
pub use resource::{
    MemoryInfo, MemoryResource, callback_of_chain, check_alignment, check_dereferenceable,
    device_for, pool_of_chain, resource_chain, wait_for_allocation,
};
pub use runtime::{
    ActivationGuard, DeviceRuntime, RuntimeRegistration, RuntimeSelector, available_runtimes,
    default_device, register_runtime, runtime_for, runtime_names,
};
pub use shipped::ShippedResource;
pub use size::SizeOverflow;
pub use stream::{
    DEFAULT, LEGACY_DEFAULT, PER_THREAD_DEFAULT, Stream, StreamFlags, StreamOps, StreamRuntime,
    StreamSentinel,
};
pub use stream_pool::StreamPool;
pub use tensor::{EmptyOptions, Tensor, empty, empty_like};

/// The README's examples, run as doctests so the front page cannot drift.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The crate's own README (crates.io's page), run as doctests too.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct CrateReadmeDoctests;

pub use devmm_macros::{Element, layout, memory_resource};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
