//! `devmm.IpcDescriptor`: the core's [`devmm::ipc::IpcDescriptor`], with the
//! conversions `multiprocessing` needs to send its file descriptor
//! (`devmm/_ipc.py` registers them with its pickler).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::device::PyDevice;

/// What another process needs to map a buffer of an IPC-enabled pool:
/// made by `DeviceBuffer.ipc_descriptor()`, mapped by
/// `DeviceBuffer.from_ipc_descriptor()` in another process. It holds the
/// pool's file descriptor, so it travels through `multiprocessing` (whose
/// pickler passes the descriptor to the receiving process) and refuses
/// plain `pickle`.
///
/// Examples
/// --------
///
/// A GPU is needed to share memory; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
/// >>> try:
/// ...     mr = CudaAsyncMemoryResource("cuda:0", enable_ipc=True)
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> devmm.IpcDescriptor()  # made by DeviceBuffer.ipc_descriptor() only
/// Traceback (most recent call last):
///     ...
/// TypeError: cannot create 'devmm.IpcDescriptor' instances
/// >>> buf = devmm.DeviceBuffer(1024, mr=mr)  # doctest: +SKIP
/// >>> descriptor = buf.ipc_descriptor()  # keep `buf` until every importer freed  # doctest: +SKIP
/// >>> descriptor.nbytes  # doctest: +SKIP
/// 1024
/// >>> import pickle
/// >>> pickle.dumps(descriptor)  # doctest: +SKIP
/// Traceback (most recent call last):
///     ...
/// TypeError: an IpcDescriptor holds a file descriptor, which plain pickle cannot carry; ...
///
/// ```
#[pyclass(frozen, name = "IpcDescriptor", module = "devmm")]
pub(crate) struct PyIpcDescriptor {
    pub(crate) inner: Mutex<devmm::ipc::IpcDescriptor>,
}

impl PyIpcDescriptor {
    pub(crate) fn lock(&self) -> MutexGuard<'_, devmm::ipc::IpcDescriptor> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl PyIpcDescriptor {
    /// The device the memory is on.
    #[getter]
    fn device(&self) -> PyDevice {
        self.lock().device().into()
    }

    /// The buffer's size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.lock().nbytes()
    }

    /// The id of the process that exported the buffer.
    #[getter]
    fn exporter_pid(&self) -> u32 {
        self.lock().exporter_pid()
    }

    /// The exporter's GPU as the machine names it (its PCI bus id), by
    /// which an importer that numbers its GPUs another way
    /// (`CUDA_VISIBLE_DEVICES`) maps the memory on the right one.
    #[getter]
    fn pci_bus_id(&self) -> Option<String> {
        self.lock().pci_bus_id().map(|bus| bus.to_string())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_closed()
    }

    /// Closes the file descriptor; the descriptor imports nothing after.
    ///
    /// Examples
    /// --------
    ///
    /// A GPU is needed to share memory; the example runs without one too:
    ///
    /// ```python
    /// >>> import devmm
    /// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
    /// >>> try:
    /// ...     mr = CudaAsyncMemoryResource("cuda:0", enable_ipc=True)
    /// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
    /// ...     mr = None
    /// >>> buf = devmm.DeviceBuffer(1024, mr=mr)  # doctest: +SKIP
    /// >>> descriptor = buf.ipc_descriptor()  # doctest: +SKIP
    /// >>> descriptor.close()  # doctest: +SKIP
    /// >>> descriptor.closed  # doctest: +SKIP
    /// True
    ///
    /// ```
    fn close(&self) {
        self.lock().close();
    }

    /// Plain `pickle` cannot carry a file descriptor: send descriptors
    /// through `multiprocessing` (a `Process` argument, a `Queue`, a
    /// `Pipe`), whose pickler passes it to the receiving process.
    fn __reduce__(&self) -> PyResult<Py<PyAny>> {
        Err(PyTypeError::new_err(
            "an IpcDescriptor holds a file descriptor, which plain pickle cannot carry; send it \
             through multiprocessing (a Process argument, a Queue or a Pipe), whose pickler \
             passes the descriptor to the receiving process",
        ))
    }

    /// `(device, nbytes, fd, export_data, exporter_pid, pci_bus_id)` for
    /// `devmm._ipc`'s reducer; the descriptor keeps `fd`.
    fn _parts<'py>(&self, py: Python<'py>) -> PyResult<DescriptorParts<'py>> {
        let this = self.lock();
        let fd = this.handle().ok_or_else(|| {
            PyValueError::new_err(format!(
                "the IPC descriptor of {} bytes on {} is closed; export the buffer again",
                this.nbytes(),
                this.device()
            ))
        })?;
        Ok((
            this.device().to_string(),
            this.nbytes(),
            fd.as_raw_fd(),
            PyBytes::new(py, this.export_data()),
            this.exporter_pid(),
            this.pci_bus_id().map(|bus| bus.to_string()),
        ))
    }

    /// A descriptor from `_parts` received in another process; it takes
    /// ownership of `fd`, a descriptor passed to this process.
    #[staticmethod]
    #[pyo3(signature = (device, nbytes, fd, data, pid, pci_bus_id = None))]
    fn _from_parts(
        device: &str,
        nbytes: usize,
        fd: i32,
        data: &[u8],
        pid: u32,
        pci_bus_id: Option<&str>,
    ) -> PyResult<Self> {
        if fd < 0 {
            return Err(PyValueError::new_err(format!(
                "{fd} is not a file descriptor"
            )));
        }
        // Owned before anything else is checked, so a refusal closes it.
        // SAFETY: the caller (`devmm._ipc`'s rebuild) owns `fd`, detached
        // from multiprocessing's handle, and hands it over here.
        let handle = unsafe { OwnedFd::from_raw_fd(fd) };
        let data: [u8; devmm::ipc::EXPORT_DATA_BYTES] = data.try_into().map_err(|_| {
            PyValueError::new_err(format!(
                "IPC export data is {} bytes, not {}",
                data.len(),
                devmm::ipc::EXPORT_DATA_BYTES
            ))
        })?;
        let device = device
            .parse()
            .map_err(|e: devmm::ParseDeviceError| crate::error::to_py_err(e.into()))?;
        let bus = pci_bus_id.map(parse_bus_id).transpose()?;
        let mut descriptor =
            devmm::ipc::IpcDescriptor::from_parts(device, nbytes, handle, data, pid);
        if let Some(bus) = bus {
            descriptor = descriptor.with_pci_bus_id(bus);
        }
        Ok(PyIpcDescriptor {
            inner: Mutex::new(descriptor),
        })
    }

    fn __repr__(&self) -> String {
        let this = self.lock();
        format!(
            "IpcDescriptor(device={}, nbytes={}, exporter_pid={}{})",
            this.device(),
            this.nbytes(),
            this.exporter_pid(),
            if this.is_closed() { ", closed" } else { "" }
        )
    }
}

/// `IpcDescriptor._from_parts`'s arguments but the descriptor's own:
/// `(device, nbytes, fd, export_data, exporter_pid, pci_bus_id)`.
///
/// Python type: `tuple[str, int, int, bytes, int, str | None]`
type DescriptorParts<'py> = (String, usize, i32, Bound<'py, PyBytes>, u32, Option<String>);

/// `IpcMemHandle._from_parts`'s arguments: `(device, nbytes, handle,
/// exporter_pid, pci_bus_id)`.
///
/// Python type: `tuple[str, int, bytes, int, str | None]`
type HandleParts<'py> = (String, usize, Bound<'py, PyBytes>, u32, Option<String>);

/// A PCI bus id received from another process.
fn parse_bus_id(text: &str) -> PyResult<devmm::ipc::PciBusId> {
    devmm::ipc::PciBusId::new(text).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{text:?} is not a PCI bus id (at most {} ASCII characters, like \"0000:3b:00.0\")",
            devmm::ipc::PciBusId::MAX_LEN
        ))
    })
}

/// The legacy IPC handle of a `cudaMalloc` buffer (`cudaIpcGetMemHandle`):
/// made by `DeviceBuffer.ipc_handle()`, opened by
/// `DeviceBuffer.from_ipc_handle()` in another process. Plain data (the
/// driver's 64 bytes, the device, the size and the exporter's process id):
/// it pickles and travels any way bytes do.
///
/// Examples
/// --------
///
/// ```python
/// >>> import pickle
/// >>> import devmm
/// >>> handle = devmm.IpcMemHandle._from_parts("cuda:0", 1024, bytes(64), 1)
/// >>> handle
/// IpcMemHandle(device=cuda:0, nbytes=1024, exporter_pid=1)
/// >>> pickle.loads(pickle.dumps(handle)) == handle
/// True
/// >>> len(handle.handle)
/// 64
///
/// ```
///
/// With a CUDA device, from `cudaMalloc` memory:
///
/// ```python
/// >>> from devmm.mrs.cuda import CudaRuntimeMemoryResource
/// >>> mr = CudaRuntimeMemoryResource("cuda:0", async_alloc=False)  # doctest: +SKIP
/// >>> handle = devmm.DeviceBuffer(1024, mr=mr).ipc_handle()  # doctest: +SKIP
///
/// ```
#[pyclass(frozen, eq, name = "IpcMemHandle", module = "devmm")]
#[derive(PartialEq)]
pub(crate) struct PyIpcMemHandle {
    pub(crate) inner: devmm::ipc::IpcMemHandle,
}

#[pymethods]
impl PyIpcMemHandle {
    /// The device the memory is on.
    #[getter]
    fn device(&self) -> PyDevice {
        self.inner.device().into()
    }

    /// The buffer's size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// The id of the process that exported the buffer.
    #[getter]
    fn exporter_pid(&self) -> u32 {
        self.inner.exporter_pid()
    }

    /// The exporter's GPU as the machine names it (its PCI bus id), by
    /// which an importer that numbers its GPUs another way
    /// (`CUDA_VISIBLE_DEVICES`) opens the memory on the right one.
    #[getter]
    fn pci_bus_id(&self) -> Option<String> {
        self.inner.pci_bus_id().map(|bus| bus.to_string())
    }

    /// The driver's 64 bytes (`cudaIpcMemHandle_t`).
    #[getter]
    fn handle<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.handle_bytes())
    }

    /// A handle from its parts, as received from another process.
    #[staticmethod]
    #[pyo3(signature = (device, nbytes, handle, pid, pci_bus_id = None))]
    fn _from_parts(
        device: &str,
        nbytes: usize,
        handle: &[u8],
        pid: u32,
        pci_bus_id: Option<&str>,
    ) -> PyResult<Self> {
        let handle: [u8; devmm::ipc::MEM_HANDLE_BYTES] = handle.try_into().map_err(|_| {
            PyValueError::new_err(format!(
                "an IPC memory handle is {} bytes, not {}",
                devmm::ipc::MEM_HANDLE_BYTES,
                handle.len()
            ))
        })?;
        let device = device
            .parse()
            .map_err(|e: devmm::ParseDeviceError| crate::error::to_py_err(e.into()))?;
        let mut inner = devmm::ipc::IpcMemHandle::from_parts(device, nbytes, handle, pid);
        if let Some(bus) = pci_bus_id.map(parse_bus_id).transpose()? {
            inner = inner.with_pci_bus_id(bus);
        }
        Ok(PyIpcMemHandle { inner })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, HandleParts<'py>)> {
        let this = &slf.get().inner;
        let rebuild = slf.get_type().getattr("_from_parts")?;
        Ok((
            rebuild,
            (
                this.device().to_string(),
                this.nbytes(),
                PyBytes::new(slf.py(), this.handle_bytes()),
                this.exporter_pid(),
                this.pci_bus_id().map(|bus| bus.to_string()),
            ),
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "IpcMemHandle(device={}, nbytes={}, exporter_pid={})",
            self.inner.device(),
            self.inner.nbytes(),
            self.inner.exporter_pid()
        )
    }
}
