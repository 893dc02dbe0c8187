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
/// instance of the class that wraps the resource's type, as the resource
/// reports it (`MallocMemoryResource` on the CPU, `CudaRuntimeMemoryResource`
/// on a CUDA device, ...), as the seed's runtimes return. A resource of
/// another type (one whose class keeps state of its own, such as a pool
/// resource's, or none of devmm's) gets the base class.
pub(crate) fn default_object_of(
    py: Python<'_>,
    mr: &Arc<dyn devmm::MemoryResource>,
) -> PyResult<Py<PyMemoryResource>> {
    use devmm::ShippedResource as Shipped;
    if let Some(obj) = origin_object(py, &**mr) {
        return obj;
    }
    let base = PyMemoryResource::checked(Arc::clone(mr));
    match mr.shipped() {
        Some(Shipped::Malloc) => shipped_object::<PyMallocMemoryResource>(py, base),
        Some(Shipped::CudaRuntime) => shipped_object::<gpu::PyCudaRuntimeMemoryResource>(py, base),
        Some(Shipped::CudaPinned) => shipped_object::<gpu::PyCudaPinnedMemoryResource>(py, base),
        Some(Shipped::CudaManaged) => shipped_object::<gpu::PyCudaManagedMemoryResource>(py, base),
        Some(Shipped::HipRuntime) => shipped_object::<gpu::PyHipRuntimeMemoryResource>(py, base),
        Some(Shipped::HipPinned) => shipped_object::<gpu::PyHipPinnedMemoryResource>(py, base),
        Some(Shipped::HipManaged) => shipped_object::<gpu::PyHipManagedMemoryResource>(py, base),
        _ => Py::new(py, base),
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
