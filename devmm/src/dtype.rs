//! Element types, spelled exactly as DLPack's `DLDataType`.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// DLPack's `DLDataTypeCode`: the family of an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DTypeCode {
    /// Signed integer.
    Int = 0,
    /// Unsigned integer.
    UInt = 1,
    /// IEEE floating point.
    Float = 2,
    /// Opaque handle (pointer-sized).
    OpaqueHandle = 3,
    /// bfloat16.
    BFloat = 4,
    /// Complex: two floats of `bits / 2` each.
    Complex = 5,
    /// Boolean, one byte per element.
    Bool = 6,
    /// DLPack 1.1 `kDLFloat8_e3m4`.
    Float8E3M4 = 7,
    /// DLPack 1.1 `kDLFloat8_e4m3`.
    Float8E4M3 = 8,
    /// DLPack 1.1 `kDLFloat8_e4m3b11fnuz`.
    Float8E4M3B11Fnuz = 9,
    /// DLPack 1.1 `kDLFloat8_e4m3fn`.
    Float8E4M3Fn = 10,
    /// DLPack 1.1 `kDLFloat8_e4m3fnuz`.
    Float8E4M3Fnuz = 11,
    /// DLPack 1.1 `kDLFloat8_e5m2`.
    Float8E5M2 = 12,
    /// DLPack 1.1 `kDLFloat8_e5m2fnuz`.
    Float8E5M2Fnuz = 13,
    /// DLPack 1.1 `kDLFloat8_e8m0fnu`.
    Float8E8M0Fnu = 14,
    /// DLPack 1.1 `kDLFloat6_e2m3fn` (6 bits, packed).
    Float6E2M3Fn = 15,
    /// DLPack 1.1 `kDLFloat6_e3m2fn` (6 bits, packed).
    Float6E3M2Fn = 16,
    /// DLPack 1.1 `kDLFloat4_e2m1fn` (4 bits, packed).
    Float4E2M1Fn = 17,
}

/// DLPack 1.1's low-precision float types: the code, its bits per lane and
/// the name ml_dtypes and PyTorch give it.
const LOW_PRECISION: &[(DTypeCode, u8, &str)] = &[
    (DTypeCode::Float8E3M4, 8, "float8_e3m4"),
    (DTypeCode::Float8E4M3, 8, "float8_e4m3"),
    (DTypeCode::Float8E4M3B11Fnuz, 8, "float8_e4m3b11fnuz"),
    (DTypeCode::Float8E4M3Fn, 8, "float8_e4m3fn"),
    (DTypeCode::Float8E4M3Fnuz, 8, "float8_e4m3fnuz"),
    (DTypeCode::Float8E5M2, 8, "float8_e5m2"),
    (DTypeCode::Float8E5M2Fnuz, 8, "float8_e5m2fnuz"),
    (DTypeCode::Float8E8M0Fnu, 8, "float8_e8m0fnu"),
    (DTypeCode::Float6E2M3Fn, 6, "float6_e2m3fn"),
    (DTypeCode::Float6E3M2Fn, 6, "float6_e3m2fn"),
    (DTypeCode::Float4E2M1Fn, 4, "float4_e2m1fn"),
];

impl DTypeCode {
    /// The code for a DLPack `DLDataTypeCode` value devmm supports.
    ///
    /// ```
    /// assert_eq!(devmm::DTypeCode::from_dlpack(4), Some(devmm::DTypeCode::BFloat));
    /// ```
    pub const fn from_dlpack(code: u8) -> Option<DTypeCode> {
        Some(match code {
            0 => DTypeCode::Int,
            1 => DTypeCode::UInt,
            2 => DTypeCode::Float,
            3 => DTypeCode::OpaqueHandle,
            4 => DTypeCode::BFloat,
            5 => DTypeCode::Complex,
            6 => DTypeCode::Bool,
            7 => DTypeCode::Float8E3M4,
            8 => DTypeCode::Float8E4M3,
            9 => DTypeCode::Float8E4M3B11Fnuz,
            10 => DTypeCode::Float8E4M3Fn,
            11 => DTypeCode::Float8E4M3Fnuz,
            12 => DTypeCode::Float8E5M2,
            13 => DTypeCode::Float8E5M2Fnuz,
            14 => DTypeCode::Float8E8M0Fnu,
            15 => DTypeCode::Float6E2M3Fn,
            16 => DTypeCode::Float6E3M2Fn,
            17 => DTypeCode::Float4E2M1Fn,
            _ => return None,
        })
    }
}

/// An element type: `(code, bits, lanes)` as in DLPack.
///
/// ```
/// use devmm::DType;
/// let f32: DType = "float32".parse()?;
/// assert_eq!(f32, DType::FLOAT32);
/// assert_eq!((f32.itemsize(), f32.to_string()), (4, "float32".to_string()));
/// assert_eq!(DType::BFLOAT16.itemsize(), 2);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DType {
    code: DTypeCode,
    bits: u8,
    lanes: u16,
}

macro_rules! standard_dtypes {
    ($($konst:ident = $name:literal, $code:ident, $bits:literal;)*) => {
        impl DType {
            $(
                #[doc = concat!("`", $name, "`")]
                pub const $konst: DType = DType { code: DTypeCode::$code, bits: $bits, lanes: 1 };
            )*

            /// Every type with a standard name, in a stable order.
            pub const STANDARD: &'static [DType] = &[$(DType::$konst),*];

            /// The standard name (`"float32"`), for scalar types that have one.
            ///
            /// ```
            /// assert_eq!(devmm::DType::COMPLEX64.name(), Some("complex64"));
            /// ```
            pub const fn name(self) -> Option<&'static str> {
                if self.lanes != 1 {
                    return None;
                }
                $(
                    if self.code as u8 == DTypeCode::$code as u8 && self.bits == $bits {
                        return Some($name);
                    }
                )*
                None
            }
        }
    };
}

standard_dtypes! {
    BOOL = "bool", Bool, 8;
    INT8 = "int8", Int, 8;
    INT16 = "int16", Int, 16;
    INT32 = "int32", Int, 32;
    INT64 = "int64", Int, 64;
    UINT8 = "uint8", UInt, 8;
    UINT16 = "uint16", UInt, 16;
    UINT32 = "uint32", UInt, 32;
    UINT64 = "uint64", UInt, 64;
    FLOAT16 = "float16", Float, 16;
    FLOAT32 = "float32", Float, 32;
    FLOAT64 = "float64", Float, 64;
    BFLOAT16 = "bfloat16", BFloat, 16;
    COMPLEX64 = "complex64", Complex, 64;
    COMPLEX128 = "complex128", Complex, 128;
}

impl DType {
    /// A type from its DLPack triple, checked: `bits` and `lanes` non-zero.
    /// Sub-byte types (DLPack 1.1's float4/float6) are values like any
    /// other; only laying them out element by element is refused (see
    /// [`DType::is_byte_sized`]).
    ///
    /// ```
    /// use devmm::{DType, DTypeCode};
    /// assert_eq!(DType::new(DTypeCode::Float, 32, 1)?, DType::FLOAT32);
    /// assert!(DType::new(DTypeCode::Float, 0, 1).is_err());
    /// let fp4 = DType::new(DTypeCode::Float4E2M1Fn, 4, 1)?;
    /// assert_eq!((fp4.to_string(), fp4.is_byte_sized()), ("float4_e2m1fn".to_string(), false));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn new(code: DTypeCode, bits: u8, lanes: u16) -> Result<DType, Error> {
        if bits == 0 || lanes == 0 {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "dtype (code {code:?}, bits {bits}, lanes {lanes}) has no bits; \
                     bits and lanes must be non-zero"
                ),
            });
        }
        Ok(DType { code, bits, lanes })
    }

    /// The type whose DLPack fields are `(code, bits, lanes)`, each checked
    /// against its range, as a caller that reads them from untyped numbers
    /// (Python's `DType(code, bits, lanes)`) gives them: a value out of its
    /// field's range or a code devmm does not know is an
    /// [`Error::Refused`] naming the field, zero bits or lanes the
    /// error of [`DType::new`].
    ///
    /// ```
    /// use devmm::DType;
    /// assert_eq!(DType::from_fields(2, 32, 1)?, DType::FLOAT32);
    /// let err = DType::from_fields(2, 256, 1).unwrap_err();
    /// assert_eq!(err.to_string(), "bits must be a bit width from 1 to 255; 256 is out of range");
    /// assert!(DType::from_fields(18, 8, 1).unwrap_err().to_string().contains("code 18"));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn from_fields(code: i128, bits: i128, lanes: i128) -> Result<DType, Error> {
        let code: u8 = Error::in_range("code", code, "a DLPack type code from 0 to 17")?;
        let code = DTypeCode::from_dlpack(code).ok_or_else(|| Error::Refused {
            reason: format!("code {code} is not a DLPack type code devmm knows (0 to 17)"),
        })?;
        let bits = Error::in_range("bits", bits, "a bit width from 1 to 255")?;
        let lanes = Error::in_range("lanes", lanes, "a lane count from 1 to 65535")?;
        DType::new(code, bits, lanes)
    }

    /// The DLPack fields `(code, bits, lanes)`, the inverse of
    /// [`DType::from_fields`].
    ///
    /// ```
    /// assert_eq!(devmm::DType::FLOAT32.fields(), (2, 32, 1));
    /// ```
    pub const fn fields(self) -> (u8, u8, u16) {
        (self.code as u8, self.bits, self.lanes)
    }

    /// A type of `itemsize` opaque bytes (`uint8` lanes), for a layout that
    /// knows only its element size (a pickled `Layout`); more bytes than a
    /// DLPack type's 65535 lanes carry are an [`Error::Refused`].
    ///
    /// ```
    /// assert_eq!(devmm::DType::opaque(12)?.itemsize(), 12);
    /// assert!(devmm::DType::opaque(1 << 16).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn opaque(itemsize: usize) -> Result<DType, Error> {
        let lanes = u16::try_from(itemsize).map_err(|_| Error::Refused {
            reason: format!("item size {itemsize} is too large"),
        })?;
        DType::new(DTypeCode::UInt, 8, lanes)
    }

    /// The type a `torch.dtype` prints as (`"torch.float32"`, or the bare
    /// name), read as the standard name after PyTorch's prefix.
    ///
    /// ```
    /// use devmm::DType;
    /// assert_eq!(DType::from_torch_name("torch.bfloat16")?, DType::BFLOAT16);
    /// assert!(DType::from_torch_name("torch.qint8").is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn from_torch_name(text: &str) -> Result<DType, Error> {
        text.strip_prefix("torch.")
            .unwrap_or(text)
            .parse()
            .map_err(|_| {
                // Named as torch names it: "complex32" alone reads as a
                // devmm name the user never wrote.
                Error::parse(
                    "torch dtype",
                    text,
                    "one devmm holds (torch.complex32, the quantized and the bit types have no \
                     devmm dtype); convert the tensor first, e.g. .to(torch.complex64)",
                )
            })
    }

    /// Whether an element is a whole number of bytes, so elements can be
    /// addressed (and strided) one by one. DLPack 1.1's packed float4 and
    /// float6 scalars are not.
    pub const fn is_byte_sized(self) -> bool {
        (self.bits as u32 * self.lanes as u32).is_multiple_of(8)
    }

    /// The type family.
    pub const fn code(self) -> DTypeCode {
        self.code
    }

    /// Bits per lane.
    pub const fn bits(self) -> u8 {
        self.bits
    }

    /// Lanes per element (1 for scalars).
    pub const fn lanes(self) -> u16 {
        self.lanes
    }

    /// Bytes per element, rounded up for sub-byte types.
    pub const fn itemsize(self) -> usize {
        (self.bits as usize * self.lanes as usize).div_ceil(8)
    }

    /// The natural alignment of one lane: the lane's byte size rounded up to
    /// a power of two (a `complex64` lane is 8 bytes, so 8).
    ///
    /// ```
    /// assert_eq!(devmm::DType::COMPLEX128.alignment(), 16);
    /// ```
    pub const fn alignment(self) -> usize {
        (self.bits as usize).div_ceil(8).next_power_of_two()
    }

    /// The name of a DLPack 1.1 low-precision float scalar (`"float8_e4m3fn"`).
    fn low_precision_name(self) -> Option<&'static str> {
        LOW_PRECISION
            .iter()
            .find(|&&(code, bits, _)| code == self.code && bits == self.bits && self.lanes == 1)
            .map(|&(_, _, name)| name)
    }

    /// The type a name spells: a standard name or a DLPack 1.1 low-precision one.
    fn from_name(name: &str) -> Option<DType> {
        DType::STANDARD
            .iter()
            .copied()
            .find(|dt| dt.name() == Some(name))
            .or_else(|| {
                LOW_PRECISION
                    .iter()
                    .find(|&&(_, _, n)| n == name)
                    .map(|&(code, bits, _)| DType {
                        code,
                        bits,
                        lanes: 1,
                    })
            })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name().or_else(|| self.low_precision_name()) {
            Some(name) => f.write_str(name),
            None => write!(f, "{:?}{}x{}", self.code, self.bits, self.lanes),
        }
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DType({self})")
    }
}

impl FromStr for DType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        DType::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = DType::STANDARD
                .iter()
                .filter_map(|dt| dt.name())
                .chain(LOW_PRECISION.iter().map(|&(_, _, name)| name))
                .collect();
            Error::parse(
                "unknown dtype string",
                s,
                format!("one of {}", names.join(", ")),
            )
        })
    }
}

/// A Rust type whose values are elements of a [`DType`].
///
/// # Safety
///
/// `size_of::<Self>()` must equal `Self::DTYPE.itemsize()` and the type's
/// bytes must be a valid `DTYPE` element, because devmm reinterprets buffers
/// of `DTYPE` as slices of `Self`. `#[derive(Element)]` checks this for user
/// types at compile time.
///
/// ```
/// use devmm::{DType, Element};
/// assert_eq!(<f32 as Element>::DTYPE, DType::FLOAT32);
/// assert_eq!(<u8 as Element>::DTYPE.itemsize(), 1);
/// ```
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The element type.
    const DTYPE: DType;
}

macro_rules! primitive_elements {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        // SAFETY: the primitive's size is its dtype's itemsize (asserted below).
        unsafe impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
        }
        const _: () = assert!(std::mem::size_of::<$ty>() == DType::$dtype.itemsize());
    )*};
}

primitive_elements! {
    bool => BOOL,
    i8 => INT8, i16 => INT16, i32 => INT32, i64 => INT64,
    u8 => UINT8, u16 => UINT16, u32 => UINT32, u64 => UINT64,
    f32 => FLOAT32, f64 => FLOAT64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked_one_by_one_and_round_trip() {
        for dtype in DType::STANDARD {
            let (code, bits, lanes) = dtype.fields();
            let back = DType::from_fields(code.into(), bits.into(), lanes.into());
            assert_eq!(back.unwrap(), *dtype);
        }
        let text = |code, bits, lanes| {
            DType::from_fields(code, bits, lanes)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            text(-1, 8, 1),
            "code must be a DLPack type code from 0 to 17; -1 is out of range"
        );
        assert_eq!(
            text(18, 8, 1),
            "code 18 is not a DLPack type code devmm knows (0 to 17)"
        );
        assert_eq!(
            text(2, 32, 65536),
            "lanes must be a lane count from 1 to 65535; 65536 is out of range"
        );
        assert!(text(2, 0, 1).contains("bits and lanes must be non-zero"));
    }

    #[test]
    fn opaque_types_carry_the_item_size() {
        let bytes = DType::opaque(65535).unwrap();
        assert_eq!((bytes.itemsize(), bytes.code()), (65535, DTypeCode::UInt));
        assert_eq!(
            DType::opaque(65536).unwrap_err().to_string(),
            "item size 65536 is too large"
        );
    }

    #[test]
    fn torch_names_drop_their_prefix() {
        assert_eq!(DType::from_torch_name("torch.bool").unwrap(), DType::BOOL);
        assert_eq!(DType::from_torch_name("float16").unwrap(), DType::FLOAT16);
        let err = DType::from_torch_name("torch.quint8").unwrap_err();
        // Named as torch names it, with the way out.
        assert!(
            err.to_string().contains("torch dtype \"torch.quint8\""),
            "{err}"
        );
        assert!(err.to_string().contains(".to(torch.complex64)"), "{err}");
        // One prefix only: a doubled one is no torch name.
        assert!(DType::from_torch_name("torch.torch.float32").is_err());
    }

    #[test]
    fn every_standard_name_round_trips() {
        let names = [
            "float16",
            "float32",
            "float64",
            "bfloat16",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "bool",
            "complex64",
            "complex128",
        ];
        for name in names {
            let dt: DType = name.parse().unwrap();
            assert_eq!(dt.to_string(), name);
            assert_eq!(dt.lanes(), 1);
            assert_eq!(dt.itemsize() * 8, dt.bits() as usize);
        }
        assert_eq!(DType::STANDARD.len(), names.len());
    }

    #[test]
    fn unknown_names_list_the_accepted_ones() {
        let msg = "float8".parse::<DType>().unwrap_err().to_string();
        assert!(
            msg.contains("\"float8\"") && msg.contains("bfloat16"),
            "{msg}"
        );
    }

    #[test]
    fn vector_types_have_lane_sized_items() {
        let f32x4 = DType::new(DTypeCode::Float, 32, 4).unwrap();
        assert_eq!(f32x4.itemsize(), 16);
        assert_eq!(f32x4.alignment(), 4);
        assert_eq!(f32x4.name(), None);
        assert_eq!(f32x4.to_string(), "Float32x4");
    }
}
