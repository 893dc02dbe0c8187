//! `DeviceMemoryResource`: the base of every resource Python sees, and the
//! bridge that lets Python code define one.
//!
//! A native resource (malloc, the adaptors, ...) carries its Rust
//! `Arc<dyn MemoryResource>`. A Python subclass that writes `allocate` and
//! `deallocate` in Python gets a bridge to those methods (a
//! [`devmm::CallbackMemoryResource`]) the first time devmm needs it, kept
//! for its life. Either is handed to the core as a [`devmm::WithOrigin`]
//! whose origin is the Python object, so the object comes back from the
//! core's registry and buffers ([`object_of`]) with no map of our own.
//!
//! The shipped classes are subclassable, as the seed's plain Python classes
//! are ([`new_shipped`]): a subclass that overrides `allocate` or
//! `deallocate` is bridged like a Python-defined resource, so its methods
//! are what devmm allocates through; one that does not is the native
//! resource.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use pyo3::exceptions::{PyAttributeError, PyNotImplementedError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyType, PyWeakrefMethods, PyWeakrefReference};
use pyo3::{intern, PyClass, PyClassInitializer, PyTraverseError, PyVisit};

use crate::abstract_base::{abstract_base_new, AbstractBase};
use crate::count::{Count, Nbytes};
use crate::device::{DeviceArg, PyDevice};
use crate::error::{take_deferred_interrupt, to_py_err, IntoPyResult, PythonException};
use crate::expected::type_name;
use crate::stream::{maybe_detached, resolve_stream, stream_object, StreamArg};

/// A memory resource, shaped like rmm's `DeviceMemoryResource`:
/// `allocate(nbytes, stream) -> int` and `deallocate(ptr, nbytes, stream)`,
/// with the probes `device`, `stream_ordered`, `guaranteed_alignment()`
/// and `available_memory()`.
///
/// Subclass it in Python and override `allocate` and `deallocate` to
/// define a resource; set `self.device` in `__init__` when it is not the
/// CPU, and override `guaranteed_alignment()` to promise an alignment.
/// Like an abstract base class, it cannot be instantiated until both are
/// overridden. Resources are weak-referenceable.
///
/// `nbytes` and `ptr` are ints; `stream` is a `Stream`, a sentinel or
/// `None` (the device's default stream). A negative size is a `ValueError`;
/// a resource out of memory raises `OutOfMemoryError` (a `MemoryError`).
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> class Counting(devmm.DeviceMemoryResource):
/// ...     def __init__(self):
/// ...         self.upstream, self.count = MallocMemoryResource(), 0
/// ...     def allocate(self, nbytes, stream=None):
/// ...         self.count += 1
/// ...         return self.upstream.allocate(nbytes, stream)
/// ...     def deallocate(self, ptr, nbytes, stream=None):
/// ...         self.upstream.deallocate(ptr, nbytes, stream)
/// >>> counting = Counting()
/// >>> t = devmm.empty((4,), "float32", mr=counting)
/// >>> counting.count, counting.device
/// (1, Device(type=<DeviceType.CPU: 1>, index=0))
/// >>> devmm.DeviceMemoryResource()
/// Traceback (most recent call last):
///     ...
/// TypeError: Can't instantiate abstract class DeviceMemoryResource with abstract methods allocate, deallocate; ...
///
/// ```
#[pyclass(subclass, weakref, name = "DeviceMemoryResource", module = "devmm")]
pub(crate) struct PyMemoryResource {
    pub(crate) native: Option<Arc<dyn devmm::MemoryResource>>,
    device: devmm::Device,
    /// A Python-defined resource's bridge to its methods, made on first
    /// use, and how the bridge holds this object.
    bridge: OnceLock<(Arc<dyn devmm::MemoryResource>, Arc<Hold>)>,
    /// An instance of a shipped class (or a subclass), whose `__init__`
    /// makes `native`.
    shipped: bool,
    /// An instance of a Python subclass of a shipped class.
    subclassed: bool,
    /// A shipped class's subclass that overrides `allocate`, `deallocate`
    /// or `guaranteed_alignment`: devmm allocates through the bridge to them.
    python_methods: bool,
}

impl PyMemoryResource {
    /// The base part of a native resource that forwards to checked ones
    /// (an adaptor over [`resource_of`]'s resources).
    pub(crate) fn native(mr: Arc<dyn devmm::MemoryResource>) -> Self {
        PyMemoryResource {
            device: mr.device(),
            native: Some(mr),
            shipped: true,
            ..Self::unbound()
        }
    }

    /// The base part of a resource that hands out memory itself: behind a
    /// [`devmm::Checked`] ledger, so that no call from Python can free an
    /// unknown pointer, a wrong size or a block twice (docs/adr/0009).
    pub(crate) fn checked(mr: impl devmm::MemoryResource + 'static) -> Self {
        PyMemoryResource::native(Arc::new(devmm::Checked::new(mr)))
    }

    /// The native resource of `slf`, for the base's `what` method, and
    /// the stream `stream` names on its device; a Python subclass reaching
    /// the base's method has not overridden it.
    fn native_on(
        slf: &Bound<'_, Self>,
        what: &str,
        stream: Option<StreamArg>,
    ) -> PyResult<(Arc<dyn devmm::MemoryResource>, devmm::Stream)> {
        let this = slf.borrow();
        let Some(mr) = this.native.clone() else {
            if this.shipped {
                return Err(unbuilt(slf.as_any()));
            }
            let name = type_name(slf.as_any());
            return Err(PyNotImplementedError::new_err(format!(
                "{name} must override {what}: Python resources define allocate and deallocate"
            )));
        };
        drop(this);
        let stream = resolve_stream(stream, mr.device())?;
        Ok((mr, stream))
    }

    /// Completes `slf`, made by [`new_shipped`], with the base part its
    /// class's `__init__` built; `__init__` runs once.
    pub(crate) fn install(slf: &Bound<'_, Self>, built: PyMemoryResource) -> PyResult<()> {
        let mut this = slf.borrow_mut();
        if this.native.is_some() {
            return Err(PyTypeError::new_err(format!(
                "{} is already initialised: its __init__ runs once",
                type_name(slf.as_any())
            )));
        }
        this.device = built.device;
        this.native = built.native;
        Ok(())
    }
}

/// `__new__` of the shipped resource class `T`, called for `cls` with
/// `T`'s or a subclass's arguments. `T` itself is made at once, by its
/// `__init__`; a Python subclass gets an instance its own `__init__`
/// completes through `super().__init__(...)`, as with the seed's plain
/// classes, and allocates through its `allocate` and `deallocate` (trusting
/// its `guaranteed_alignment()`) where it overrides any of them.
pub(crate) fn new_shipped<T>(
    cls: &Bound<'_, PyType>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyClassInitializer<T>>
where
    T: PyClass<BaseType = PyMemoryResource> + Default,
{
    let py = cls.py();
    let native = py.get_type::<T>();
    let exact = cls.is(&native);
    let mut python_methods = false;
    if !exact {
        // The methods the core calls on the resource it allocates through.
        let methods = ["allocate", "deallocate", "guaranteed_alignment"];
        for method in methods.map(|m| PyString::intern(py, m)) {
            python_methods |= !cls.getattr(&method)?.is(native.getattr(&method)?);
        }
    }
    let base = PyMemoryResource {
        shipped: true,
        subclassed: !exact,
        python_methods,
        ..PyMemoryResource::unbound()
    };
    let init = PyClassInitializer::from(base).add_subclass(T::default());
    if !exact {
        return Ok(init);
    }
    let obj = Bound::new(py, init)?;
    obj.as_any()
        .call_method(intern!(py, "__init__"), args, kwargs)?;
    Ok(obj.unbind().into())
}

/// Writes the `__new__` of a shipped resource class, [`new_shipped`], in a
/// `#[pymethods]` block of its own (PyO3's `multiple-pymethods`), so that
/// rule is written once: `shipped_new!(PyFoo);`. The stub generator
/// expands an invocation as it reads the block.
macro_rules! shipped_new {
    ($ty:ident) => {
        #[::pyo3::pymethods]
        impl $ty {
            #[new]
            #[classmethod]
            #[pyo3(signature = (*args, **kwargs))]
            fn py_new(
                cls: &::pyo3::Bound<'_, ::pyo3::types::PyType>,
                args: &::pyo3::Bound<'_, ::pyo3::types::PyTuple>,
                kwargs: Option<&::pyo3::Bound<'_, ::pyo3::types::PyDict>>,
            ) -> ::pyo3::PyResult<::pyo3::PyClassInitializer<Self>> {
                $crate::resource::new_shipped(cls, args, kwargs)
            }
        }
    };
}
pub(crate) use shipped_new;

/// The state a shipped class's `__init__` made, or the error for a
/// subclass whose `__init__` did not call the base's.
pub(crate) fn built<T>(state: &OnceLock<T>) -> PyResult<&T> {
    state.get().ok_or_else(|| {
        PyTypeError::new_err(
            "the resource is not initialised: a subclass's __init__ must call \
             super().__init__(...) before the resource is used",
        )
    })
}

/// The error for a shipped class's subclass whose `__init__` did not call
/// the base's.
pub(crate) fn unbuilt(obj: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "{}.__init__ must call super().__init__(...) before the resource is used",
        type_name(obj)
    ))
}

impl AbstractBase for PyMemoryResource {
    const ABSTRACT: &'static [&'static str] = &["allocate", "deallocate"];
    const HINT: &'static str =
        "a Python resource overrides allocate(nbytes, stream) and deallocate(ptr, nbytes, stream)";

    fn unbound() -> Self {
        PyMemoryResource {
            native: None,
            device: devmm::Device::CPU,
            bridge: OnceLock::new(),
            shipped: false,
            subclassed: false,
            python_methods: false,
        }
    }
}

abstract_base_new!(
    /// A resource for Python subclasses to complete (on `cpu:0` until
    /// `self.device` is set). Arguments belong to the subclass and are ignored here.
    /// A class that does not override `allocate` and `deallocate` is
    /// abstract: instantiating it is a `TypeError`, as with `abc.ABC`.
    PyMemoryResource
);

#[pymethods]
impl PyMemoryResource {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self.bridge.get() {
            Some((_, hold)) => hold.strong.traverse(&visit),
            None => Ok(()),
        }
    }

    fn __clear__(&self) {
        if let Some((_, hold)) = self.bridge.get() {
            hold.strong.clear();
        }
    }

    /// The device the memory lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        self.device.into()
    }

    #[setter]
    fn set_device(&mut self, device: DeviceArg) -> PyResult<()> {
        if self.native.is_some() || self.bridge.get().is_some() {
            return Err(PyAttributeError::new_err(
                "the device of a resource is fixed once it is made (native) or first used",
            ));
        }
        self.device = device.0;
        Ok(())
    }

    /// Whether allocation and release are ordered on the stream passed.
    #[getter]
    pub(crate) fn stream_ordered(&self) -> bool {
        self.native.as_ref().is_some_and(|mr| mr.stream_ordered())
    }

    /// Whether the pointers are real memory of `device` that host copies
    /// and NumPy may dereference. Python subclasses declare it with a class
    /// attribute `dereferenceable = True`; undeclared, such paths are refused.
    #[getter]
    fn dereferenceable(&self) -> bool {
        self.native.as_ref().is_some_and(|mr| mr.dereferenceable())
    }

    /// The alignment in bytes every non-null pointer meets (1 promises nothing).
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> MallocMemoryResource(alignment=256).guaranteed_alignment()
    /// 256
    ///
    /// ```
    fn guaranteed_alignment(&self) -> usize {
        self.native
            .as_ref()
            .map_or(1, |mr| mr.guaranteed_alignment())
    }

    /// `(free, total)` bytes as this resource sees them; `None` for a
    /// Python resource that does not override it (it cannot tell).
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> free, total = MallocMemoryResource().available_memory()
    /// >>> 0 < free <= total
    /// True
    ///
    /// ```
    fn available_memory(&self, py: Python<'_>) -> PyResult<Option<(usize, usize)>> {
        let Some(mr) = &self.native else {
            return Ok(None);
        };
        let info = maybe_detached(py, self.device, || mr.available_memory()).py()?;
        Ok(Some((info.free, info.total)))
    }

    /// Allocates `nbytes` ordered on `stream` (the device's default stream
    /// when `None`) and returns the address.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> mr = MallocMemoryResource()
    /// >>> ptr = mr.allocate(100, devmm.DEFAULT)
    /// >>> ptr % mr.guaranteed_alignment()
    /// 0
    /// >>> mr.deallocate(ptr, 100, devmm.DEFAULT)
    /// >>> mr.allocate(-1)
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: nbytes must be a non-negative integer from 0 to 18446744073709551615, not -1
    ///
    /// ```
    #[pyo3(signature = (nbytes, stream = None))]
    fn allocate(
        slf: &Bound<'_, Self>,
        nbytes: Count<Nbytes>,
        stream: Option<StreamArg>,
    ) -> PyResult<usize> {
        let nbytes = nbytes.get();
        let (mr, stream) = Self::native_on(slf, "allocate", stream)?;
        let allocate = || devmm::observe_allocation(|| mr.allocate(nbytes, &stream));
        let ptr = maybe_detached(slf.py(), mr.device(), allocate).map_err(to_py_err)?;
        if let Some(interrupt) = take_deferred_interrupt() {
            // The caller will never see `ptr`: give it back, then raise.
            // SAFETY: just allocated by `mr` with `nbytes`, never handed out.
            let _ = unsafe { mr.deallocate(ptr, nbytes, &stream) };
            drop(take_deferred_interrupt());
            return Err(interrupt);
        }
        Ok(ptr.addr())
    }

    /// Returns `ptr` (from `allocate(nbytes, ...)`) ordered on `stream`.
    ///
    /// Resources that track their allocations report misuse as
    /// `ValueError`; others trust the caller, as rmm's do.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> mr = MallocMemoryResource()
    /// >>> ptr = mr.allocate(100)
    /// >>> mr.deallocate(ptr, 100)
    /// >>> mr.deallocate(ptr, 100)
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: misuse of MallocMemoryResource(device=cpu:0, alignment=64) on cpu:0: double-free: ...
    ///
    /// ```
    #[pyo3(signature = (ptr, nbytes, stream = None))]
    fn deallocate(
        slf: &Bound<'_, Self>,
        ptr: usize,
        nbytes: Count<Nbytes>,
        stream: Option<StreamArg>,
    ) -> PyResult<()> {
        let nbytes = nbytes.get();
        let (mr, stream) = Self::native_on(slf, "deallocate", stream)?;
        let ptr = devmm::DevicePtr::from_addr(ptr);
        maybe_detached(slf.py(), mr.device(), || {
            // SAFETY: the contract is the caller's, exactly as for rmm's
            // `deallocate`; resources that can check it (detects_misuse)
            // turn violations into errors.
            unsafe { mr.deallocate(ptr, nbytes, &stream) }
        })
        .py()
    }

    /// Live allocations, for resources that track them (`None` otherwise).
    fn _debug_live_count(&self) -> Option<usize> {
        self.native.as_ref().and_then(|mr| mr.live_count())
    }

    /// An adaptor shows as `Name(upstream=...)` (the seed's form), other
    /// native resources as the core describes them.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = slf.borrow();
        let name = slf.get_type().name()?;
        let Some(mr) = &this.native else {
            return Ok(format!("{name}(device={})", this.device));
        };
        match mr.upstream().and_then(|up| origin_object(slf.py(), up)) {
            Some(upstream) => Ok(format!(
                "{name}(upstream={})",
                upstream?.bind(slf.py()).repr()?
            )),
            // A subclass shows its own name, as the seed's
            // `type(self).__name__` reprs do.
            None => {
                let native = format!("{mr:?}");
                Ok(match native.split_once('(') {
                    Some((_, fields)) if this.subclassed => format!("{name}({fields}"),
                    _ => native,
                })
            }
        }
    }
}

/// The core resource that stands for `obj`: its native resource, or the
/// bridge to a Python-defined one's methods (made once, on first use),
/// with `obj` as its [`origin`](devmm::MemoryResource::origin), so the
/// registry and buffers hand `obj` itself back ([`object_of`]).
pub(crate) fn resource_of(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<Arc<dyn devmm::MemoryResource>> {
    Ok(bridge_of(obj)?.0)
}

/// [`resource_of`], with the slot through which the resource holds `obj`,
/// for the wrappers that report that reference to the garbage collector.
pub(crate) fn bridge_of(obj: &Bound<'_, PyMemoryResource>) -> PyResult<Bridged> {
    let made = obj
        .borrow()
        .bridge
        .get()
        .map(|(bridge, _)| Arc::clone(bridge));
    let inner = match made {
        Some(bridge) => bridge,
        None => match native_of(obj)? {
            Some(native) => native,
            None => {
                let bridge = python_bridge(obj)?;
                Arc::clone(&obj.borrow().bridge.get_or_init(|| bridge).0)
            }
        },
    };
    let slot = Arc::new(PythonRef::new(obj.clone().into_any().unbind()));
    let mr = devmm::WithOrigin::new(inner, Arc::clone(&slot) as Arc<dyn Any + Send + Sync>);
    Ok((Arc::new(mr), Some(slot)))
}

/// The Python object a core resource stands for: its origin, or a new
/// `DeviceMemoryResource` over it (a resource Rust code made and set).
pub(crate) fn object_of(
    py: Python<'_>,
    mr: &Arc<dyn devmm::MemoryResource>,
) -> PyResult<Py<PyMemoryResource>> {
    match origin_object(py, &**mr) {
        Some(obj) => obj,
        None => Py::new(py, PyMemoryResource::checked(Arc::clone(mr))),
    }
}

/// The Python object `mr` stands for, when it has one.
pub(crate) fn origin_object(
    py: Python<'_>,
    mr: &dyn devmm::MemoryResource,
) -> Option<PyResult<Py<PyMemoryResource>>> {
    let slot = mr.origin()?.downcast_ref::<PythonRef>()?;
    Some(
        slot.get(py)
            .and_then(|obj| Ok(obj.cast_into::<PyMemoryResource>()?.unbind())),
    )
}

/// The bridge to a Python-defined resource's methods. It reads what the
/// subclass says, not the base class's fields: its `device` (a property
/// or class attribute is honoured, and a value that is not a device is a
/// `ValueError`), `guaranteed_alignment()`, `dereferenceable`,
/// `stream_ordered` and its class name, and asks its `available_memory()`
/// when asked (its device's figures where it says `None`). It holds `obj`
/// as [`Hold`] says; whoever holds the bridge holds `obj` through
/// [`resource_of`]'s origin.
fn python_bridge(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<(Arc<dyn devmm::MemoryResource>, Arc<Hold>)> {
    let (callbacks, hold) = callbacks_of(obj)?;
    let checked = devmm::Checked::new(callbacks).while_live(Arc::clone(&hold) as _);
    Ok((Arc::new(checked), hold))
}

/// A Python-defined resource's own methods (a subclass of the base, or of
/// a shipped class overriding them) as a core resource with no ledger in
/// front, for the conformance suite, which checks what the object itself
/// does when called, as the seed's does. `None` for a native resource: its
/// contract is the core's, ledger included.
pub(crate) fn own_methods(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<Option<devmm::CallbackMemoryResource>> {
    match native_of(obj)? {
        Some(_) => Ok(None),
        None => callbacks_of(obj).map(|(callbacks, _)| Some(callbacks)),
    }
}

/// The native resource devmm allocates through for `obj`; `None` where it
/// goes through `obj`'s Python methods (a Python-defined resource, or a
/// shipped class's subclass overriding them). A shipped class's subclass
/// whose `__init__` did not build the resource is a `TypeError`.
fn native_of(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<Option<Arc<dyn devmm::MemoryResource>>> {
    let this = obj.borrow();
    match &this.native {
        Some(mr) if !this.python_methods => Ok(Some(Arc::clone(mr))),
        None if this.shipped => Err(unbuilt(obj.as_any())),
        _ => Ok(None),
    }
}

/// The core resource calling `obj`'s Python methods, as [`python_bridge`]
/// describes, and how it holds `obj`: weakly, and strongly as well while
/// the ledger a bridge puts in front counts live allocations (the
/// conformance suite's callbacks, with no ledger, hold it weakly only).
fn callbacks_of(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<(devmm::CallbackMemoryResource, Arc<Hold>)> {
    let py = obj.py();
    let device: DeviceArg = obj.getattr(intern!(py, "device"))?.extract()?;
    let alignment: usize = obj.call_method0("guaranteed_alignment")?.extract()?;
    let dereferenceable = obj.getattr(intern!(py, "dereferenceable"))?.is_truthy()?;
    let name = obj.get_type().name()?.to_string();
    let hold = Arc::new(Hold {
        weak: PyWeakrefReference::new(obj)?.unbind(),
        strong: PythonRef(Mutex::new(None)),
    });
    let method = |method: &'static str| -> (String, FindCallable) {
        let hold = Arc::clone(&hold);
        let find: FindCallable = Box::new(move |py| hold.object(py)?.getattr(method));
        (format!("{name}.{method}"), find)
    };
    let (available_name, available) = method("available_memory");
    let stream_ordered = obj.getattr(intern!(py, "stream_ordered"))?.is_truthy()?;
    let methods = [method("allocate"), method("deallocate")];
    let device = device.0;
    let mr = python_callbacks(device, alignment, dereferenceable, name, methods).py()?;
    // What the object says of itself, so an adaptor over it forwards that.
    let mr = mr
        .with_stream_ordered(stream_ordered)
        .with_available_memory(move || {
            crate::gil::attach(|py| {
                available(py)
                    .and_then(|f| crate::gil::call(&f, (), None))
                    .and_then(|info| info.extract::<Option<(usize, usize)>>())
                    .map(|info| info.map(|(free, total)| devmm::MemoryInfo { free, total }))
                    .map_err(|err| PythonException::raised(py, err, &*available_name, Some(device)))
            })
            .unwrap_or(Ok(None))
        });
    Ok((mr, hold))
}

/// A Rust resource that stands for a Python object, and the slot through
/// which it holds the object.
pub(crate) type Bridged = (Arc<dyn devmm::MemoryResource>, Option<Arc<PythonRef>>);

/// Finds a Python callable when a bridge calls it.
pub(crate) type FindCallable = Box<dyn Fn(Python<'_>) -> PyResult<Bound<'_, PyAny>> + Send + Sync>;

/// How a Python-defined resource's bridge holds the resource: weakly, since
/// the resource holds the bridge, so that it dies with its last reference,
/// and strongly as well while an allocation through the bridge is live.
/// A collection that frees a cycle of the resource and its buffers clears
/// weak references before it runs the buffers' finalizers, which give the
/// memory back (PEP 442): the strong reference is what finds the resource
/// whole then. The resource shows it to the collector and clears it
/// ([`PyMemoryResource`]'s `__traverse__` and `__clear__`).
pub(crate) struct Hold {
    weak: Py<PyWeakrefReference>,
    /// The strong reference, while there are live allocations.
    strong: PythonRef,
}

impl Hold {
    /// The resource, or an error once it is gone.
    fn object<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.strong
            .held(py)
            .or_else(|| self.weak.bind(py).upgrade())
            .ok_or_else(|| PyRuntimeError::new_err("the Python resource was already freed"))
    }
}

/// The bridge's ledger counts the live allocations and says when the
/// first is handed out and when the last comes back.
impl devmm::WhileLive for Hold {
    /// Holds the resource.
    fn first_live(&self) {
        crate::gil::attach(|py| {
            if let Some(obj) = self.weak.bind(py).upgrade() {
                self.strong.set(obj.unbind());
            }
        });
    }

    /// Lets the resource go. After interpreter shutdown began the
    /// reference is left to the ending process, as the memory is.
    fn none_live(&self) {
        crate::gil::attach(|_| self.strong.clear());
    }
}

/// A strong reference to a Python object held from Rust (by a bridge's
/// closures), in a slot the garbage collector can be shown and can empty.
pub(crate) struct PythonRef(Mutex<Option<Py<PyAny>>>);

impl PythonRef {
    pub(crate) fn new(obj: Py<PyAny>) -> Self {
        PythonRef(Mutex::new(Some(obj)))
    }

    /// Holds `obj` from now on (the object held before is let go).
    fn set(&self, obj: Py<PyAny>) {
        let previous = self.slot().replace(obj);
        drop(previous);
    }

    fn slot(&self) -> MutexGuard<'_, Option<Py<PyAny>>> {
        // One store per update: a poisoned lock is still consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object, or an error once the collector cleared it.
    pub(crate) fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.held(py).ok_or_else(|| {
            PyRuntimeError::new_err(
                "the Python object was cleared by the garbage collector with its reference cycle",
            )
        })
    }

    /// The object, while it is held.
    fn held<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.slot().as_ref().map(|obj| obj.bind(py).clone())
    }

    /// Reports the reference to the collector. Only the one Python object
    /// that owns the bridge exclusively may call this, so each reference
    /// is reported once. The lock is only tried: traversal must not block.
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(slot) = self.0.try_lock() {
            if let Some(obj) = slot.as_ref() {
                visit.call(obj)?;
            }
        }
        Ok(())
    }

    /// Drops the reference (the collector breaking a cycle).
    pub(crate) fn clear(&self) {
        let obj = self.slot().take();
        drop(obj);
    }
}

impl Drop for PythonRef {
    fn drop(&mut self) {
        let slot = self.0.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(obj) = slot.take() {
            release_flat(obj);
        }
    }
}

thread_local! {
    /// The references let go of while another is being let go of on this
    /// thread, for the outermost release to drop one after another.
    static RELEASING: RefCell<Option<Vec<Py<PyAny>>>> = const { RefCell::new(None) };
}

/// Lets go of `obj` without nesting: the last reference to an adaptor's
/// upstream object deallocates it, which drops its core resource, which
/// lets go of the next object down, and so on, one native stack frame
/// group per link, so a chain thousands deep overflowed the stack. A
/// release inside another is queued for the outermost one instead.
fn release_flat(obj: Py<PyAny>) {
    let queued = RELEASING.try_with(|releasing| match releasing.borrow_mut().as_mut() {
        Some(queue) => {
            queue.push(obj);
            None
        }
        None => Some(obj),
    });
    let obj = match queued {
        Ok(Some(obj)) => obj,
        // Queued for the outer release; or the thread is ending, its queue
        // is gone, and `obj` went with the closure, dropped at once.
        Ok(None) | Err(_) => return,
    };
    let _ = RELEASING.try_with(|releasing| *releasing.borrow_mut() = Some(Vec::new()));
    drop(obj);
    while let Some(next) = RELEASING
        .try_with(|releasing| releasing.borrow_mut().as_mut().and_then(Vec::pop))
        .ok()
        .flatten()
    {
        drop(next);
    }
    let _ = RELEASING.try_with(|releasing| *releasing.borrow_mut() = None);
}

/// A Rust resource named `name` whose allocate and deallocate call the
/// Python callables `allocate` and `deallocate` find, each named in errors
/// by the string beside it. A non-power-of-two `alignment` is refused
/// (`InvalidArgument`).
fn python_callbacks(
    device: devmm::Device,
    alignment: usize,
    dereferenceable: bool,
    name: String,
    [(alloc_name, allocate), (dealloc_name, deallocate)]: [(String, FindCallable); 2],
) -> devmm::Result<devmm::CallbackMemoryResource> {
    let mr = devmm::CallbackMemoryResource::new(
        device,
        alignment,
        move |nbytes, stream| {
            crate::gil::attach(|py| {
                let result = allocate(py)
                    .and_then(|f| crate::gil::call(&f, (nbytes, stream_object(py, stream)?), None))
                    .and_then(|ptr| ptr.extract::<usize>());
                result
                    .map(devmm::DevicePtr::from_addr)
                    .map_err(|err| PythonException::raised(py, err, &*alloc_name, Some(device)))
            })
            .unwrap_or_else(|| Err(interpreter_gone(device)))
        },
        move |ptr, nbytes, stream| {
            // After interpreter shutdown began nothing Python-side can free
            // the memory; the process is ending, so the block is left to it.
            crate::gil::attach(|py| {
                deallocate(py)
                    .and_then(|f| {
                        crate::gil::call(&f, (ptr.addr(), nbytes, stream_object(py, stream)?), None)
                    })
                    .map(drop)
                    .map_err(|err| PythonException::raised(py, err, &*dealloc_name, Some(device)))
            })
            .unwrap_or(Ok(()))
        },
    )?
    .named(name)
    .with_dereferenceable_memory(dereferenceable);
    Ok(mr)
}

/// [`python_callbacks`] behind a ledger, as every resource Python makes is
/// (docs/adr/0009).
pub(crate) fn python_resource(
    device: devmm::Device,
    alignment: usize,
    dereferenceable: bool,
    name: String,
    methods: [(String, FindCallable); 2],
) -> devmm::Result<Arc<dyn devmm::MemoryResource>> {
    let mr = python_callbacks(device, alignment, dereferenceable, name, methods)?;
    Ok(Arc::new(devmm::Checked::new(mr)))
}

/// The `__qualname__` of a Python callable, for error messages.
pub(crate) fn callable_name(callable: &Bound<'_, PyAny>) -> String {
    callable
        .getattr("__qualname__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "a Python callback".into())
}

fn interpreter_gone(device: devmm::Device) -> devmm::Error {
    devmm::Error::RuntimeUnavailable {
        name: device.ty().runtime_name().to_owned(),
        reason: "the Python interpreter is shutting down, so a Python resource cannot allocate"
            .into(),
    }
}

/// Whether `deallocate(ptr, nbytes)` on `mr` has nothing to free (null, 0
/// bytes): the core's rule for null (`devmm::frees_nothing`), for the
/// resources written in Python over a library (`devmm.mrs.cuda`'s rmm and
/// CuPy ones). A null pointer with a size is a `ValueError` (a
/// `foreign-free`), as devmm's own resources refuse it.
#[pyfunction]
pub(crate) fn _frees_nothing(
    mr: &Bound<'_, PyMemoryResource>,
    ptr: usize,
    nbytes: Count<Nbytes>,
) -> PyResult<bool> {
    devmm::frees_nothing(
        &*resource_of(mr)?,
        devmm::DevicePtr::from_addr(ptr),
        nbytes.get(),
    )
    .py()
}
