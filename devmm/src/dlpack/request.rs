//! What a DLPack consumer asks for, and the negotiation that answers it.

use std::ffi::CStr;

use super::ffi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The arguments of `__dlpack__(stream=, max_version=, dl_device=, copy=)`,
/// as the protocol passes them. Every field is optional; the default asks
/// for a legacy export with no stream handoff.
///
/// ```
/// use devmm::dlpack::{DlpackFlavor, DlpackRequest};
/// let request = DlpackRequest::new().max_version(1, 0).stream(-1);
/// assert_eq!(request.max_version, Some((1, 0)));
/// assert_eq!(request.flavor(), DlpackFlavor::Versioned);
/// assert_eq!(DlpackRequest::default().flavor(), DlpackFlavor::Legacy);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DlpackRequest {
    /// The newest DLPack version the consumer reads; `None` (a pre-1.0
    /// consumer) or a major of 0 gets the legacy struct.
    pub max_version: Option<(u32, u32)>,
    /// The consumer's stream, as the protocol's integer: `-1` asks for no
    /// synchronization; `None` lets the platform pick (DLPack rules).
    pub stream: Option<i64>,
    /// The `(device_type, device_id)` the consumer wants the data on; only
    /// the tensor's own device is served.
    pub dl_device: Option<(i32, i32)>,
    /// `Some(true)` demands a copy, which devmm refuses; `Some(false)` and
    /// `None` accept the zero-copy export devmm always makes.
    pub copy: Option<bool>,
}

impl DlpackRequest {
    /// All defaults: a legacy consumer that names no stream, device or copy.
    pub const fn new() -> DlpackRequest {
        DlpackRequest {
            max_version: None,
            stream: None,
            dl_device: None,
            copy: None,
        }
    }

    /// Sets `max_version`.
    pub const fn max_version(mut self, major: u32, minor: u32) -> DlpackRequest {
        self.max_version = Some((major, minor));
        self
    }

    /// Sets `stream`.
    pub const fn stream(mut self, stream: i64) -> DlpackRequest {
        self.stream = Some(stream);
        self
    }

    /// Sets `dl_device`.
    pub const fn dl_device(mut self, device_type: i32, device_id: i32) -> DlpackRequest {
        self.dl_device = Some((device_type, device_id));
        self
    }

    /// Sets `copy`.
    pub const fn copy(mut self, copy: bool) -> DlpackRequest {
        self.copy = Some(copy);
        self
    }

    /// The struct this consumer gets: versioned from `max_version` (1, 0)
    /// on, legacy otherwise.
    pub const fn flavor(&self) -> DlpackFlavor {
        match self.max_version {
            Some((major, _)) if major >= 1 => DlpackFlavor::Versioned,
            _ => DlpackFlavor::Legacy,
        }
    }

    /// The version a versioned export is stamped with: the consumer's
    /// `max_version` where it is an older 1.x than ours, else ours (1, 1).
    ///
    /// ```
    /// use devmm::dlpack::DlpackRequest;
    /// assert_eq!(DlpackRequest::new().max_version(1, 0).stamped_version(), (1, 0));
    /// assert_eq!(DlpackRequest::new().max_version(1, 7).stamped_version(), (1, 1));
    /// assert_eq!(DlpackRequest::new().max_version(2, 0).stamped_version(), (1, 1));
    /// ```
    pub const fn stamped_version(&self) -> (u32, u32) {
        match self.max_version {
            Some((DLPACK_MAJOR_VERSION, minor)) if minor < DLPACK_MINOR_VERSION => {
                (DLPACK_MAJOR_VERSION, minor)
            }
            _ => (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION),
        }
    }

    /// Checks everything that does not depend on the buffer's state and
    /// returns the flavour to export. Refusals are [`Error::Dlpack`].
    /// Inlined: on the export's hot path the call and its returned
    /// `Result` cost as much as the checks.
    #[inline]
    pub(crate) fn negotiate(&self, tensor: &Tensor) -> Result<DlpackFlavor> {
        if self.copy == Some(true) {
            // The seed's sentence, then the way to a copy (ADR 0016 item 42).
            return Err(refusal(
                "copy=True is not supported; devmm exports are always zero-copy; call \
                 Tensor.to(device) for a copy and export that",
            ));
        }
        // The tensor's device costs a virtual call: only asked when needed.
        if let Some(asked) = self.dl_device
            && asked != tensor.device().dlpack_device()
        {
            let own = tensor.device().dlpack_device();
            // Exports stay zero-copy (the seed's rule); the copy is explicit.
            let copy = match Device::from_dlpack(asked.0, asked.1) {
                Ok(device) => format!("call Tensor.to(\"{device}\") for a copy on {device}"),
                Err(_) => "call Tensor.to(device) for a copy on a device devmm knows".to_owned(),
            };
            return Err(refusal(format!(
                "cross-device export is not supported: dl_device={asked:?} was asked, but the \
                 tensor lives on {} {own:?} and exports are zero-copy; {copy} and export \
                 that, or omit dl_device",
                tensor.device(),
            )));
        }
        let flavor = self.flavor();
        if flavor == DlpackFlavor::Legacy && tensor.is_read_only() {
            let asked = match self.max_version {
                Some((major, minor)) => format!("({major}, {minor})"),
                None => "None".to_owned(),
            };
            return Err(refusal(format!(
                "the tensor is read-only, but the consumer reads only the legacy DLPack struct \
                 (max_version={asked}), and the legacy DLManagedTensor cannot express the \
                 read-only flag; request max_version >= (1, 0) or export a writable \
                 tensor"
            )));
        }
        Ok(flavor)
    }
}

/// Which managed struct an export holds.
///
/// ```
/// use devmm::dlpack::DlpackFlavor;
/// assert_eq!(DlpackFlavor::Versioned.capsule_name(), c"dltensor_versioned");
/// assert_eq!(DlpackFlavor::Legacy.used_capsule_name(), c"used_dltensor");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DlpackFlavor {
    /// `DLManagedTensorVersioned`, stamped with the negotiated version and flags.
    Versioned,
    /// `DLManagedTensor`, for consumers older than DLPack 1.0.
    Legacy,
}

impl DlpackFlavor {
    /// The PyCapsule name the protocol gives an export of this flavour.
    pub const fn capsule_name(self) -> &'static CStr {
        match self {
            DlpackFlavor::Versioned => c"dltensor_versioned",
            DlpackFlavor::Legacy => c"dltensor",
        }
    }

    /// The name a consumer renames the capsule to once it took ownership.
    pub const fn used_capsule_name(self) -> &'static CStr {
        match self {
            DlpackFlavor::Versioned => c"used_dltensor_versioned",
            DlpackFlavor::Legacy => c"used_dltensor",
        }
    }
}

fn refusal(reason: impl Into<String>) -> Error {
    Error::Dlpack {
        reason: reason.into(),
    }
}

/// The refusal for a buffer that was freed before the export.
pub(crate) fn freed_refusal(tensor: &Tensor) -> Error {
    refusal(format!(
        "cannot export a freed DeviceBuffer (use-after-free): the tensor's buffer of {} bytes \
         on {} was freed; export before calling free(), or allocate a new tensor",
        tensor.buffer().nbytes(),
        tensor.device()
    ))
}
