//! NumPy's `__array_interface__` and the CUDA Array Interface
//! (`__cuda_array_interface__`, version 3): the plain descriptions CuPy,
//! Numba, NumPy and PyTorch read, computed once here for every front.

use crate::device::DeviceType;
use crate::dtype::{DType, DTypeCode};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Which of the two interfaces to describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayInterfaceKind {
    /// `__array_interface__`: host-accessible memory.
    Host,
    /// `__cuda_array_interface__`: memory a CUDA device reads.
    Cuda,
}

/// The fields of either interface's dictionary (version 3).
///
/// ```
/// use devmm::{empty, ArrayInterfaceKind, ColMajor, DType, EmptyOptions};
/// let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new().layout(ColMajor))?;
/// let ai = t.array_interface(ArrayInterfaceKind::Host)?;
/// assert_eq!((ai.typestr.as_str(), ai.version), ("<f4", 3));
/// assert_eq!(ai.strides, Some(vec![4, 8])); // bytes; None when row-major
/// assert_eq!(ai.data, (t.data_ptr().addr(), false));
/// assert!(t.array_interface(ArrayInterfaceKind::Cuda).is_err()); // host memory
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayInterface {
    /// Extents.
    pub shape: Vec<usize>,
    /// NumPy's type string (`"<f4"`, `"|u1"`, `"|b1"`, ...).
    pub typestr: String,
    /// `(address of the first element, read_only)`.
    pub data: (usize, bool),
    /// Strides in bytes; `None` for row-major dense tensors.
    pub strides: Option<Vec<usize>>,
    /// CUDA only: the stream a consumer must order its work after
    /// (1 for the legacy default stream, which the protocol spells 1, not 0).
    pub stream: Option<usize>,
    /// The protocol version, 3.
    pub version: u32,
}

impl Tensor {
    /// This tensor as the interface `kind` describes it; refused for memory
    /// the interface's consumers cannot reach, and for dtypes NumPy's type
    /// strings have no name for (bfloat16, vector lanes).
    pub fn array_interface(&self, kind: ArrayInterfaceKind) -> Result<ArrayInterface> {
        if self.buffer().is_closed() {
            return Err(self.buffer().closed_error());
        }
        let ty = self.device().ty();
        let reachable = match kind {
            ArrayInterfaceKind::Host => ty.is_host_accessible(),
            ArrayInterfaceKind::Cuda => matches!(
                ty,
                DeviceType::Cuda | DeviceType::CudaHost | DeviceType::CudaManaged
            ),
        };
        if !reachable {
            let (name, fix) = match kind {
                ArrayInterfaceKind::Host => (
                    "__array_interface__",
                    "use __dlpack__ or __cuda_array_interface__, or copy the data to the host",
                ),
                ArrayInterfaceKind::Cuda => (
                    "__cuda_array_interface__",
                    "use __dlpack__ or __array_interface__ for memory that is not CUDA's",
                ),
            };
            return Err(Error::InvalidArgument {
                reason: format!("{name} cannot describe memory on {}; {fix}", self.device()),
            });
        }
        if kind == ArrayInterfaceKind::Host {
            // Host consumers dereference the address: only real memory.
            crate::resource::check_dereferenceable(
                &**self.buffer().resource(),
                "__array_interface__",
            )?;
            // Its consumers read at once: nothing names a stream to order on.
            self.wait_for_host_on(ty)?;
        }
        let itemsize = self.dtype().itemsize();
        let strides = (!self.layout().is_c_contiguous()).then(|| {
            // Cannot overflow: the layout's checked required bytes cover every step.
            self.strides().iter().map(|&s| s * itemsize).collect()
        });
        let stream =
            (kind == ArrayInterfaceKind::Cuda).then(|| match self.buffer().stream().handle() {
                0 => 1,
                handle => handle,
            });
        Ok(ArrayInterface {
            shape: self.shape().to_vec(),
            typestr: typestr(self.dtype())?,
            data: (self.data_ptr().addr(), self.is_read_only()),
            strides,
            stream,
            version: 3,
        })
    }
}

impl ArrayInterface {
    /// The Python buffer protocol's (PEP 3118) format for the type string:
    /// `"f"` for `"<f4"`, `"B"` for `"|u1"`, `"Zd"` for `"<c16"`, ...
    ///
    /// ```
    /// let t = devmm::empty(&[2], devmm::DType::FLOAT64, &devmm::EmptyOptions::new())?;
    /// let ai = t.array_interface(devmm::ArrayInterfaceKind::Host)?;
    /// assert_eq!(ai.buffer_format(), "d");
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn buffer_format(&self) -> &'static str {
        match self.typestr.as_str() {
            "|i1" => "b",
            "|u1" => "B",
            "|b1" => "?",
            "<i2" => "h",
            "<u2" => "H",
            "<i4" => "i",
            "<u4" => "I",
            "<i8" => "q",
            "<u8" => "Q",
            "<f2" => "e",
            "<f4" => "f",
            "<f8" => "d",
            "<c8" => "Zf",
            "<c16" => "Zd",
            // Wider types (int128, float128) have no struct format: raw bytes.
            _ => "B",
        }
    }
}

/// NumPy's type string for `dtype` (little-endian hosts and devices).
fn typestr(dtype: DType) -> Result<String> {
    let kind = match dtype.code() {
        DTypeCode::Int => 'i',
        DTypeCode::UInt => 'u',
        DTypeCode::Float => 'f',
        DTypeCode::Complex => 'c',
        DTypeCode::Bool => 'b',
        _ => 'x',
    };
    if kind == 'x' || dtype.lanes() != 1 {
        return Err(Error::InvalidArgument {
            reason: format!(
                "the array interfaces have no type string for {dtype}; exchange it through \
                 __dlpack__, which names every dtype"
            ),
        });
    }
    let itemsize = dtype.itemsize();
    let order = if itemsize == 1 { '|' } else { '<' };
    Ok(format!("{order}{kind}{itemsize}"))
}

impl DType {
    /// The dtype NumPy describes by its type string (`dtype.str`: `"<f4"`,
    /// `"|b1"`) and `name`: the name first, for the types NumPy knows only by
    /// name (ml_dtypes' `bfloat16` is `"<V2"`), else the kind and size.
    /// Big-endian data (`">i8"`) and kinds DLPack has no code for
    /// (datetimes, strings, objects) are refused.
    ///
    /// ```
    /// use devmm::DType;
    /// assert_eq!(DType::from_typestr("<f4", "float32")?, DType::FLOAT32);
    /// assert_eq!(DType::from_typestr("<V2", "bfloat16")?, DType::BFLOAT16);
    /// assert_eq!(DType::from_typestr("<i4", "custom")?, DType::INT32);
    /// assert!(DType::from_typestr(">i8", "int64").is_err());
    /// assert!(DType::from_typestr("<M8[s]", "datetime64[s]").is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn from_typestr(typestr: &str, name: &str) -> Result<DType> {
        let refused = |why: &str| Error::InvalidArgument {
            reason: format!("NumPy dtype {name} ({typestr}) {why}"),
        };
        let mut chars = typestr.chars();
        match chars.next() {
            Some('<' | '|' | '=') => {}
            Some('>') => {
                return Err(refused(
                    "is big-endian; DLPack describes native little-endian data only",
                ));
            }
            _ => return Err(refused("is not a NumPy type string")),
        }
        if let Ok(named) = name.parse() {
            return Ok(named);
        }
        let kind = chars.next().unwrap_or('?');
        // No size (`"|O"`) reads as 0 bytes, which the size check refuses.
        let itemsize = chars.as_str().parse().unwrap_or(0);
        numpy_kind(kind, itemsize).map_err(refused)
    }

    /// The standard dtype a NumPy type code names (`"f4"`, `"<i8"`,
    /// `"=u2"`, `"|b1"`: an optional native byte order, a kind and a size in
    /// bytes), read without NumPy; `None` for any other text, which only
    /// NumPy reads (`"d"`, `">i8"`, `"f16"`) or nobody does.
    ///
    /// ```
    /// use devmm::DType;
    /// assert_eq!(DType::from_type_code("<i8"), Some(DType::INT64));
    /// assert_eq!(DType::from_type_code("f4"), Some(DType::FLOAT32));
    /// assert_eq!(DType::from_type_code(">i8"), None);
    /// assert_eq!(DType::from_type_code("i3"), None);
    /// ```
    pub fn from_type_code(code: &str) -> Option<DType> {
        let code = code.strip_prefix(['<', '|', '=']).unwrap_or(code);
        let mut chars = code.chars();
        let kind = chars.next()?;
        let size = chars.as_str();
        // Digits only: `usize::from_str` would take a sign (`"f+4"`).
        if size.is_empty() || !size.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Only sizes with a standard name: NumPy reads `"f16"` as its long
        // double, which is no `float128` of DLPack's.
        let dtype = numpy_kind(kind, size.parse().ok()?).ok()?;
        dtype.name().is_some().then_some(dtype)
    }

    /// The dtype of NumPy kind `kind` (`dtype.kind`: `'b'`, `'i'`, `'u'`,
    /// `'f'`, `'c'`) and `itemsize` bytes, as any object duck-typed like a
    /// NumPy dtype describes itself. Other kinds, and sizes DLPack's 8-bit
    /// width cannot carry, are refused.
    ///
    /// ```
    /// use devmm::DType;
    /// assert_eq!(DType::from_kind('f', 2)?, DType::FLOAT16);
    /// assert_eq!(DType::from_kind('b', 1)?, DType::BOOL);
    /// assert!(DType::from_kind('V', 2).is_err());
    /// assert!(DType::from_kind('i', 64).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn from_kind(kind: char, itemsize: usize) -> Result<DType> {
        numpy_kind(kind, itemsize).map_err(|why| Error::InvalidArgument {
            reason: format!("dtype kind '{kind}' with itemsize {itemsize} {why}"),
        })
    }
}

/// The dtype of a NumPy kind and item size, or why DLPack has none.
fn numpy_kind(kind: char, itemsize: usize) -> std::result::Result<DType, &'static str> {
    const WIDTH: &str = "is not 1 to 31 bytes wide, as DLPack's 8-bit size needs";
    // NumPy's long double is the platform's C `long double` (x87 extended
    // precision padded to 16 bytes on x86-64), not DLPack's IEEE float128:
    // exported as one, no consumer (NumPy included) would read it back.
    const LONG_DOUBLE: &str = "is NumPy's longdouble (or clongdouble), the C long double, which \
                               no DLPack type describes; convert it with .astype(np.float64) \
                               (or np.complex128) first";
    match (kind, itemsize) {
        // 12 bytes on 32-bit x86, 16 on x86-64 (and binary128 on AArch64).
        ('f', 12 | 16) | ('c', 24 | 32) => return Err(LONG_DOUBLE),
        _ => {}
    }
    let code = match kind {
        'b' => DTypeCode::Bool,
        'i' => DTypeCode::Int,
        'u' => DTypeCode::UInt,
        'f' => DTypeCode::Float,
        'c' => DTypeCode::Complex,
        _ => return Err("has no DLPack DLDataType encoding"),
    };
    let bits = u8::try_from(itemsize)
        .ok()
        .and_then(|itemsize| itemsize.checked_mul(8))
        .ok_or(WIDTH)?;
    DType::new(code, bits, 1).map_err(|_| WIDTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_string_the_array_interface_writes_reads_back() {
        for dtype in [
            DType::BOOL,
            DType::INT8,
            DType::UINT16,
            DType::INT64,
            DType::FLOAT16,
            DType::FLOAT64,
            DType::COMPLEX128,
        ] {
            let written = typestr(dtype).unwrap();
            assert_eq!(DType::from_typestr(&written, "unnamed").unwrap(), dtype);
        }
    }

    #[test]
    fn type_codes_of_standard_dtypes_read_without_numpy() {
        for (code, dtype) in [
            ("b1", DType::BOOL),
            ("|b1", DType::BOOL),
            ("i1", DType::INT8),
            ("<i8", DType::INT64),
            ("=u2", DType::UINT16),
            ("f2", DType::FLOAT16),
            ("<f8", DType::FLOAT64),
            ("c8", DType::COMPLEX64),
            ("c16", DType::COMPLEX128),
        ] {
            assert_eq!(DType::from_type_code(code), Some(dtype), "{code}");
        }
        for other in [
            "", "<", "f", "d", ">i8", "i3", "f16", "V2", "f+4", "<<f4", "float32",
        ] {
            assert_eq!(DType::from_type_code(other), None, "{other}");
        }
    }

    #[test]
    fn refusals_say_which_dtype_and_why() {
        let text = |typestr, name| DType::from_typestr(typestr, name).unwrap_err().to_string();
        assert!(text(">f4", "float32").contains("NumPy dtype float32 (>f4) is big-endian"));
        assert!(text("|O", "object").contains("has no DLPack DLDataType encoding"));
        assert!(text("<i64", "wide").contains("1 to 31 bytes"));
        assert!(text("f4", "float32").contains("not a NumPy type string"));
        assert!(text("|f0", "empty").contains("1 to 31 bytes"));
        let kind = |kind, itemsize| DType::from_kind(kind, itemsize).unwrap_err().to_string();
        assert!(
            kind('V', 4)
                .contains("dtype kind 'V' with itemsize 4 has no DLPack DLDataType encoding")
        );
        assert!(kind('f', 0).contains("1 to 31 bytes"));
        assert!(kind('u', 1 << 40).contains("1 to 31 bytes"));
    }
}
