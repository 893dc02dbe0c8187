//! Layout policies and resolved layouts.
//!
//! A policy object is callable as `policy(shape, dtype, device)` and returns
//! a `Layout` whose `policy` attribute is that very object, so a layout
//! always says which policy made it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use pyo3::{PyClass, PyClassInitializer};
use pyo3::{PyTraverseError, PyVisit};

use crate::count::{BaseAlignment, Count, Dims, Itemsize, Shape, Strides, UnitStrideAlignment};
use crate::device::DeviceArg;
use crate::dtype::DTypeArg;
use crate::error::IntoPyResult;

/// A shape argument: a sequence of non-negative ints, or one int for 1-D.
///
/// Python type: `Sequence[int] | int`
pub(crate) type ShapeArg = Dims<Shape>;

/// The base of every layout policy. Call a policy with
/// `(shape, dtype, device)` to resolve a `Layout`.
#[pyclass(frozen, subclass, name = "LayoutPolicy", module = "devmm")]
pub(crate) struct PyLayoutPolicy {
    pub(crate) inner: Arc<dyn devmm::LayoutPolicy>,
}

impl PyLayoutPolicy {
    fn with(policy: impl devmm::LayoutPolicy) -> Self {
        PyLayoutPolicy {
            inner: Arc::new(policy),
        }
    }

    /// The one instance of the stateless policy class `P` (its native part
    /// `native`, over the core's `policy`), made on the first call and kept
    /// in `one`.
    fn singleton<P: PyClass<BaseType = PyLayoutPolicy>>(
        py: Python<'_>,
        one: &'static PyOnceLock<Py<P>>,
        native: P,
        policy: impl devmm::LayoutPolicy,
    ) -> PyResult<Py<P>> {
        one.get_or_try_init(py, || {
            Py::new(
                py,
                PyClassInitializer::from(Self::with(policy)).add_subclass(native),
            )
        })
        .map(|one| one.clone_ref(py))
    }
}

#[pymethods]
impl PyLayoutPolicy {
    /// Resolves `shape` of `dtype` on `device` into a `Layout` that remembers this policy.
    fn __call__(
        slf: &Bound<'_, Self>,
        shape: ShapeArg,
        dtype: DTypeArg,
        device: DeviceArg,
    ) -> PyResult<PyLayout> {
        let layout = devmm::Layout::resolve(&slf.get().inner, &shape.0, dtype.0, device.0).py()?;
        Ok(PyLayout {
            layout,
            policy: Some(slf.clone().into_any().unbind()),
        })
    }

    /// A stateless policy's spelling, `RowMajor()`; a policy with
    /// parameters spells them in its own.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!("{}()", slf.get_type().name()?))
    }

    /// A stateless policy pickles as its class, called with no arguments;
    /// a policy with parameters pickles them in its own.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyAny>, Bound<'py, PyTuple>) {
        (slf.get_type().into_any(), PyTuple::empty(slf.py()))
    }
}

/// C order: the last dimension is contiguous.
#[pyclass(frozen, extends = PyLayoutPolicy, name = "RowMajor", module = "devmm")]
pub(crate) struct PyRowMajor;

#[pymethods]
impl PyRowMajor {
    /// The policy. It is stateless, so every call returns the same object.
    #[new]
    fn py_new(py: Python<'_>) -> PyResult<Py<Self>> {
        static ONE: PyOnceLock<Py<PyRowMajor>> = PyOnceLock::new();
        PyLayoutPolicy::singleton(py, &ONE, PyRowMajor, devmm::RowMajor)
    }
}

/// Fortran order: the first dimension is contiguous.
#[pyclass(frozen, extends = PyLayoutPolicy, name = "ColMajor", module = "devmm")]
pub(crate) struct PyColMajor;

#[pymethods]
impl PyColMajor {
    /// The policy. It is stateless, so every call returns the same object.
    #[new]
    fn py_new(py: Python<'_>) -> PyResult<Py<Self>> {
        static ONE: PyOnceLock<Py<PyColMajor>> = PyOnceLock::new();
        PyLayoutPolicy::singleton(py, &ONE, PyColMajor, devmm::ColMajor)
    }
}

/// A dense layout in any dimension order, outermost first
/// (`Permuted((0, 2, 3, 1))` stores an NCHW shape channels-last).
/// Policies with equal permutations are equal.
#[pyclass(frozen, eq, hash, extends = PyLayoutPolicy, name = "Permuted", module = "devmm")]
#[derive(PartialEq, Eq, Hash)]
pub(crate) struct PyPermuted {
    permutation: Vec<usize>,
}

#[pymethods]
impl PyPermuted {
    /// The policy for `permutation`; one that does not list each of
    /// `0..len` exactly once is a `ValueError`.
    #[new]
    fn py_new(permutation: Vec<usize>) -> PyResult<(Self, PyLayoutPolicy)> {
        let policy = devmm::Permuted::try_new(permutation.iter().copied()).py()?;
        Ok((PyPermuted { permutation }, PyLayoutPolicy::with(policy)))
    }

    /// The dimension order, outermost first.
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn permutation<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.permutation)
    }

    fn __repr__(&self) -> String {
        format!("Permuted({:?})", self.permutation)
    }

    fn __reduce__(&self, py: Python<'_>) -> (Py<PyAny>, (Vec<usize>,)) {
        (
            py.get_type::<PyPermuted>().into_any().unbind(),
            (self.permutation.clone(),),
        )
    }
}

/// The hash of a policy's parameters, so equal policies hash alike.
fn value_hash(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Another policy with padded rows: the innermost extent is padded to a
/// multiple of `unit_stride_alignment` bytes and the first element sits on
/// a `base_alignment` boundary. Equal parameters make equal policies.
#[pyclass(frozen, extends = PyLayoutPolicy, name = "Aligned", module = "devmm")]
pub(crate) struct PyAligned {
    inner: Py<PyLayoutPolicy>,
    unit_stride_alignment: usize,
    base_alignment: usize,
}

#[pymethods]
impl PyAligned {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.inner)
    }

    #[new]
    #[pyo3(signature = (inner, unit_stride_alignment = Count::of(1), base_alignment = Count::of(1)))]
    fn py_new(
        inner: Bound<'_, PyLayoutPolicy>,
        unit_stride_alignment: Count<UnitStrideAlignment>,
        base_alignment: Count<BaseAlignment>,
    ) -> PyResult<(Self, PyLayoutPolicy)> {
        let (unit_stride_alignment, base_alignment) =
            (unit_stride_alignment.get(), base_alignment.get());
        let aligned = devmm::Aligned::over(
            Arc::clone(&inner.get().inner),
            unit_stride_alignment,
            base_alignment,
        )
        .py()?;
        Ok((
            PyAligned {
                inner: inner.unbind(),
                unit_stride_alignment,
                base_alignment,
            },
            PyLayoutPolicy::with(aligned),
        ))
    }

    /// The wrapped policy.
    #[getter]
    fn inner(&self, py: Python<'_>) -> Py<PyLayoutPolicy> {
        self.inner.clone_ref(py)
    }

    /// Row padding, in bytes.
    #[getter]
    fn unit_stride_alignment(&self) -> usize {
        self.unit_stride_alignment
    }

    /// Base alignment, in bytes.
    #[getter]
    fn base_alignment(&self) -> usize {
        self.base_alignment
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<PyAligned>() else {
            return Ok(false);
        };
        let other = other.get();
        Ok(other.unit_stride_alignment == self.unit_stride_alignment
            && other.base_alignment == self.base_alignment
            && other.inner.bind(py).eq(self.inner.bind(py))?)
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.inner.bind(py).hash()?;
        Ok(value_hash(&(
            "Aligned",
            inner,
            self.unit_stride_alignment,
            self.base_alignment,
        )))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Aligned({}, unit_stride_alignment={}, base_alignment={})",
            self.inner.bind(py).repr()?,
            self.unit_stride_alignment,
            self.base_alignment
        ))
    }

    #[allow(clippy::type_complexity)]
    fn __reduce__(&self, py: Python<'_>) -> (Py<PyAny>, (Py<PyLayoutPolicy>, usize, usize)) {
        (
            py.get_type::<PyAligned>().into_any().unbind(),
            (
                self.inner.clone_ref(py),
                self.unit_stride_alignment,
                self.base_alignment,
            ),
        )
    }
}

/// Row-major with the padding each device prefers: 128-byte rows and a
/// 256-byte base on GPUs, cache-line rows and base on the host.
#[pyclass(frozen, extends = PyLayoutPolicy, name = "DeviceOptimal", module = "devmm")]
pub(crate) struct PyDeviceOptimal;

#[pymethods]
impl PyDeviceOptimal {
    /// The policy. It is stateless, so every call returns the same object.
    #[new]
    fn py_new(py: Python<'_>) -> PyResult<Py<Self>> {
        static ONE: PyOnceLock<Py<PyDeviceOptimal>> = PyOnceLock::new();
        PyLayoutPolicy::singleton(py, &ONE, PyDeviceOptimal, devmm::DeviceOptimal)
    }
}

/// A resolved layout: shape, strides in elements (DLPack's convention),
/// the bytes to allocate, the base alignment, and the policy that made it.
#[pyclass(frozen, name = "Layout", module = "devmm")]
pub(crate) struct PyLayout {
    pub(crate) layout: devmm::Layout,
    pub(crate) policy: Option<Py<PyAny>>,
}

#[pymethods]
impl PyLayout {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.policy)
    }

    /// A hand-built layout of `shape` with `strides` (in elements) for
    /// `dtype`, its base on a `base_alignment` boundary (the dtype's own
    /// alignment when `None`, as the dense policies resolve it), validated
    /// as `validate()` does (`ValueError` when strides overlap or do not
    /// fit). `policy` records provenance and is `None` for hand-built layouts.
    #[new]
    #[pyo3(signature = (shape, strides, dtype, *, base_alignment = None, policy = None))]
    fn py_new(
        shape: ShapeArg,
        strides: Dims<Strides>,
        dtype: DTypeArg,
        base_alignment: Option<Count<BaseAlignment>>,
        policy: Option<Bound<'_, PyLayoutPolicy>>,
    ) -> PyResult<Self> {
        let base_alignment = base_alignment.map_or(dtype.0.alignment(), |b| b.get());
        let layout = devmm::Layout::new(&shape.0, &strides.0, dtype.0, base_alignment).py()?;
        Ok(PyLayout {
            layout,
            policy: policy.map(|p| p.into_any().unbind()),
        })
    }

    /// Checks the layout's invariants (positive, non-overlapping strides
    /// whose span `required_nbytes` covers); `ValueError` when one fails.
    /// With `shape` and `itemsize`, as the seed's `validate(shape,
    /// itemsize)` takes them, also checks the layout is for that shape and
    /// element size.
    #[pyo3(signature = (shape = None, itemsize = None))]
    fn validate(&self, shape: Option<ShapeArg>, itemsize: Option<Count<Itemsize>>) -> PyResult<()> {
        self.layout
            .validate_for(shape.as_ref().map(|s| &s.0[..]), itemsize.map(|i| i.get()))
            .py()
    }

    /// Whether the elements are densely packed in some dimension order
    /// (no padding): `False` for a padded `Aligned` layout.
    #[getter]
    fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// Extents, one per dimension.
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.layout.shape())
    }

    /// Strides in elements, one per dimension.
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.layout.strides())
    }

    /// Dimensions ordered from the largest stride to the smallest.
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn permutation<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.layout.permutation())
    }

    /// Bytes per element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.layout.itemsize()
    }

    /// Number of elements.
    #[getter]
    fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// Bytes to allocate: covers the last element, rounded up to the base alignment.
    #[getter]
    fn required_nbytes(&self) -> usize {
        self.layout.required_nbytes()
    }

    /// The alignment the first element's address must meet.
    #[getter]
    fn base_alignment(&self) -> usize {
        self.layout.base_alignment()
    }

    /// The policy object that produced this layout (`None` for hand-built ones).
    #[getter]
    fn policy(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.policy.as_ref().map(|p| p.clone_ref(py))
    }

    /// Whether the elements are densely packed in row-major order.
    fn is_c_contiguous(&self) -> bool {
        self.layout.is_c_contiguous()
    }

    /// Pickles as its shape, strides, item size, base alignment and policy.
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        (Vec<usize>, Vec<usize>, usize, usize, Option<Py<PyAny>>),
    )> {
        let this = slf.get();
        let rebuild = slf.get_type().getattr("_rebuild")?;
        let layout = &this.layout;
        Ok((
            rebuild,
            (
                layout.shape().to_vec(),
                layout.strides().to_vec(),
                layout.itemsize(),
                layout.base_alignment(),
                this.policy.as_ref().map(|p| p.clone_ref(slf.py())),
            ),
        ))
    }

    /// The inverse of `__reduce__`: the layout rebuilt and validated.
    #[staticmethod]
    fn _rebuild(
        shape: Vec<usize>,
        strides: Vec<usize>,
        itemsize: usize,
        base_alignment: usize,
        policy: Option<Py<PyAny>>,
    ) -> PyResult<PyLayout> {
        // Only the item size matters to a layout: bytes in lanes carry it.
        let lanes = u16::try_from(itemsize).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("item size {itemsize} is too large"))
        })?;
        let bytes = devmm::DType::new(devmm::DTypeCode::UInt, 8, lanes).py()?;
        let layout = devmm::Layout::new(&shape, &strides, bytes, base_alignment).py()?;
        Ok(PyLayout { layout, policy })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyLayout>()
            .is_ok_and(|other| other.get().layout == self.layout)
    }

    /// Equal layouts (the same memory, provenance aside) hash alike.
    fn __hash__(&self) -> u64 {
        value_hash(&self.layout)
    }

    fn __repr__(&self) -> String {
        format!(
            "Layout(shape={:?}, strides={:?}, required_nbytes={}, base_alignment={})",
            self.layout.shape(),
            self.layout.strides(),
            self.layout.required_nbytes(),
            self.layout.base_alignment()
        )
    }
}
