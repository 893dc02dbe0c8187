//! `devmm.testing`: the core's conformance suites and recording resource
//! for Python authors of resources and runtimes.

use std::sync::{Arc, OnceLock};

use devmm::testing::{
    CheckStatus, ConformanceReport, MrConformanceOptions, RecordedCall, ReportedMisuse,
};
use pyo3::exceptions::{PyAssertionError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyDict, PyList};

use crate::count::{Count, GuaranteedAlignment};
use crate::device::{DeviceArg, PyDevice};
use crate::error::{raised_python, IntoPyResult, PythonException, RecordingMisuseError};
use crate::resource::{built, own_methods, resource_of, shipped_new, PyMemoryResource};
use crate::stream::{resolve_stream, stream_object};

/// `None` when every check passed; `AssertionError` listing the failures otherwise.
fn raise_on_failure(report: ConformanceReport) -> PyResult<()> {
    report
        .into_result()
        .map(drop)
        .map_err(|failure| PyAssertionError::new_err(failure.to_string()))
}

/// A devmm error carrying an exception raised by a Python hook of the suite.
fn hook_failure(py: Python<'_>, hook: &str, err: PyErr) -> devmm::Error {
    PythonException::raised(py, err, format!("the {hook} hook"), None)
}

/// Runs the memory-resource contract against fresh resources from
/// `mr_factory` (a resource class, or any callable returning a resource):
/// byte-exact writes and reads, no aliasing, alignment honesty, live-count
/// bookkeeping, misuse detection, zero-byte and negative-size requests.
/// Raises `AssertionError` naming each failed check.
///
/// A factory that takes an `alignment` keyword (a resource class such as
/// `MallocMemoryResource`) is also asked for each power of two from 1 to
/// 4096 except 2048 (as the seed's sweep), and its pointers must meet each
/// (`requested_alignment`).
///
/// The suite reads and writes memory with the device runtime's copies,
/// which need a resource that declares its pointers dereferenceable; for
/// any other memory pass `write(ptr, data)` and `read(ptr, nbytes) -> bytes`
/// (the suite then uses them and needs no declaration), or
/// `data_access=False` to skip the byte checks. `stream_factory()` makes
/// the streams the checks run on. Each hook may also take one more
/// argument: `write(ptr, data, stream)`, `read(ptr, nbytes, stream)`,
/// `stream_factory(device)`.
///
/// `mr_factory` is a callable returning a new `DeviceMemoryResource` (a
/// class, say). Returns `None`; raises `AssertionError` naming each failed
/// check.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm.testing
/// >>> from devmm.mrs.cpu import BytearrayMemoryResource
/// >>> devmm.testing.mr_conformance(BytearrayMemoryResource)  # raises on violation
/// >>> devmm.testing.mr_conformance(lambda: None)
/// Traceback (most recent call last):
///     ...
/// AssertionError: conformance violated: mr_conformance of a failing factory ...
///
/// ```
#[pyfunction]
#[pyo3(signature = (mr_factory, *, write = None, read = None, stream_factory = None, data_access = true))]
pub(crate) fn mr_conformance(
    py: Python<'_>,
    mr_factory: Py<PyAny>,
    write: Option<Py<PyAny>>,
    read: Option<Py<PyAny>>,
    stream_factory: Option<Py<PyAny>>,
    data_access: bool,
) -> PyResult<()> {
    let negative_size = negative_size(py, &mr_factory, stream_factory.as_ref());
    let options = hook_options(py, &mr_factory, write, read, stream_factory, data_access);
    let mut report = run_mr_conformance(py, mr_factory, options);
    report.push("negative_size", negative_size);
    raise_on_failure(report)
}

/// The check the binding adds to the core's suite: a negative size, which
/// the core's unsigned sizes cannot express, is refused by the resource's
/// `allocate` with `ValueError`. The rule is the seed's
/// `check_negative_size`, in `devmm.testing._conformance`, run on a
/// resource from `mr_factory` and a stream from `stream_factory` (its
/// device's default stream without one).
fn negative_size(
    py: Python<'_>,
    mr_factory: &Py<PyAny>,
    stream_factory: Option<&Py<PyAny>>,
) -> CheckStatus {
    let subject = || -> PyResult<(Bound<'_, PyAny>, Bound<'_, PyAny>)> {
        let mr = mr_factory.bind(py).call0()?;
        let DeviceArg(device) = mr.getattr(intern!(py, "device"))?.extract()?;
        let stream = match stream_factory {
            Some(make) => made_stream(make.bind(py), takes_positional(make.bind(py), 1), device)?,
            None => stream_object(py, &resolve_stream(None, device)?)?,
        };
        Ok((mr, stream))
    };
    let (mr, stream) = match subject() {
        Ok(subject) => subject,
        Err(e) => {
            return CheckStatus::Failed(format!(
                "could not make a resource and a stream to ask allocate(-1) of: {e}"
            ))
        }
    };
    let checked = py
        .import(intern!(py, "devmm.testing._conformance"))
        .and_then(|m| m.call_method1(intern!(py, "check_negative_size"), (mr, stream)));
    match checked {
        Ok(_) => CheckStatus::Passed,
        Err(e) if e.is_instance_of::<PyAssertionError>(py) => {
            CheckStatus::Failed(e.value(py).to_string())
        }
        Err(e) => CheckStatus::Failed(format!(
            "allocate(-1, stream) must raise ValueError, but raised {e}"
        )),
    }
}

/// A stream from the suite's `stream_factory` hook: the seed's
/// `stream_factory()`, or ours given the device.
fn made_stream<'py>(
    make: &Bound<'py, PyAny>,
    with_device: bool,
    device: devmm::Device,
) -> PyResult<Bound<'py, PyAny>> {
    if with_device {
        make.call1((PyDevice::from(device),))
    } else {
        make.call0()
    }
}

/// Runs only the named checks of `mr_conformance` (the pytest mixin
/// `devmm.testing._mr_conformance` runs one per test) with the same
/// hooks. Raises `AssertionError` naming each failed check (a name that is
/// no check fails too); returns `"name: reason"` for each check skipped.
#[pyfunction]
#[pyo3(signature = (mr_factory, checks, *, write = None, read = None, stream_factory = None, data_access = true))]
pub(crate) fn _mr_checks(
    py: Python<'_>,
    mr_factory: Py<PyAny>,
    checks: Vec<String>,
    write: Option<Py<PyAny>>,
    read: Option<Py<PyAny>>,
    stream_factory: Option<Py<PyAny>>,
    data_access: bool,
) -> PyResult<Vec<String>> {
    let options =
        hook_options(py, &mr_factory, write, read, stream_factory, data_access).only(checks);
    let report = run_mr_conformance(py, mr_factory, options);
    let skipped = report
        .checks()
        .iter()
        .filter_map(|check| match &check.status {
            CheckStatus::Skipped(reason) => Some(format!("{}: {reason}", check.name)),
            _ => None,
        })
        .collect();
    raise_on_failure(report)?;
    Ok(skipped)
}

/// The core's options calling the Python hooks of `mr_conformance`, with
/// an aligned factory when `mr_factory` takes an `alignment` keyword.
fn hook_options(
    py: Python<'_>,
    mr_factory: &Py<PyAny>,
    write: Option<Py<PyAny>>,
    read: Option<Py<PyAny>>,
    stream_factory: Option<Py<PyAny>>,
    data_access: bool,
) -> MrConformanceOptions {
    // The seed's suite asks every resource to count its live allocations
    // and refuse misuse; every resource Python makes does (docs/adr/0009).
    let mut options = MrConformanceOptions::new().requiring(["live_count", "misuse_detection"]);
    if let Some(write) = write {
        // The seed's `write(ptr, data)`, or ours with the stream as well.
        let with_stream = takes_positional(write.bind(py), 3);
        options = options.write(move |dst, src, stream| {
            Python::attach(|py| {
                let (ptr, data) = (dst.addr(), PyBytes::new(py, src));
                let written = if with_stream {
                    stream_object(py, stream).and_then(|s| write.call1(py, (ptr, data, s)))
                } else {
                    write.call1(py, (ptr, data))
                };
                written.map(drop).map_err(|e| hook_failure(py, "write", e))
            })
        });
    }
    if let Some(read) = read {
        // The seed's `read(ptr, nbytes)`, or ours with the stream as well.
        let with_stream = takes_positional(read.bind(py), 3);
        options = options.read(move |dst, src, stream| {
            Python::attach(|py| {
                let (ptr, nbytes) = (src.addr(), dst.len());
                let data = if with_stream {
                    stream_object(py, stream).and_then(|s| read.call1(py, (ptr, nbytes, s)))
                } else {
                    read.call1(py, (ptr, nbytes))
                };
                let data: Vec<u8> = data
                    .and_then(|b| b.extract(py))
                    .map_err(|e| hook_failure(py, "read", e))?;
                if data.len() != dst.len() {
                    return Err(devmm::Error::InvalidArgument {
                        reason: format!(
                            "the read hook returned {} bytes, not {}",
                            data.len(),
                            dst.len()
                        ),
                    });
                }
                dst.copy_from_slice(&data);
                Ok(())
            })
        });
    }
    if let Some(make) = stream_factory {
        let with_device = takes_positional(make.bind(py), 1);
        options = options.stream_factory(move |device| {
            Python::attach(|py| {
                made_stream(make.bind(py), with_device, device)
                    .and_then(|s| crate::stream::stream_of(&s))
                    .map_err(|e| hook_failure(py, "stream_factory", e))
            })
        });
    }
    if !data_access {
        options = options.without_data_access();
    }
    if takes_alignment(mr_factory.bind(py)) {
        let factory = mr_factory.clone_ref(py);
        options = options.aligned_factory(move |alignment| {
            Python::attach(|py| {
                let made = || -> PyResult<Box<dyn devmm::MemoryResource>> {
                    let kwargs = [("alignment", alignment)].into_py_dict(py)?;
                    let made = factory.bind(py).call((), Some(&kwargs))?;
                    Ok(Box::new(subject_of(made.cast::<PyMemoryResource>()?)?))
                };
                made().map_err(|e| hook_failure(py, "factory", e))
            })
        });
    }
    options
}

/// The core's suite over resources from the Python `mr_factory`.
fn run_mr_conformance(
    py: Python<'_>,
    mr_factory: Py<PyAny>,
    options: MrConformanceOptions,
) -> ConformanceReport {
    // The suite runs checks on several threads, and Python resources need
    // the GIL on each of them: run it detached, attaching for every call.
    let factory = move || {
        Python::attach(|py| {
            let made = mr_factory
                .call0(py)
                .map_err(|e| hook_failure(py, "factory", e))?;
            let mr = made.bind(py).cast::<PyMemoryResource>().map_err(|_| {
                devmm::Error::InvalidArgument {
                    reason: "the factory did not return a devmm.DeviceMemoryResource".into(),
                }
            })?;
            subject_of(mr).map_err(|e| hook_failure(py, "factory", e))
        })
    };
    crate::gil::detach(py, || devmm::testing::mr_conformance(factory, &options))
}

/// What the suite checks for the resource `obj`: a native one as devmm
/// uses it; a Python-defined one by its own methods, as the seed's suite
/// checks it: misuse is its own `ValueError` (a `RecordingMisuseError`
/// from a recording base it calls), its count its own
/// `_debug_live_count()`. A hook that raises, or answers neither an int
/// nor `None` (tracks nothing, as no hook), fails the factory, saying so.
fn subject_of(obj: &Bound<'_, PyMemoryResource>) -> PyResult<Arc<dyn devmm::MemoryResource>> {
    let Some(methods) = own_methods(obj)? else {
        return resource_of(obj);
    };
    let py = obj.py();
    let hook = obj.getattr(intern!(py, "_debug_live_count"))?;
    let count = match hook.is_callable() {
        true => hook.call0()?,
        false => py.None().into_bound(py),
    };
    if !count.is_none() && count.extract::<usize>().is_err() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "_debug_live_count() must return an int (or None: it tracks nothing), got {}",
            count.repr()?
        )));
    }
    let is_misuse = |err: &devmm::Error| {
        crate::gil::attach(|py| {
            raised_python::<PyValueError>(py, err) || raised_python::<RecordingMisuseError>(py, err)
        })
        .unwrap_or(false)
    };
    // The closure's reference is what keeps a factory-made `obj` alive
    // while the suite checks it: its methods are called through a weak one.
    let obj = obj.clone().into_any().unbind();
    let live_count = move || {
        crate::gil::attach(|py| {
            let count = obj
                .bind(py)
                .getattr(intern!(py, "_debug_live_count"))
                .and_then(|method| crate::gil::call(&method, (), None));
            count.ok()?.extract::<usize>().ok()
        })
        .flatten()
    };
    Ok(Arc::new(ReportedMisuse::new(
        methods, is_misuse, live_count,
    )))
}

/// `inspect.signature(callable)`, or `None` for a callable it cannot read.
fn signature<'py>(callable: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    let py = callable.py();
    py.import(intern!(py, "inspect"))
        .and_then(|inspect| inspect.call_method1(intern!(py, "signature"), (callable,)))
        .ok()
}

/// Whether `callable` can be called with `n` positional arguments, as its
/// signature reports it; a callable without a signature cannot.
fn takes_positional(callable: &Bound<'_, PyAny>, n: usize) -> bool {
    let py = callable.py();
    signature(callable).is_some_and(|signature| {
        let args = pyo3::types::PyTuple::new(py, (0..n).map(|_| py.None()));
        args.is_ok_and(|args| signature.call_method1(intern!(py, "bind"), args).is_ok())
    })
}

/// Whether `factory` accepts an `alignment` keyword (or any keyword), as
/// `inspect.signature` reports it; a callable without a signature does not.
fn takes_alignment(factory: &Bound<'_, PyAny>) -> bool {
    let py = factory.py();
    let Some(signature) = signature(factory) else {
        return false;
    };
    let accepts = || -> PyResult<bool> {
        let parameters = signature.getattr(intern!(py, "parameters"))?;
        for p in parameters.call_method0(intern!(py, "values"))?.try_iter()? {
            let p = p?;
            // inspect.Parameter's kinds: 1 positional or keyword, 3 keyword
            // only, 4 `**kwargs`.
            let kind: u8 = p.getattr(intern!(py, "kind"))?.extract()?;
            if kind == 4
                || matches!(kind, 1 | 3) && p.getattr(intern!(py, "name"))?.eq("alignment")?
            {
                return Ok(true);
            }
        }
        Ok(false)
    };
    accepts().unwrap_or(false)
}

/// Runs the DLPack producer contract for tensors on `device` (both capsule
/// flavours, field fidelity, every refusal, deleter lifetime). The tensors
/// come from the device's current resource, as `devmm.empty` makes them:
/// scope one with `using_memory_resource` to check a runtime with a
/// particular resource. The suite never reads or writes the memory.
/// Raises `AssertionError` naming each failed check.
///
/// `device` is a `Device` or a string. Returns `None`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm.testing
/// >>> devmm.testing.dlpack_conformance("cpu")  # raises on violation
///
/// ```
#[pyfunction]
pub(crate) fn dlpack_conformance(py: Python<'_>, device: DeviceArg) -> PyResult<()> {
    // Deleters run on other threads in the suite; they may need the GIL.
    raise_on_failure(crate::gil::detach(py, || {
        devmm::testing::dlpack_conformance(device.0)
    }))
}

/// An allocator double: deterministic fake pointers (the first is the
/// alignment, 256 by default),
/// a verbatim call log and misuse detection: a double free, an unknown
/// pointer or a wrong size is a `RecordingMisuseError`, from `deallocate`
/// or through a buffer or adaptor (the call is logged either way). It
/// never touches memory, so
/// it stands in for any device.
///
/// `RecordingMemoryResource(device=None, *, stream_ordered=True,
/// guaranteed_alignment=256)`: `device` is a `Device` or a string. `live`
/// maps each live pointer to its size, `calls` is the call log.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.testing import RecordingMemoryResource
/// >>> recording = RecordingMemoryResource()
/// >>> buf = devmm.DeviceBuffer(64, mr=recording)
/// >>> recording.live, recording.calls[0][:3]
/// ({256: 64}, ('allocate', 256, 64))
/// >>> buf.free()
/// >>> recording.live
/// {}
/// >>> recording.deallocate(256, 64)
/// Traceback (most recent call last):
///     ...
/// devmm.testing.RecordingMisuseError: misuse of RecordingMemoryResource(device=cpu:0, alignment=256) on cpu:0: double-free: ...
///
/// ```
#[pyclass(
    extends = PyMemoryResource,
    subclass,
    name = "RecordingMemoryResource",
    module = "devmm.testing"
)]
#[derive(Default)]
pub(crate) struct PyRecordingMemoryResource {
    recording: OnceLock<Arc<devmm::testing::RecordingMemoryResource>>,
}

shipped_new!(PyRecordingMemoryResource);

#[pymethods]
impl PyRecordingMemoryResource {
    /// A recording resource on `device` (cpu when `None`) whose pointers
    /// meet `guaranteed_alignment` (a power of two), claiming
    /// stream-ordered allocation unless `stream_ordered=False`.
    #[pyo3(signature = (
        device = None,
        *,
        stream_ordered = true,
        guaranteed_alignment = Count::of(devmm::testing::RECORDING_DEFAULT_ALIGNMENT),
    ))]
    #[pyo3(
        text_signature = "($self, device=None, *, stream_ordered=True, guaranteed_alignment=256)"
    )]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        stream_ordered: bool,
        guaranteed_alignment: Count<GuaranteedAlignment>,
    ) -> PyResult<()> {
        let guaranteed_alignment = guaranteed_alignment.get();
        let device = device.map_or(devmm::Device::CPU, |d| d.0);
        let recording = Arc::new(
            devmm::testing::RecordingMemoryResource::with_alignment(device, guaranteed_alignment)
                .py()?
                .with_stream_ordered(stream_ordered),
        );
        let base = PyMemoryResource::native(recording.clone());
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().recording.set(recording);
        Ok(())
    }

    /// The seed's repr: the class's name and the device.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let device = slf.getattr(intern!(slf.py(), "device"))?;
        Ok(format!("{}(device={device})", slf.get_type().name()?))
    }

    /// The live allocations, address to size.
    #[getter]
    fn live<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let live = PyDict::new(py);
        for (ptr, nbytes) in built(&self.recording)?.live() {
            live.set_item(ptr, nbytes)?;
        }
        Ok(live)
    }

    /// The call log: every call so far, in order, as the seed logs them.
    /// A live view, as the seed's list attribute is: it reads the calls
    /// made since, and `calls.clear()` forgets them.
    #[getter]
    fn calls(&self) -> PyResult<PyRecordedCalls> {
        Ok(PyRecordedCalls {
            recording: Arc::clone(built(&self.recording)?),
        })
    }
}

/// A `RecordingMemoryResource`'s call log, a live sequence of
/// `("allocate", ptr, nbytes, stream)` (`ptr` is `None` when the
/// allocation failed) and `("deallocate", ptr, nbytes, stream)` tuples,
/// refused calls included. It is a sequence (`len`, indexing, slicing,
/// `reversed`, `count`, `index`, `copy()` for a list) that compares equal
/// to a list of the same tuples; `clear()` forgets the calls so far.
#[pyclass(frozen, sequence, name = "RecordedCalls", module = "devmm._devmm")]
pub(crate) struct PyRecordedCalls {
    recording: Arc<devmm::testing::RecordingMemoryResource>,
}

impl PyRecordedCalls {
    /// The calls logged so far, as a list.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let row = |call| -> PyResult<_> {
            Ok(match call {
                RecordedCall::Allocate {
                    nbytes,
                    stream,
                    result,
                } => (
                    "allocate",
                    result.ok().map(|p| p.addr()),
                    nbytes,
                    stream_object(py, &stream)?,
                ),
                RecordedCall::Deallocate {
                    ptr,
                    nbytes,
                    stream,
                    ..
                } => (
                    "deallocate",
                    Some(ptr.addr()),
                    nbytes,
                    stream_object(py, &stream)?,
                ),
            })
        };
        let rows: Vec<_> = self
            .recording
            .calls()
            .into_iter()
            .map(row)
            .collect::<PyResult<_>>()?;
        PyList::new(py, rows)
    }
}

#[pymethods]
impl PyRecordedCalls {
    fn __len__(&self) -> usize {
        self.recording.calls().len()
    }

    /// The call at `index` (negative from the end), or a list of the calls
    /// a slice selects.
    ///
    /// (Iteration and `in` go through it, as for any sequence.)
    ///
    /// Python type: `Any`
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.snapshot(py)?.as_any().get_item(index)
    }

    /// Equal to another log or a list holding the same calls.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let other = match other.cast::<PyRecordedCalls>() {
            Ok(log) => log.get().snapshot(py)?.into_any(),
            Err(_) => other.clone(),
        };
        self.snapshot(py)?.as_any().eq(other)
    }

    /// The calls logged so far, as a new list.
    fn copy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.snapshot(py)
    }

    /// How many logged calls equal `call`.
    fn count(&self, py: Python<'_>, call: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.snapshot(py)?.call_method1("count", (call,))?.extract()
    }

    /// The position of the first logged call equal to `call` (`ValueError`
    /// when none is).
    fn index(&self, py: Python<'_>, call: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.snapshot(py)?.index(call)
    }

    /// Forgets the calls logged so far (the live allocations stay).
    fn clear(&self) {
        self.recording.clear_calls();
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.snapshot(py)?.repr()?.to_string())
    }
}
