//! The host resources of `devmm.mrs.cpu`: libc's allocator, and one that
//! hands out the storage of Python `bytearray` objects.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use crate::count::{Alignment, Count};
use crate::error::IntoPyResult;
use crate::resource::PyMemoryResource;

/// `posix_memalign` / `free` from the C library: the CPU's default resource.
#[pyclass(extends = PyMemoryResource, name = "MallocMemoryResource", module = "devmm")]
pub(crate) struct PyMallocMemoryResource;

#[pymethods]
impl PyMallocMemoryResource {
    /// Every pointer aligned to `alignment` bytes (a power of two, at least 8).
    #[new]
    #[pyo3(signature = (alignment = Count::of(64)))]
    fn py_new(alignment: Count<Alignment>) -> PyResult<(Self, PyMemoryResource)> {
        let alignment = alignment.get();
        let mr = devmm::MallocMemoryResource::with_alignment(alignment).py()?;
        Ok((
            PyMallocMemoryResource,
            PyMemoryResource::native(Arc::new(mr)),
        ))
    }
}

/// How many freed addresses the bytearray resource remembers, to tell a
/// double free from an unknown pointer. Bounded so long runs do not grow it.
const FREED_MEMORY: usize = 1024;

#[derive(Default)]
struct Blocks {
    /// Aligned address → (size asked, the bytearray holding it).
    live: HashMap<usize, (usize, Py<PyByteArray>)>,
    recently_freed: VecDeque<usize>,
}

/// Host memory owned by Python `bytearray` objects, so Python's own memory
/// accounting (tracemalloc, `sys.getsizeof`) sees every block. It tracks its
/// allocations and reports misuse as errors.
struct BytearrayResource {
    alignment: usize,
    blocks: Mutex<Blocks>,
}

impl BytearrayResource {
    fn blocks(&self) -> MutexGuard<'_, Blocks> {
        // Each update is one insert or remove: a panic elsewhere cannot
        // leave the table half-changed, so a poisoned lock is still consistent.
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn misuse(
        &self,
        kind: devmm::MisuseKind,
        ptr: devmm::DevicePtr,
        nbytes: usize,
    ) -> devmm::Error {
        devmm::Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: devmm::Device::CPU,
            resource: format!("{self:?}"),
        }
    }
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
        };
        // Over-allocate so an aligned block of `nbytes` fits inside.
        let total = nbytes
            .checked_add(self.alignment - 1)
            .ok_or_else(|| out_of_memory("the size overflows once aligned".into()))?;
        let (array, base) = Python::try_attach(|py| {
            PyByteArray::new_with(py, total, |_| Ok(()))
                .map(|array| {
                    let base = array.data() as usize;
                    (array.unbind(), base)
                })
                .map_err(|err| out_of_memory(err.to_string()))
        })
        .ok_or_else(|| out_of_memory("the Python interpreter is shutting down".into()))??;
        let addr = base.next_multiple_of(self.alignment);
        let mut blocks = self.blocks();
        blocks.live.insert(addr, (nbytes, array));
        blocks.recently_freed.retain(|&a| a != addr);
        Ok(devmm::DevicePtr::from_addr(addr))
    }

    unsafe fn deallocate(
        &self,
        ptr: devmm::DevicePtr,
        nbytes: usize,
        _stream: &devmm::Stream,
    ) -> devmm::Result<()> {
        if ptr.is_null() && nbytes == 0 {
            return Ok(());
        }
        let mut blocks = self.blocks();
        match blocks.live.get(&ptr.addr()) {
            None if blocks.recently_freed.contains(&ptr.addr()) => {
                Err(self.misuse(devmm::MisuseKind::DoubleFree, ptr, nbytes))
            }
            None => Err(self.misuse(devmm::MisuseKind::UnknownPointer, ptr, nbytes)),
            Some(&(allocated, _)) if allocated != nbytes => {
                Err(self.misuse(devmm::MisuseKind::WrongSize { allocated }, ptr, nbytes))
            }
            Some(_) => {
                // Dropping the bytearray releases it (now, or at the next
                // moment this thread holds the GIL).
                blocks.live.remove(&ptr.addr());
                if blocks.recently_freed.len() == FREED_MEMORY {
                    blocks.recently_freed.pop_front();
                }
                blocks.recently_freed.push_back(ptr.addr());
                Ok(())
            }
        }
    }

    fn device(&self) -> devmm::Device {
        devmm::Device::CPU
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        devmm::runtime_for(devmm::Device::CPU)?.memory_info(devmm::Device::CPU)
    }

    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        Some(self.blocks().live.len())
    }
}

/// Host memory held by Python `bytearray` objects, with misuse detection
/// (unknown pointers, wrong sizes and double frees raise `ValueError`).
#[pyclass(extends = PyMemoryResource, name = "BytearrayMemoryResource", module = "devmm")]
pub(crate) struct PyBytearrayMemoryResource;

#[pymethods]
impl PyBytearrayMemoryResource {
    /// Every pointer aligned to `alignment` bytes (a power of two).
    #[new]
    #[pyo3(signature = (alignment = Count::of(64)))]
    fn py_new(alignment: Count<Alignment>) -> PyResult<(Self, PyMemoryResource)> {
        let alignment = alignment.get();
        if !alignment.is_power_of_two() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "BytearrayMemoryResource alignment must be a power of two, not {alignment}"
            )));
        }
        let mr = BytearrayResource {
            alignment,
            blocks: Mutex::default(),
        };
        Ok((
            PyBytearrayMemoryResource,
            PyMemoryResource::native(Arc::new(mr)),
        ))
    }
}
