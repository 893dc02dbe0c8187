//! Managed memory hints: `devmm.prefetch`, `devmm.advise` and
//! `devmm.PrefetchAdaptor`. The core decides what may be prefetched or
//! advised; the binding converts the arguments.

use std::sync::{Arc, OnceLock};

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

use crate::adaptors::{adapt, upstream_of};
use crate::buffer::PyDeviceBuffer;
use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::expected::expected;
use crate::resource::{built, shipped_new, PyMemoryResource};
use crate::stream::StreamArg;

type Upstream = Arc<dyn devmm::MemoryResource>;

/// An advice: a `devmm.Advice` (an `IntEnum` of the driver's codes), its
/// code (1 to 6), or its name (`"set_read_mostly"`, `"unset_read_mostly"`,
/// `"set_preferred_location"`, `"unset_preferred_location"`,
/// `"set_accessed_by"`, `"unset_accessed_by"`). An unknown one is a
/// `ValueError` listing them.
///
/// Python type: `str | int`
pub(crate) struct AdviceArg(devmm::Advice);

impl<'py> FromPyObject<'_, 'py> for AdviceArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(name) = obj.cast::<PyString>() {
            return name.to_str()?.parse().py().map(AdviceArg);
        }
        if obj.cast::<PyInt>().is_ok() && obj.cast::<PyBool>().is_err() {
            // Codes past i32 are no advice either: the core names the range.
            let code = obj.extract::<i64>().unwrap_or(i64::MAX);
            let code = i32::try_from(code).unwrap_or(i32::MAX);
            return devmm::Advice::try_from(code).py().map(AdviceArg);
        }
        Err(expected(
            "an advice name like \"set_read_mostly\" or its code",
            &obj,
        ))
    }
}

/// The stream a `stream=` argument names for `buffer`: `None` is the
/// buffer's own stream, a sentinel is resolved on the buffer's device.
fn stream_for(
    buffer: &devmm::DeviceBuffer,
    arg: Option<StreamArg>,
) -> PyResult<Option<devmm::Stream>> {
    match arg {
        None => Ok(None),
        Some(StreamArg::Stream(stream)) => Ok(Some(stream)),
        Some(StreamArg::Sentinel(which)) => {
            devmm::runtime::stream_for(buffer.device(), Some(which))
                .py()
                .map(Some)
        }
    }
}

/// Prefetches `buffer`'s managed memory to `device` (a device of its
/// runtime, or `"cpu"` for the host) on `stream` (the buffer's stream when
/// `None`). Memory that is not managed is a `ValueError` naming its
/// resource.
///
/// `buffer` is a `DeviceBuffer`; `device` a `Device` or a string; `stream`
/// a `Stream`, a sentinel or `None`. Returns `None`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> devmm.prefetch(devmm.DeviceBuffer(8), "cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: prefetching needs managed memory, but this 8-byte buffer on cpu:0 comes from MallocMemoryResource(...); ...
/// >>> from devmm.mrs.cuda import CudaManagedMemoryResource
/// >>> managed = devmm.DeviceBuffer(1 << 20, mr=CudaManagedMemoryResource("cuda:0"))  # doctest: +SKIP
/// >>> devmm.prefetch(managed, "cuda:0")  # doctest: +SKIP
///
/// ```
#[pyfunction]
#[pyo3(signature = (buffer, device, stream = None))]
pub(crate) fn prefetch(
    buffer: &Bound<'_, PyDeviceBuffer>,
    device: DeviceArg,
    stream: Option<StreamArg>,
) -> PyResult<()> {
    let buffer = &buffer.get().buffer;
    let stream = stream_for(buffer, stream)?;
    devmm::prefetch(buffer, device.0, stream.as_ref()).py()
}

/// Gives the driver `advice` (a `devmm.Advice`, its code, or its name
/// such as `"set_read_mostly"`) about `buffer`'s managed memory and `device` (a device of its
/// runtime, or `"cpu"`; the read-mostly advice ignores it). Memory that is
/// not managed, or an unknown advice, is a `ValueError`.
///
/// Returns `None`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> devmm.advise(devmm.DeviceBuffer(8), "sideways", "cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: unknown memory advice "sideways"; use one of set_read_mostly, ...
/// >>> from devmm.mrs.cuda import CudaManagedMemoryResource
/// >>> managed = devmm.DeviceBuffer(1 << 20, mr=CudaManagedMemoryResource("cuda:0"))  # doctest: +SKIP
/// >>> devmm.advise(managed, devmm.Advice.SET_READ_MOSTLY, "cuda:0")  # doctest: +SKIP
///
/// ```
#[pyfunction]
pub(crate) fn advise(
    buffer: &Bound<'_, PyDeviceBuffer>,
    advice: AdviceArg,
    device: DeviceArg,
) -> PyResult<()> {
    devmm::advise(&buffer.get().buffer, advice.0, device.0).py()
}

/// Prefetches every allocation of its managed upstream to the upstream's
/// device on the allocation's stream (rmm's `prefetch_resource_adaptor`).
/// An upstream that is not managed memory is a `ValueError`.
///
/// `PrefetchAdaptor(upstream)`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> devmm.PrefetchAdaptor(MallocMemoryResource())
/// Traceback (most recent call last):
///     ...
/// ValueError: PrefetchAdaptor needs managed memory, but its upstream comes from MallocMemoryResource(...); ...
/// >>> from devmm.mrs.cuda import CudaManagedMemoryResource
/// >>> prefetching = devmm.PrefetchAdaptor(CudaManagedMemoryResource("cuda:0"))  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "PrefetchAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyPrefetchAdaptor {
    prefetch: OnceLock<Arc<devmm::PrefetchAdaptor<Upstream>>>,
}

impl PyPrefetchAdaptor {
    fn prefetch(&self) -> PyResult<&devmm::PrefetchAdaptor<Upstream>> {
        built(&self.prefetch).map(|prefetch| &**prefetch)
    }
}

shipped_new!(PyPrefetchAdaptor);

#[pymethods]
impl PyPrefetchAdaptor {
    fn __init__(slf: &Bound<'_, Self>, upstream: &Bound<'_, PyMemoryResource>) -> PyResult<()> {
        let (prefetch, base) = adapt(upstream, |mr| devmm::PrefetchAdaptor::new(mr).py())?;
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().prefetch.set(prefetch);
        Ok(())
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, self.prefetch()?)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let upstream = upstream_of(py, self.prefetch()?)?;
        Ok(format!(
            "PrefetchAdaptor(upstream={})",
            upstream.bind(py).repr()?
        ))
    }
}
