//! The shipped resource class that stands for a runtime's default
//! resource: above `resource` and the shipped classes (`host_resources`,
//! `gpu_resources`), which build on `resource`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::{PyClass, PyClassInitializer};

use crate::gpu_resources as gpu;
use crate::host_resources::PyMallocMemoryResource;
use crate::resource::{origin_object, PyMemoryResource};

/// The Python object for a runtime's default resource on its device: an
/// instance of the shipped class that makes that resource
/// (`MallocMemoryResource` on the CPU, `CudaRuntimeMemoryResource` on a
/// CUDA device, ...), as the seed's runtimes return.
pub(crate) fn default_object_of(
    py: Python<'_>,
    mr: &Arc<dyn devmm::MemoryResource>,
) -> PyResult<Py<PyMemoryResource>> {
    use devmm::DeviceType as Ty;
    if let Some(obj) = origin_object(py, &**mr) {
        return obj;
    }
    let base = PyMemoryResource::checked(Arc::clone(mr));
    match mr.device().ty() {
        Ty::Cpu => shipped_object::<PyMallocMemoryResource>(py, base),
        Ty::Cuda => shipped_object::<gpu::PyCudaRuntimeMemoryResource>(py, base),
        Ty::CudaHost => shipped_object::<gpu::PyCudaPinnedMemoryResource>(py, base),
        Ty::CudaManaged => shipped_object::<gpu::PyCudaManagedMemoryResource>(py, base),
        Ty::Rocm => shipped_object::<gpu::PyHipRuntimeMemoryResource>(py, base),
        Ty::RocmHost => shipped_object::<gpu::PyHipPinnedMemoryResource>(py, base),
    }
}

/// An instance of the shipped class `T` over `base`.
fn shipped_object<T: PyClass<BaseType = PyMemoryResource> + Default>(
    py: Python<'_>,
    base: PyMemoryResource,
) -> PyResult<Py<PyMemoryResource>> {
    let init = PyClassInitializer::from(base).add_subclass(T::default());
    Ok(Bound::new(py, init)?.into_super().unbind())
}
