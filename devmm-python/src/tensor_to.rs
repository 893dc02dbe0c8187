//! `Tensor.to`: the binding of the core's [`devmm::Tensor::to`], which
//! decides the stream's device, the layout kept, the resource and the copy.

use pyo3::prelude::*;

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::layout::PyLayoutPolicy;
use crate::stream::{maybe_detached, resolve_stream, KeptStreamArg};
use crate::tensor::{LayoutArg, PyTensor};

#[pymethods]
impl PyTensor {
    /// A copy on `device` (same shape and dtype), allocated from the
    /// device's current resource and writable even when this tensor is
    /// read-only. `layout` (a policy or a resolved `Layout`) lays it out;
    /// by default it keeps this tensor's layout. `stream` orders the copy:
    /// a stream of the GPU side (the device copied from or to; the CPU for
    /// a host copy), its default stream when `None`. The copy waits for the
    /// work queued on this tensor's buffer stream, and that stream waits for
    /// the copy. As rmm's copies, one on a default stream is finished when
    /// this returns; one within a GPU on another stream is asynchronous
    /// (copies from or to the host are always finished). CPU ↔ CUDA,
    /// CPU ↔ ROCm, and within one device; any other pair is a `ValueError`
    /// naming both devices, as is a stream of another device.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm, numpy as np
    /// >>> t = devmm.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    /// >>> copy = t.to("cpu", layout=devmm.ColMajor())
    /// >>> copy.shape, copy.strides, copy.read_only
    /// ((2, 3), (1, 2), False)
    /// >>> np.from_dlpack(copy)
    /// array([[0., 1., 2.],
    ///        [3., 4., 5.]], dtype=float32)
    /// >>> on_gpu = t.to("cuda:0")  # doctest: +SKIP
    /// >>> back = on_gpu.to("cpu")  # doctest: +SKIP
    ///
    /// ```
    #[pyo3(signature = (device, *, stream = None, layout = None))]
    fn to(
        slf: &Bound<'_, Self>,
        device: DeviceArg,
        stream: Option<KeptStreamArg>,
        layout: Option<LayoutArg<'_>>,
    ) -> PyResult<PyTensor> {
        let py = slf.py();
        let source = &slf.get().tensor;
        let device = device.0;
        let side = source.copy_device(device).py()?;
        let (stream, stream_obj) = KeptStreamArg::split(stream);
        let stream = stream.map(|s| resolve_stream(Some(s), side)).transpose()?;
        let (shape, dtype) = (source.shape(), source.dtype());
        let given = match layout {
            None => None,
            Some(LayoutArg::Resolved(layout)) => {
                let layout = layout.get();
                Some((
                    layout.layout.clone(),
                    layout.policy.as_ref().map(|p| p.clone_ref(py)),
                ))
            }
            Some(LayoutArg::Policy(policy)) => match &policy.get().inner {
                Some(inner) => {
                    let layout = devmm::Layout::resolve(inner, shape, dtype, device).py()?;
                    Some((layout, Some(policy.into_any().unbind())))
                }
                None => {
                    let layout = PyLayoutPolicy::call_python(&policy, shape, dtype, device)?;
                    let layout = layout.get();
                    Some((
                        layout.layout.clone(),
                        layout.policy.as_ref().map(|p| p.clone_ref(py)),
                    ))
                }
            },
        };
        let (layout, policy) = match given {
            Some((layout, policy)) => (Some(layout), Some(policy)),
            None => (None, None),
        };
        let copy = maybe_detached(py, side, || source.to(device, stream.as_ref(), layout)).py()?;
        // The `Stream` object is the buffer's only where the copy was allocated on it.
        let allocated_on_it = stream.as_ref() == Some(copy.buffer().stream());
        slf.get()
            .copied(py, copy, policy, stream_obj.filter(|_| allocated_on_it))
    }
}
