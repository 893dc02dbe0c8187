//! The names devmm accepts in macro arguments: dtypes and device types.
//!
//! These mirror `devmm::DType::STANDARD` and `devmm::DeviceType::ALL`; the
//! macros need them to reject a bad name with a span before anything is
//! compiled. The ui-tests compile every name here against devmm, so an entry
//! devmm lacks fails the build (see docs/adr/0005-macros.md).

/// A standard dtype: its name, the `DType` constant, and bytes per element.
pub(crate) struct DTypeName {
    pub(crate) name: &'static str,
    pub(crate) konst: &'static str,
    pub(crate) itemsize: usize,
}

macro_rules! dtypes {
    ($($name:literal => $konst:literal, $size:literal;)*) => {
        pub(crate) const DTYPES: &[DTypeName] = &[
            $(DTypeName { name: $name, konst: $konst, itemsize: $size },)*
        ];
    };
}

dtypes! {
    "bool" => "BOOL", 1;
    "int8" => "INT8", 1;
    "int16" => "INT16", 2;
    "int32" => "INT32", 4;
    "int64" => "INT64", 8;
    "uint8" => "UINT8", 1;
    "uint16" => "UINT16", 2;
    "uint32" => "UINT32", 4;
    "uint64" => "UINT64", 8;
    "float16" => "FLOAT16", 2;
    "float32" => "FLOAT32", 4;
    "float64" => "FLOAT64", 8;
    "bfloat16" => "BFLOAT16", 2;
    "complex64" => "COMPLEX64", 8;
    "complex128" => "COMPLEX128", 16;
}

/// The dtype named `name`.
pub(crate) fn dtype(name: &str) -> Option<&'static DTypeName> {
    DTYPES.iter().find(|d| d.name == name)
}

/// Every dtype name, for "expected one of" messages.
pub(crate) fn dtype_names() -> String {
    let names: Vec<&str> = DTYPES.iter().map(|d| d.name).collect();
    names.join(", ")
}

/// Device type names and their `DeviceType` variants.
pub(crate) const DEVICE_TYPES: &[(&str, &str)] = &[
    ("cpu", "Cpu"),
    ("cuda", "Cuda"),
    ("cuda_host", "CudaHost"),
    ("rocm", "Rocm"),
    ("rocm_host", "RocmHost"),
    ("cuda_managed", "CudaManaged"),
];

/// Parses `"type"` or `"type:ordinal"` into the `DeviceType` variant and
/// the ordinal (at most `i32::MAX`, DLPack's limit).
pub(crate) fn device(text: &str) -> Option<(&'static str, u32)> {
    let (ty, ordinal) = match text.split_once(':') {
        Some((ty, ordinal)) => (ty, Some(ordinal)),
        None => (text, None),
    };
    let variant = DEVICE_TYPES.iter().find(|(name, _)| *name == ty)?.1;
    let ordinal = match ordinal {
        None => 0,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => digits
            .parse::<u32>()
            .ok()
            .filter(|&n| n <= i32::MAX as u32)?,
        Some(_) => return None,
    };
    Some((variant, ordinal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_like_devmm() {
        assert_eq!(device("cpu"), Some(("Cpu", 0)));
        assert_eq!(device("cuda:3"), Some(("Cuda", 3)));
        assert_eq!(device("cuda_managed:0"), Some(("CudaManaged", 0)));
        for bad in [
            "",
            "gpu",
            "cuda:",
            "cuda:-1",
            "cuda:+1",
            "cuda:2147483648",
            "CUDA",
            "cuda:1:2",
        ] {
            assert_eq!(device(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn dtype_sizes_follow_their_bit_widths() {
        for d in DTYPES {
            let bits: usize = d
                .name
                .trim_start_matches(|c: char| c.is_alphabetic())
                .parse()
                .unwrap_or(8);
            assert_eq!(d.itemsize * 8, bits, "{}", d.name);
            assert_eq!(d.konst, d.name.to_uppercase());
        }
        assert!(dtype("float33").is_none());
    }
}
