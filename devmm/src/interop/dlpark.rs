//! Conversions between devmm and dlpark's owning handles
//! (`dlpark::versioned::Dlpack`, `dlpark::legacy::Dlpack`), both ways.
//!
//! The two crates mirror the same C structs (`dlpack.h`), so a handle
//! moves across as its raw pointer; the cast happens once, here, and no
//! user writes it.
//!
//! ```
//! use devmm::{empty, DType, EmptyOptions, Tensor};
//! let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new())?;
//! // devmm -> dlpark: an export dlpark owns (and deletes).
//! let theirs = dlpark::versioned::Dlpack::try_from(&t)?;
//! assert_eq!(theirs.validate().unwrap().shape(), &[2, 3]);
//! // dlpark -> devmm: the import owns dlpark's handle.
//! let back = Tensor::try_from(theirs)?;
//! assert_eq!((back.data_ptr(), back.shape()), (t.data_ptr(), t.shape()));
//! drop(back);
//! assert_eq!(t.buffer().live_exports(), 0);
//! # Ok::<(), devmm::Error>(())
//! ```

use dlpark::{legacy, versioned};

use crate::dlpack::{DlpackExport, DlpackFlavor, DlpackRequest, ffi};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

// The two mirrors of dlpack.h must agree for the pointer casts below.
const _: () = {
    assert!(
        std::mem::size_of::<ffi::DLManagedTensorVersioned>()
            == std::mem::size_of::<dlpark::ffi::DLManagedTensorVersioned>()
    );
    assert!(
        std::mem::size_of::<ffi::DLManagedTensor>()
            == std::mem::size_of::<dlpark::ffi::DLManagedTensor>()
    );
};

fn handle_error(e: impl std::fmt::Display) -> Error {
    Error::Dlpack {
        reason: format!("dlpark refused the managed tensor: {e}"),
    }
}

fn flavor_error(asked: &str, got: DlpackFlavor) -> Error {
    Error::Dlpack {
        reason: format!(
            "a {got:?} export cannot become dlpark's {asked} handle; export with \
             max_version (1, 0) or newer for versioned, without it for legacy"
        ),
    }
}

impl TryFrom<DlpackExport> for versioned::Dlpack {
    type Error = Error;

    /// Hands a versioned export to dlpark (a legacy one is refused and deleted).
    fn try_from(export: DlpackExport) -> Result<Self> {
        if export.flavor() != DlpackFlavor::Versioned {
            return Err(flavor_error("versioned", export.flavor()));
        }
        let raw = export
            .into_raw()
            .cast::<dlpark::ffi::DLManagedTensorVersioned>();
        // SAFETY: a live versioned export whose deleter nobody else will
        // call; both structs mirror dlpack.h (sizes asserted above, layout
        // checked against the header in tests/dlpack_abi.rs). dlpark
        // releases it on a version error.
        unsafe { versioned::Dlpack::from_raw(raw) }.map_err(handle_error)
    }
}

impl TryFrom<DlpackExport> for legacy::Dlpack {
    type Error = Error;

    /// Hands a legacy export to dlpark (a versioned one is refused and deleted).
    fn try_from(export: DlpackExport) -> Result<Self> {
        if export.flavor() != DlpackFlavor::Legacy {
            return Err(flavor_error("legacy", export.flavor()));
        }
        let raw = export.into_raw().cast::<dlpark::ffi::DLManagedTensor>();
        // SAFETY: as for the versioned handle, for the legacy struct.
        unsafe { legacy::Dlpack::from_raw(raw) }.map_err(handle_error)
    }
}

impl TryFrom<&Tensor> for versioned::Dlpack {
    type Error = Error;

    /// Exports `tensor` (versioned, no stream hand-off) into dlpark's handle.
    fn try_from(tensor: &Tensor) -> Result<Self> {
        tensor
            .to_dlpack(&DlpackRequest::new().max_version(1, 1))?
            .try_into()
    }
}

impl TryFrom<&Tensor> for legacy::Dlpack {
    type Error = Error;

    /// Exports `tensor` as the legacy struct into dlpark's handle.
    fn try_from(tensor: &Tensor) -> Result<Self> {
        tensor.to_dlpack(&DlpackRequest::new())?.try_into()
    }
}

impl TryFrom<versioned::Dlpack> for Tensor {
    type Error = Error;

    /// Imports dlpark's handle; the tensor owns it from here on.
    fn try_from(handle: versioned::Dlpack) -> Result<Self> {
        let raw = handle.into_raw().cast::<std::ffi::c_void>();
        // SAFETY: dlpark's handle owns a live, version-checked struct, and
        // `into_raw` gave that ownership up to us.
        unsafe { Tensor::from_dlpack(raw, DlpackFlavor::Versioned) }
    }
}

impl TryFrom<legacy::Dlpack> for Tensor {
    type Error = Error;

    /// Imports dlpark's legacy handle; the tensor owns it from here on.
    fn try_from(handle: legacy::Dlpack) -> Result<Self> {
        let raw = handle.into_raw().cast::<std::ffi::c_void>();
        // SAFETY: as for the versioned handle.
        unsafe { Tensor::from_dlpack(raw, DlpackFlavor::Legacy) }
    }
}
