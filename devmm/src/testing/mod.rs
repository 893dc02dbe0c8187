//! The testing kit devmm's own suites are built on, public so that authors
//! of third-party resources and runtimes get the same guarantees.
//!
//! - [`mr_conformance`] runs the memory-resource contract against fresh
//!   resources from a factory and reports each check by name.
//! - [`dlpack_conformance`] runs the DLPack producer contract for tensors
//!   from a device's current resource, never reading or writing the memory.
//! - [`RecordingMemoryResource`] is an allocator double: deterministic fake
//!   pointers, a verbatim call log, live-allocation tracking and misuse
//!   detection.
//! - [`ReportedMisuse`] lets the suite test a resource that refuses misuse
//!   in its own terms (a Python `ValueError`) on that contract.
//!
//! ```
//! use devmm::testing::{dlpack_conformance, mr_conformance, MrConformanceOptions};
//! use devmm::{Device, MallocMemoryResource};
//! mr_conformance(|| Ok(MallocMemoryResource::new()), &MrConformanceOptions::new()).into_result()?;
//! dlpack_conformance(Device::CPU).into_result()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod dlpack;
mod mr;
mod recording;
mod report;
mod reported_misuse;

pub use dlpack::dlpack_conformance;
pub use mr::{MrConformanceOptions, mr_conformance};
pub use recording::{
    RECORDING_DEFAULT_ALIGNMENT, RECORDING_DEFAULT_CAPACITY, RecordedCall, RecordingMemoryResource,
};
pub use report::{CheckOutcome, CheckStatus, ConformanceFailure, ConformanceReport};
pub use reported_misuse::ReportedMisuse;
