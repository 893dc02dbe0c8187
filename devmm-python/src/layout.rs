//! Layout policies and resolved layouts.
//!
//! A policy object is callable as `policy(shape, dtype, device)` and returns
//! a `Layout` whose `policy` attribute is that very object, so a layout
//! always says which policy made it. `LayoutPolicy` is also the abstract
//! base of policies written in Python.

use std::sync::Arc;

use pyo3::exceptions::{PyNotImplementedError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyInt, PyTuple};
use pyo3::{PyClass, PyClassInitializer};
use pyo3::{PyTraverseError, PyVisit};

use crate::abstract_base::{abstract_base_new, AbstractBase};
use crate::count::{
    BaseAlignment, Count, Dims, Itemsize, Permutation, Shape, Strides, UnitStrideAlignment,
    ValueCount,
};
use crate::device::{DeviceArg, PyDevice};
use crate::dtype::{DTypeArg, PyDType};
use crate::error::{IntoPyResult, PythonException};
use crate::expected::expected;

/// A shape argument: a sequence of non-negative ints, or one int for 1-D.
///
/// Python type: `Sequence[int] | int`
pub(crate) type ShapeArg = Dims<Shape>;

/// The base of every layout policy: an immutable, hashable recipe that,
/// called with `(shape, dtype, device)`, resolves a `Layout`. Its
/// `base_alignment` and `unit_stride_alignment` are declared upper bounds
/// (bytes; 1: none): no layout it resolves asks more.
///
/// Like the seed's `LayoutPolicy(abc.ABC)`, it is the abstract base of
/// policies written in Python: a subclass overrides the two properties and
/// `__call__` (instantiating one that does not is a `TypeError`), and
/// `empty` calls it for the layout to allocate.
///
/// Calling a policy: `policy(shape, dtype, device)`, with `shape` a tuple
/// of ints, `dtype` a `DType` and `device` a `Device`, returns a `Layout`
/// (a shape or dtype it cannot lay out is a `ValueError`).
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> class Reversed(devmm.LayoutPolicy):  # a policy written in Python
/// ...     base_alignment = 1
/// ...     unit_stride_alignment = 1
/// ...     def __call__(self, shape, dtype, device):
/// ...         return devmm.ColMajor()(shape, dtype, device)
/// >>> devmm.empty((2, 3), "float32", layout=Reversed()).strides
/// (1, 2)
/// >>> devmm.LayoutPolicy()
/// Traceback (most recent call last):
///     ...
/// TypeError: Can't instantiate abstract class LayoutPolicy with abstract methods base_alignment, unit_stride_alignment, __call__; ...
///
/// ```
#[pyclass(frozen, subclass, name = "LayoutPolicy", module = "devmm")]
pub(crate) struct PyLayoutPolicy {
    /// A shipped policy's core policy; `None` for a Python subclass, whose
    /// own `__call__` resolves.
    pub(crate) inner: Option<Arc<dyn devmm::LayoutPolicy>>,
}

impl AbstractBase for PyLayoutPolicy {
    const ABSTRACT: &'static [&'static str] =
        &["base_alignment", "unit_stride_alignment", "__call__"];
    const HINT: &'static str = "a Python layout policy overrides the base_alignment and \
        unit_stride_alignment properties and __call__(shape, dtype, device), which returns a devmm.Layout";

    fn unbound() -> Self {
        PyLayoutPolicy { inner: None }
    }
}

impl PyLayoutPolicy {
    fn with(policy: impl devmm::LayoutPolicy) -> Self {
        PyLayoutPolicy {
            inner: Some(Arc::new(policy)),
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

    /// The core policy of a shipped policy; for a Python subclass that left
    /// `method` to this base, the `NotImplementedError` saying so.
    pub(crate) fn native<'a>(
        slf: &'a Bound<'_, Self>,
        method: &str,
    ) -> PyResult<&'a Arc<dyn devmm::LayoutPolicy>> {
        slf.get().inner.as_ref().ok_or_else(|| {
            let name = slf.get_type().name().map(|n| n.to_string());
            PyNotImplementedError::new_err(format!(
                "{} must override {method}",
                name.unwrap_or_default()
            ))
        })
    }

    /// The layout a Python subclass's `__call__` resolves for `shape` of
    /// `dtype` on `device`; an answer that is not a `devmm.Layout` is a
    /// `TypeError`.
    pub(crate) fn call_python<'py>(
        policy: &Bound<'py, Self>,
        shape: &[usize],
        dtype: devmm::DType,
        device: devmm::Device,
    ) -> PyResult<Bound<'py, PyLayout>> {
        let py = policy.py();
        let args = (
            PyTuple::new(py, shape)?,
            PyDType::from(dtype),
            PyDevice::from(device),
        );
        let answer = crate::gil::call(policy.as_any(), args, None)?;
        let answer = answer
            .cast_into::<PyLayout>()
            .map_err(|err| err.into_inner());
        answer.or_else(|answer| {
            Err(PyTypeError::new_err(format!(
                "the layout policy {} returned {}, not a devmm.Layout; a layout policy's \
                 __call__(shape, dtype, device) returns the Layout it resolves",
                policy.get_type().name()?,
                answer.get_type().name()?
            )))
        })
    }
}

abstract_base_new!(
    /// The base of a Python policy. Arguments belong to the subclass and
    /// are ignored here. A class that does not override `base_alignment`,
    /// `unit_stride_alignment` and `__call__` is abstract: instantiating it
    /// is a `TypeError`, as with `abc.ABC`.
    PyLayoutPolicy
);

#[pymethods]
impl PyLayoutPolicy {
    /// Resolves `shape` of `dtype` on `device` into a `Layout` that remembers this policy.
    fn __call__(
        slf: &Bound<'_, Self>,
        shape: ShapeArg,
        dtype: DTypeArg,
        device: DeviceArg,
    ) -> PyResult<PyLayout> {
        let policy = Self::native(slf, "__call__")?;
        let layout = devmm::Layout::resolve(policy, &shape.0, dtype.0, device.0).py()?;
        Ok(PyLayout {
            layout,
            policy: Some(slf.clone().into_any().unbind()),
        })
    }

    /// The most bytes of base alignment any layout of this policy asks for.
    #[getter]
    fn base_alignment(slf: &Bound<'_, Self>) -> PyResult<usize> {
        Ok(Self::native(slf, "base_alignment")?.base_alignment())
    }

    /// The most bytes of row padding any layout of this policy asks for
    /// (1: no padding).
    #[getter]
    fn unit_stride_alignment(slf: &Bound<'_, Self>) -> PyResult<usize> {
        Ok(Self::native(slf, "unit_stride_alignment")?.unit_stride_alignment())
    }

    /// No arguments to `__new__` when a Python subclass is unpickled or
    /// copied: it comes back with its attributes restored. (The shipped
    /// policies reduce to their class and fields, and protocols 0 and 1
    /// pickle a subclass as protocol 2 does: devmm/_core/layout.py.)
    fn __getnewargs__<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        PyTuple::empty(py)
    }
}

/// C order: the last dimension is contiguous.
///
/// Python dataclass: `frozen` (devmm/_core/layout.py)
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> devmm.RowMajor()((2, 3), f32, devmm.Device("cpu")).strides
/// (3, 1)
/// >>> devmm.RowMajor() is devmm.RowMajor()
/// True
///
/// ```
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
///
/// Python dataclass: `frozen` (devmm/_core/layout.py)
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> devmm.ColMajor()((2, 3), f32, devmm.Device("cpu")).strides
/// (1, 2)
///
/// ```
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

/// A `permutation` argument: a sequence of dimensions (one int is not).
///
/// Python type: `Sequence[int]`
struct PermutationArg(devmm::Dims);

impl<'py> FromPyObject<'_, 'py> for PermutationArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyInt>() {
            return Err(expected("a sequence of dimensions for permutation", &obj));
        }
        Ok(PermutationArg(obj.extract::<Dims<Permutation>>()?.0))
    }
}

/// A dense layout in any dimension order, outermost first
/// (`Permuted((0, 2, 3, 1))` stores an NCHW shape channels-last).
/// Policies with equal permutations are equal.
///
/// Python dataclass: `frozen` (devmm/_core/layout.py)
///
/// `Permuted(permutation)`: a sequence of ints listing each dimension once;
/// anything else is a `ValueError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> nhwc = devmm.Permuted((0, 2, 3, 1))
/// >>> nhwc((1, 3, 4, 4), f32, devmm.Device("cpu")).strides
/// (48, 1, 12, 3)
/// >>> devmm.Permuted((0, 0))
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid layout: [0, 0] is not a permutation of the 2 dimensions 0..2; ...
///
/// ```
#[pyclass(frozen, extends = PyLayoutPolicy, name = "Permuted", module = "devmm")]
pub(crate) struct PyPermuted {
    permutation: Vec<usize>,
}

#[pymethods]
impl PyPermuted {
    /// The policy for `permutation`; one that does not list each of
    /// `0..len` exactly once is a `ValueError`.
    #[new]
    fn py_new(permutation: PermutationArg) -> PyResult<(Self, PyLayoutPolicy)> {
        let policy = devmm::Permuted::try_new(permutation.0).py()?;
        let permutation = policy.order().to_vec();
        Ok((PyPermuted { permutation }, PyLayoutPolicy::with(policy)))
    }

    /// The dimension order, outermost first.
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn permutation<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.permutation)
    }
}

/// A Python subclass of `LayoutPolicy` as a core policy, for `Aligned` to
/// wrap: its plan is the order of the layout its `__call__` resolves (all
/// the seed's `Aligned` takes of its inner policy).
#[derive(Debug)]
struct PythonPolicy {
    policy: Py<PyLayoutPolicy>,
    /// Its declared alignments, read when it was wrapped.
    base_alignment: usize,
    unit_stride_alignment: usize,
}

impl devmm::LayoutPolicy for PythonPolicy {
    fn plan(
        &self,
        shape: &[usize],
        dtype: devmm::DType,
        device: devmm::Device,
    ) -> devmm::Result<devmm::LayoutPlan> {
        Python::attach(|py| {
            let layout = PyLayoutPolicy::call_python(self.policy.bind(py), shape, dtype, device)
                .map_err(|err| {
                    PythonException::raised(py, err, "LayoutPolicy.__call__", Some(device))
                })?;
            Ok(layout.get().layout.plan())
        })
    }

    fn base_alignment(&self) -> usize {
        self.base_alignment
    }

    fn unit_stride_alignment(&self) -> usize {
        self.unit_stride_alignment
    }
}

/// Another policy with padded rows: the innermost extent is padded to a
/// multiple of `unit_stride_alignment` bytes (and of the item size) and the
/// first element sits on a `base_alignment` boundary. The dimension order
/// comes from `inner`; the alignments are this wrapper's own (with nested
/// `Aligned` policies the outermost wins). Equal parameters make equal
/// policies.
///
/// Python dataclass: `frozen` (devmm/_core/layout.py)
///
/// `Aligned(inner, unit_stride_alignment=128, base_alignment=256)`: `inner`
/// is any `LayoutPolicy` (one written in Python too), the alignments ints
/// in bytes.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> aligned = devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=128, base_alignment=256)
/// >>> layout = aligned((4, 3), f32, devmm.Device("cpu"))
/// >>> layout.strides, layout.required_nbytes, layout.policy is aligned
/// ((32, 1), 512, True)
///
/// ```
#[pyclass(frozen, extends = PyLayoutPolicy, name = "Aligned", module = "devmm")]
pub(crate) struct PyAligned {
    inner: Py<PyLayoutPolicy>,
    /// The core policy calling a Python `inner`, which holds a second
    /// reference to it: kept here so that `__traverse__` visits that one
    /// too and a cycle through `inner` is collectable. (Only the `Aligned`
    /// that made it keeps it; outer wrappers share the core policy, not the
    /// reference.)
    python: Option<Arc<PythonPolicy>>,
}

#[pymethods]
impl PyAligned {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.inner)?;
        visit.call(self.python.as_ref().map(|python| &python.policy))
    }

    #[new]
    #[pyo3(signature = (
        inner,
        unit_stride_alignment = Count::of(devmm::Aligned::DEFAULT_UNIT_STRIDE_ALIGNMENT),
        base_alignment = Count::of(devmm::Aligned::DEFAULT_BASE_ALIGNMENT),
    ))]
    #[pyo3(text_signature = "(inner, unit_stride_alignment=128, base_alignment=256)")]
    fn py_new(
        inner: Bound<'_, PyLayoutPolicy>,
        unit_stride_alignment: Count<UnitStrideAlignment>,
        base_alignment: Count<BaseAlignment>,
    ) -> PyResult<(Self, PyLayoutPolicy)> {
        let (core, python): (Arc<dyn devmm::LayoutPolicy>, _) = match &inner.get().inner {
            Some(core) => (Arc::clone(core), None),
            None => {
                let python = Arc::new(PythonPolicy {
                    base_alignment: inner
                        .getattr("base_alignment")?
                        .extract::<Count<BaseAlignment>>()?
                        .get(),
                    unit_stride_alignment: inner
                        .getattr("unit_stride_alignment")?
                        .extract::<Count<UnitStrideAlignment>>()?
                        .get(),
                    policy: inner.clone().unbind(),
                });
                (Arc::clone(&python) as _, Some(python))
            }
        };
        let aligned =
            devmm::Aligned::over(core, unit_stride_alignment.get(), base_alignment.get()).py()?;
        Ok((
            PyAligned {
                inner: inner.unbind(),
                python,
            },
            PyLayoutPolicy::with(aligned),
        ))
    }

    /// The wrapped policy.
    #[getter]
    fn inner(&self, py: Python<'_>) -> Py<PyLayoutPolicy> {
        self.inner.clone_ref(py)
    }
}

/// Row-major with the padding each device prefers: 128-byte rows and a
/// 256-byte base on GPUs (its declared bounds), cache-line rows and base on
/// the host.
///
/// Python dataclass: `frozen` (devmm/_core/layout.py)
///
/// The layout `empty` uses when none is given.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> devmm.DeviceOptimal()((4, 3), f32, devmm.Device("cpu")).strides
/// (16, 1)
/// >>> devmm.DeviceOptimal()((4, 3), f32, devmm.Device("cuda")).strides
/// (32, 1)
///
/// ```
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
///
/// `Layout(shape, strides, dtype, *, base_alignment=1, policy=None)`:
/// `shape` and `strides` are tuples of ints, `dtype` a `DType` (or any
/// spelling `DType.from_any` reads); overlapping strides, or ones that do
/// not fit, are a `ValueError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> devmm.Layout((2, 3), (3, 1), f32)
/// Layout(shape=(2, 3), strides=(3, 1), itemsize=4, required_nbytes=24, base_alignment=1, policy=None)
/// >>> devmm.Layout((2, 3), (1, 1), f32)
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid layout: stride 1 of dimension 0 overlaps the 3 elements spanned by the dimensions inside it; ...
///
/// ```
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
    /// `dtype`, its base on a `base_alignment` boundary (1, none, as the
    /// dense policies resolve it), validated as `validate()` does
    /// (`ValueError` when strides overlap or do not fit). `policy` records
    /// provenance and is `None` for hand-built layouts.
    #[new]
    #[pyo3(signature = (shape, strides, dtype, *, base_alignment = Count::of(1), policy = None))]
    #[pyo3(text_signature = "(shape, strides, dtype, *, base_alignment=1, policy=None)")]
    fn py_new(
        shape: ShapeArg,
        strides: Dims<Strides>,
        dtype: DTypeArg,
        base_alignment: Count<BaseAlignment>,
        policy: Option<Bound<'_, PyLayoutPolicy>>,
    ) -> PyResult<Self> {
        let layout =
            devmm::Layout::new(&shape.0, &strides.0, dtype.0, base_alignment.get()).py()?;
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
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> f32 = devmm.DType.from_string("float32")
    /// >>> layout = devmm.RowMajor()((2, 3), f32, devmm.Device("cpu"))
    /// >>> layout.validate((2, 3), 4)
    /// >>> layout.validate((3, 2), 4)
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: ...
    ///
    /// ```
    #[pyo3(signature = (shape = None, itemsize = None))]
    fn validate(
        &self,
        shape: Option<ShapeArg>,
        itemsize: Option<ValueCount<Itemsize>>,
    ) -> PyResult<()> {
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
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> f32 = devmm.DType.from_string("float32")
    /// >>> cpu = devmm.Device("cpu")
    /// >>> devmm.RowMajor()((2, 3), f32, cpu).is_c_contiguous()
    /// True
    /// >>> devmm.ColMajor()((2, 3), f32, cpu).is_c_contiguous()
    /// False
    ///
    /// ```
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
        // Only the item size matters to a layout.
        let opaque = devmm::DType::opaque(itemsize).py()?;
        let layout = devmm::Layout::new(&shape, &strides, opaque, base_alignment).py()?;
        Ok(PyLayout { layout, policy })
    }
}
