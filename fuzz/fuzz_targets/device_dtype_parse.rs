//! Device and dtype strings, as users (and Python) pass them: parsing any
//! text is a value or a typed error, and every parsed value prints as text
//! that parses back to itself.
#![no_main]

use devmm::{DType, Device, Error, ParseDeviceError};
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
            // The DLPack pair round-trips; dlpack.h numbers host-side
            // memory (cpu, pinned, managed) as device 0, so for those the
            // ordinal does not.
            let (ty, id) = device.dlpack_device();
            let back = Device::from_dlpack(ty, id).expect("a device's DLPack pair is valid");
            assert_eq!((back.ty(), back.dlpack_device()), (device.ty(), (ty, id)));
        }
        Err(error) => assert!(
            matches!(
                error,
                ParseDeviceError::Unrecognized {
                    what: "malformed device string" | "unknown device type",
                    ..
                } | ParseDeviceError::InvalidIndex { .. }
            ),
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
