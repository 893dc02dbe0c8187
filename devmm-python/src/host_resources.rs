//! The host resources of `devmm.mrs.cpu`: libc's allocator, and one that
//! hands out the storage of Python `bytearray` objects.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyDict, PyMemoryView, PyType};

use crate::count::{Alignment, Count};
use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{built, shipped_new, PyMemoryResource};

/// `posix_memalign` / `free` from the C library: the CPU's default resource.
///
/// `MallocMemoryResource(device=None, *, alignment=64)`: `device` is a
/// host device (`"cpu"`, the default) as a `Device` or a string; another is
/// a `ValueError`. `alignment` is a power of two in bytes.
///
/// Examples
/// --------
///
/// ```python
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> mr = MallocMemoryResource(alignment=256)
/// >>> mr, mr.stream_ordered
/// (MallocMemoryResource(device=cpu:0, alignment=256), False)
/// >>> MallocMemoryResource("cuda:0")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: MallocMemoryResource requires a cpu device: ...
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "MallocMemoryResource", module = "devmm.mrs.cpu")]
#[derive(Default)]
pub(crate) struct PyMallocMemoryResource;

shipped_new!(PyMallocMemoryResource);

#[pymethods]
impl PyMallocMemoryResource {
    /// Host memory (`device` is `cpu:0` or `None`) with every pointer
    /// aligned to `alignment` bytes (a power of two).
    #[pyo3(signature = (device = None, *, alignment = Count::of(devmm::mrs::cpu::CPU_DEFAULT_ALIGNMENT)))]
    #[pyo3(text_signature = "($self, device=None, *, alignment=64)")]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        alignment: Count<Alignment>,
    ) -> PyResult<()> {
        host_device("MallocMemoryResource", device)?;
        let mr = devmm::MallocMemoryResource::with_alignment(alignment.get()).py()?;
        PyMemoryResource::install(slf.as_super(), PyMemoryResource::checked(mr))
    }
}

/// Host memory owned by Python `bytearray` objects, so Python's own memory
/// accounting (tracemalloc, `sys.getsizeof`) sees every block. Python
/// reaches it behind a ledger ([`devmm::Checked`]), which refuses misuse
/// before it gets here.
struct BytearrayResource {
    alignment: usize,
    blocks: Arc<Blocks>,
}

/// Each live block's aligned address → its bytearray and the memoryview
/// that pins it: while the view is exported, resizing the bytearray (which
/// would move the storage under the pointer) raises `BufferError`.
#[derive(Default)]
struct Blocks(Mutex<HashMap<usize, Block>>);

/// A block's bytearray and the view that pins it.
type Block = (Py<PyByteArray>, Py<PyMemoryView>);

impl Blocks {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Block>> {
        // Each update is one insert or remove: a panic elsewhere cannot
        // leave the table half-changed, so a poisoned lock is still consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The class of the blocks: a `bytearray` that takes weak references, so
/// a test can watch a block die when it is freed, as the seed's can.
fn block_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    CLASS
        .get_or_try_init(py, || {
            let namespace = PyDict::new(py);
            namespace.set_item("__slots__", ("__weakref__",))?;
            namespace.set_item("__module__", "devmm.mrs.cpu")?;
            let bases = (py.get_type::<PyByteArray>(),);
            let class = py
                .get_type::<PyType>()
                .call1(("_PinnedBytearray", bases, namespace))?;
            Ok::<_, PyErr>(class.unbind())
        })
        .map(|class| class.bind(py))
}

/// A new pinned block of `total` zeroed bytes, and its storage's address.
fn new_block(py: Python<'_>, total: usize) -> PyResult<(Block, usize)> {
    let array = block_class(py)?
        .call1((total,))?
        .cast_into::<PyByteArray>()?;
    let pin = PyMemoryView::from(&array)?;
    let base = array.data() as usize;
    Ok(((array.unbind(), pin.unbind()), base))
}

impl fmt::Debug for BytearrayResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BytearrayMemoryResource(device=cpu:0, alignment={})",
            self.alignment
        )
    }
}

impl devmm::MemoryResource for BytearrayResource {
    fn allocate(&self, nbytes: usize, _stream: &devmm::Stream) -> devmm::Result<devmm::DevicePtr> {
        if nbytes == 0 {
            return Ok(devmm::DevicePtr::NULL);
        }
        let out_of_memory = |detail: String| devmm::Error::OutOfMemory {
            device: devmm::Device::CPU,
            nbytes,
            chain: format!("{self:?}"),
            detail: Some(detail),
            pool: None,
        };
        // Over-allocate so an aligned block of `nbytes` fits inside; a
        // bytearray holds at most isize::MAX bytes.
        let total = nbytes
            .checked_add(self.alignment - 1)
            .filter(|&total| isize::try_from(total).is_ok())
            .ok_or_else(|| {
                out_of_memory("a bytearray holds at most isize::MAX bytes once aligned".into())
            })?;
        let (block, base) = crate::gil::attach(|py| {
            new_block(py, total).map_err(|err| out_of_memory(err.to_string()))
        })
        .ok_or_else(|| out_of_memory("the Python interpreter is shutting down".into()))??;
        let addr = base.next_multiple_of(self.alignment);
        self.blocks.lock().insert(addr, block);
        Ok(devmm::DevicePtr::from_addr(addr))
    }

    unsafe fn deallocate(
        &self,
        ptr: devmm::DevicePtr,
        _nbytes: usize,
        _stream: &devmm::Stream,
    ) -> devmm::Result<()> {
        // The ledger in front checked the pointer. The block is released
        // now, with the GIL (or, during shutdown, when Python next runs).
        let block = self.blocks.lock().remove(&ptr.addr());
        crate::gil::attach(|_| drop(block));
        Ok(())
    }

    fn device(&self) -> devmm::Device {
        devmm::Device::CPU
    }

    /// 1, the seed's: its pointers meet `alignment` by offsetting into
    /// the storage, which the seed does not count as a promise of the
    /// allocator, so `empty` aligns what needs more itself.
    fn guaranteed_alignment(&self) -> usize {
        1
    }

    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        devmm::runtime_for(devmm::Device::CPU)?.memory_info(devmm::Device::CPU)
    }

    fn dereferenceable(&self) -> bool {
        true
    }
}

/// Host memory held by Python `bytearray` objects, with misuse detection
/// (unknown pointers, wrong sizes and double frees raise `ValueError`).
/// Pointers meet the `alignment` asked for, but `guaranteed_alignment()`
/// is 1, as the seed's: the alignment comes from offsetting into the
/// storage, not from the allocator.
///
/// `BytearrayMemoryResource(device=None, *, alignment=1)`: `device` is a
/// host device (`"cpu"`, the default).
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import BytearrayMemoryResource
/// >>> mr = BytearrayMemoryResource(alignment=64)
/// >>> ptr = mr.allocate(10)
/// >>> ptr % 64, mr.guaranteed_alignment()
/// (0, 1)
/// >>> mr.deallocate(ptr, 12)
/// Traceback (most recent call last):
///     ...
/// ValueError: ...
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "BytearrayMemoryResource", module = "devmm.mrs.cpu")]
#[derive(Default)]
pub(crate) struct PyBytearrayMemoryResource {
    blocks: OnceLock<Arc<Blocks>>,
}

shipped_new!(PyBytearrayMemoryResource);

#[pymethods]
impl PyBytearrayMemoryResource {
    /// Host memory (`device` is `cpu:0` or `None`) with every pointer
    /// aligned to `alignment` bytes (a power of two; 1 by default).
    #[pyo3(signature = (device = None, *, alignment = Count::of(1)))]
    #[pyo3(text_signature = "($self, device=None, *, alignment=1)")]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        alignment: Count<Alignment>,
    ) -> PyResult<()> {
        host_device("BytearrayMemoryResource", device)?;
        let alignment = alignment.get();
        devmm::check_alignment("BytearrayMemoryResource", alignment).py()?;
        let blocks = Arc::clone(slf.borrow().blocks.get_or_init(Arc::default));
        let mr = BytearrayResource { alignment, blocks };
        PyMemoryResource::install(slf.as_super(), PyMemoryResource::checked(mr))
    }

    /// The live blocks, as the seed's `_live`: each pointer's bytearray and
    /// the pin that keeps its storage in place (a snapshot). Private, as
    /// the seed's: releasing a pin lets a resize move the storage under
    /// the pointer.
    ///
    /// Python type: `dict[int, tuple[bytearray, memoryview]]`
    #[getter]
    fn _live<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // Copied out first: building the dict may run the collector, which
        // may free a block of this resource (taking the lock again).
        let blocks: Vec<(usize, Block)> = built(&self.blocks)?
            .lock()
            .iter()
            .map(|(&addr, (array, pin))| (addr, (array.clone_ref(py), pin.clone_ref(py))))
            .collect();
        let live = PyDict::new(py);
        for (addr, (array, pin)) in blocks {
            live.set_item(addr, (array, pin))?;
        }
        Ok(live)
    }
}

/// Refuses a `device` argument other than the host's (the core's rule).
pub(crate) fn host_device(resource: &str, device: Option<DeviceArg>) -> PyResult<()> {
    device.map_or(Ok(()), |DeviceArg(device)| {
        devmm::require_host_device(resource, device).py()
    })
}
