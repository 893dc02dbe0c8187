//! Core values that Python sees as instances of a class defined in Python
//! (the frozen dataclasses of `devmm._core`): the class, imported once, and
//! one instance per value, made the first time the value is handed out, so
//! getters such as `Tensor.dtype` do not build a dataclass on every call.
//! Those instances are frozen by convention only: `object.__setattr__` on
//! one (say `t.dtype`) changes every later getter's result and the
//! spelling cache, so nothing may do that.
//! Records made anew each time (`ValueClass<()>`) use the class only.

use std::sync::Mutex;

use pyo3::call::PyCallArgs;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyType};

use crate::expected::expected;

/// The Python class `module.name` whose instances stand for core values `K`.
pub(crate) struct ValueClass<K> {
    module: &'static str,
    name: &'static str,
    class: PyOnceLock<Py<PyType>>,
    /// The instances made so far, by value (a program uses a few devices
    /// and dtypes, so a short list; past it instances are made each time).
    instances: Mutex<Vec<(K, Py<PyAny>)>>,
}

impl<K: Copy + Eq> ValueClass<K> {
    const CAPACITY: usize = 32;

    pub(crate) const fn new(module: &'static str, name: &'static str) -> Self {
        ValueClass {
            module,
            name,
            class: PyOnceLock::new(),
            instances: Mutex::new(Vec::new()),
        }
    }

    /// The class (imported on first use: its module imports the extension).
    pub(crate) fn class<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyType>> {
        self.class
            .get_or_try_init(py, || {
                let class = py.import(self.module)?.getattr(self.name)?;
                Ok::<_, PyErr>(class.cast_into::<PyType>()?.unbind())
            })
            .map(|class| class.bind(py))
    }

    /// Whether `obj` is an instance of the class (or of a subclass).
    pub(crate) fn holds(&self, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
        let class = self.class(obj.py())?;
        Ok(obj.get_type().is(class) || obj.is_instance(class)?)
    }

    /// The instance for `value`, constructed from `args` (its fields) the
    /// first time.
    pub(crate) fn instance<'py, A: PyCallArgs<'py>>(
        &self,
        py: Python<'py>,
        value: K,
        args: impl FnOnce() -> A,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(made) = self.lock().iter().find(|(k, _)| *k == value) {
            return Ok(made.1.bind(py).clone());
        }
        // Made outside the lock: the constructor runs Python code, which may
        // let another thread in to ask for an instance too.
        let made = self.class(py)?.call1(args())?;
        let mut instances = self.lock();
        if instances.len() < Self::CAPACITY && instances.iter().all(|(k, _)| *k != value) {
            instances.push((value, made.clone().unbind()));
        }
        Ok(made)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(K, Py<PyAny>)>> {
        // The list stays whole whatever panicked while it was held.
        self.instances.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An int field of a value class (`Device.index`, `DType.bits`): any int
/// but a bool, which Python counts as one and no field means
/// (`Device(CPU, True)` is a `TypeError`, not `cpu:1`).
///
/// Python type: `int`
#[derive(Clone, Copy, Debug)]
pub(crate) struct IntField(pub(crate) i128);

impl<'py> FromPyObject<'_, 'py> for IntField {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_exact_instance_of::<PyBool>() {
            return Err(expected("an int", &obj));
        }
        obj.extract().map(IntField)
    }
}
