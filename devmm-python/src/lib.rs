//! The `devmm` Python package's native core (`devmm._devmm`).
//!
//! A PyO3 extension over the Rust core: each module here wraps one core
//! concept for Python and keeps no behaviour of its own beyond argument
//! conversion and the Python-specific bridges (Python resources, the
//! `contextvars` override scope it installs into the core's one registry,
//! Python exceptions carried as core error sources, `logging`, NumPy's
//! allocator, the Python stack of call sites, the `devmm` command).

mod abstract_base;
mod adaptors;
mod buffer;
mod cli;
mod copies;
mod count;
mod device;
mod device_value;
mod dlpack;
mod dtype;
mod error;
mod exchange;
mod exchange_api;
mod expected;
mod gil;
mod gpu_resources;
mod host_resources;
mod interchange;
mod ipc;
mod layout;
mod log_bridge;
mod managed;
mod numpy_handler;
mod out_of_memory;
mod pool_statistics;
mod python_stack;
mod registry;
mod resource;
mod runtime;
mod shipped;
mod statistics;
mod stream;
mod tensor;
mod tensor_to;
mod testing;
mod torch_allocator;
mod trace;
mod tracking;
mod value_class;

use pyo3::prelude::*;
use pyo3::types::PyString;

/// The extension module.
#[pymodule]
fn _devmm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Before `Tensor` and `DeviceBuffer` are made: their class attribute
    // `__dlpack_c_exchange_api__` reads the tables.
    exchange::publish();
    log_bridge::install(py)?;
    python_stack::install();
    registry::install()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DEVMM_RUNTIME", String::from(devmm::runtime::RUNTIME_ENV))?;
    m.add(
        "RuntimeUnavailableError",
        py.get_type::<error::RuntimeUnavailableError>(),
    )?;
    m.add("StreamError", py.get_type::<error::StreamError>())?;

    m.add("DeviceType", device::PyDeviceType::class(py)?)?;
    // What the dataclasses `Device` and `DType` (python/devmm/_core) call.
    for function in [
        wrap_pyfunction!(device::_check_device, m)?,
        wrap_pyfunction!(device::_parse_device, m)?,
        wrap_pyfunction!(device::_device_str, m)?,
        wrap_pyfunction!(dtype::_check_dtype, m)?,
        wrap_pyfunction!(dtype::_parse_dtype, m)?,
        wrap_pyfunction!(dtype::_dtype_from_any, m)?,
        wrap_pyfunction!(dtype::_dtype_itemsize, m)?,
        wrap_pyfunction!(dtype::_dtype_name, m)?,
    ] {
        let name = function.getattr("__name__")?.cast_into::<PyString>()?;
        m.setattr(name, &function)?;
    }

    m.add_class::<stream::PyStreamSentinel>()?;
    m.add_class::<stream::PyStream>()?;
    m.add_class::<stream::PyStreamPool>()?;
    m.add(
        "DEFAULT",
        stream::PyStreamSentinel {
            inner: devmm::DEFAULT,
        },
    )?;
    m.add(
        "LEGACY_DEFAULT",
        stream::PyStreamSentinel {
            inner: devmm::LEGACY_DEFAULT,
        },
    )?;
    m.add(
        "PER_THREAD_DEFAULT",
        stream::PyStreamSentinel {
            inner: devmm::PER_THREAD_DEFAULT,
        },
    )?;

    m.add_class::<layout::PyLayoutPolicy>()?;
    m.add_class::<layout::PyRowMajor>()?;
    m.add_class::<layout::PyColMajor>()?;
    m.add_class::<layout::PyPermuted>()?;
    m.add_class::<layout::PyAligned>()?;
    m.add_class::<layout::PyDeviceOptimal>()?;
    m.add_class::<layout::PyLayout>()?;

    m.add_class::<resource::PyMemoryResource>()?;
    m.add_class::<host_resources::PyMallocMemoryResource>()?;
    m.add_class::<host_resources::PyBytearrayMemoryResource>()?;
    m.add_class::<adaptors::PyStatisticsAdaptor>()?;
    m.add_class::<adaptors::PyLimitingAdaptor>()?;
    m.add_class::<adaptors::PyLoggingAdaptor>()?;
    m.add_class::<adaptors::PyCallbackMemoryResource>()?;
    m.add_class::<out_of_memory::PyFailureCallbackAdaptor>()?;
    m.add_class::<out_of_memory::PyOutOfMemoryHook>()?;
    m.add_function(wrap_pyfunction!(out_of_memory::on_out_of_memory, m)?)?;
    m.add_class::<managed::PyPrefetchAdaptor>()?;
    m.add_function(wrap_pyfunction!(managed::prefetch, m)?)?;
    m.add_function(wrap_pyfunction!(managed::advise, m)?)?;
    m.add_class::<tracking::PyTrackingAdaptor>()?;
    m.add_class::<trace::PyTraceAdaptor>()?;
    m.add_class::<statistics::PyProfilerRecords>()?;
    // Private entry points: attributes, not part of the module's `__all__`.
    m.setattr("_cli_main", wrap_pyfunction!(cli::_cli_main, m)?)?;
    m.setattr(
        "_push_override",
        wrap_pyfunction!(registry::_push_override, m)?,
    )?;
    m.setattr(
        "_pop_override",
        wrap_pyfunction!(registry::_pop_override, m)?,
    )?;
    let check = wrap_pyfunction!(runtime::_check_runtime_plugin, m)?;
    m.setattr("_check_runtime_plugin", check)?;
    let register = wrap_pyfunction!(runtime::_register_external_runtimes, m)?;
    m.setattr("_register_external_runtimes", register)?;
    let report = wrap_pyfunction!(tracking::_print_leak_reports, m)?;
    m.setattr("_print_leak_reports", &report)?;
    py.import("atexit")?.call_method1("register", (report,))?;
    m.add_class::<numpy_handler::PyNumpyHandlerMemoryResource>()?;
    m.add_class::<gpu_resources::PyCudaRuntimeMemoryResource>()?;
    m.add_class::<gpu_resources::PyCudaPinnedMemoryResource>()?;
    m.add_class::<gpu_resources::PyCudaManagedMemoryResource>()?;
    m.add_class::<gpu_resources::PyHipRuntimeMemoryResource>()?;
    m.add_class::<gpu_resources::PyHipPinnedMemoryResource>()?;
    m.add_class::<gpu_resources::PyHipManagedMemoryResource>()?;
    m.add_class::<gpu_resources::PyCudaAsyncMemoryResource>()?;
    m.add_class::<gpu_resources::PyHipAsyncMemoryResource>()?;
    // NEP 49's primitives, for devmm.integrations.numpy: private attributes.
    for nep49 in [
        wrap_pyfunction!(numpy_handler::_numpy_handler_over, m)?,
        wrap_pyfunction!(numpy_handler::_set_numpy_handler, m)?,
        wrap_pyfunction!(numpy_handler::_numpy_handler, m)?,
    ] {
        m.setattr(nep49.getattr("__name__")?.cast_into::<PyString>()?, &nep49)?;
    }
    // The size check of the resources written in Python (devmm.mrs.cuda's).
    m.setattr("_check_nbytes", wrap_pyfunction!(count::_check_nbytes, m)?)?;
    m.setattr(
        "_frees_nothing",
        wrap_pyfunction!(resource::_frees_nothing, m)?,
    )?;

    m.add(
        "TORCH_MALLOC_SYMBOL",
        String::from(torch_allocator::MALLOC_SYMBOL),
    )?;
    m.add(
        "TORCH_POOL_MALLOC_SYMBOL",
        String::from(torch_allocator::POOL_MALLOC_SYMBOL),
    )?;
    m.add(
        "TORCH_FREE_SYMBOL",
        String::from(torch_allocator::FREE_SYMBOL),
    )?;
    m.add(
        "TORCH_POOL_FREE_SYMBOL",
        String::from(torch_allocator::POOL_FREE_SYMBOL),
    )?;
    m.add(
        "TORCH_RECORD_STREAM_SYMBOL",
        String::from(torch_allocator::RECORD_STREAM_SYMBOL),
    )?;
    m.add_function(wrap_pyfunction!(torch_allocator::torch_route, m)?)?;
    m.add_function(wrap_pyfunction!(torch_allocator::torch_unroute, m)?)?;
    m.add_function(wrap_pyfunction!(torch_allocator::torch_serve, m)?)?;
    m.add_function(wrap_pyfunction!(torch_allocator::torch_statistics, m)?)?;
    m.add_function(wrap_pyfunction!(torch_allocator::torch_reset_peak, m)?)?;
    m.add_function(wrap_pyfunction!(torch_allocator::torch_pool_statistics, m)?)?;

    m.add_class::<registry::PyUsingMemoryResource>()?;
    m.add_function(wrap_pyfunction!(registry::get_current_memory_resource, m)?)?;
    m.add_function(wrap_pyfunction!(registry::set_current_memory_resource, m)?)?;

    m.add_class::<runtime::PyDeviceRuntime>()?;
    m.add_class::<runtime::PyActivation>()?;
    m.add_function(wrap_pyfunction!(runtime::runtime_for, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::runtime_names, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::available_runtimes, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::default_device, m)?)?;

    m.add_class::<buffer::PyDeviceBuffer>()?;
    m.add_class::<ipc::PyIpcDescriptor>()?;
    m.add_class::<ipc::PyIpcMemHandle>()?;
    m.add_class::<tensor::PyTensor>()?;
    // PyO3 0.27 gives a class no `tp_finalize`: setting `__del__` on the
    // type again makes CPython install its slot, so the collector runs it
    // before it breaks a cycle of a Python resource and its buffers.
    for class in [
        py.get_type::<buffer::PyDeviceBuffer>(),
        py.get_type::<tensor::PyTensor>(),
    ] {
        class.setattr("__del__", class.getattr("__del__")?)?;
    }
    m.add_function(wrap_pyfunction!(tensor::empty, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::empty_like, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(copies::copy_host_to_ptr, m)?)?;
    m.add_function(wrap_pyfunction!(copies::copy_ptr_to_host, m)?)?;
    m.add_function(wrap_pyfunction!(copies::copy_device_to_ptr, m)?)?;
    m.add_function(wrap_pyfunction!(copies::foreign_memory, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::wait_for_allocation, m)?)?;

    m.add_class::<testing::PyRecordingMemoryResource>()?;
    m.add_class::<testing::PyRecordedCalls>()?;
    m.add(
        "RecordingMisuseError",
        py.get_type::<error::RecordingMisuseError>(),
    )?;
    m.add_function(wrap_pyfunction!(testing::mr_conformance, m)?)?;
    // For the pytest mixin devmm.testing._mr_conformance: a private attribute.
    m.setattr("_mr_checks", wrap_pyfunction!(testing::_mr_checks, m)?)?;
    m.add_function(wrap_pyfunction!(testing::dlpack_conformance, m)?)?;
    Ok(())
}
