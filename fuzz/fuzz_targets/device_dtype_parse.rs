//! Device and dtype strings, as users (and Python) pass them: parsing any
//! text is a value or a typed error, and every parsed value prints as text
//! that parses back to itself.
#![no_main]

use devmm::{DType, Device, Error};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match text.parse::<Device>() {
        Ok(device) => {
            let shown = device.to_string();
            assert_eq!(
                shown.parse::<Device>().ok(),
                Some(device),
                "{text:?} -> {shown:?}"
            );
            let (ty, id) = device.dlpack_device();
            assert_eq!(Device::from_dlpack(ty, id).ok(), Some(device));
        }
        Err(error) => assert!(
            matches!(error, Error::Parse { what: "device", .. }),
            "{error:?}"
        ),
    }
    match text.parse::<DType>() {
        Ok(dtype) => {
            let shown = dtype.to_string();
            assert_eq!(
                shown.parse::<DType>().ok(),
                Some(dtype),
                "{text:?} -> {shown:?}"
            );
            assert!(dtype.itemsize() > 0 || dtype.bits() == 0);
        }
        Err(error) => assert!(matches!(error, Error::Parse { .. }), "{error:?}"),
    }
});
