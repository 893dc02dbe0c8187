//! A derived element for every dtype name the macro knows: each must exist
//! in devmm under the same name, with the size the macro assumes.

use devmm::{DType, Element};

macro_rules! elements {
    ($($name:ident($($field:ty),+) = $dtype:literal;)*) => {$(
        #[derive(Clone, Copy, Element)]
        #[repr(C)]
        #[element(dtype = $dtype)]
        #[allow(dead_code)]
        struct $name($($field),+);
    )*
        fn main() {
            $(assert_eq!(<$name as Element>::DTYPE.name(), Some($dtype));)*
            assert_eq!([$($dtype),*].len(), DType::STANDARD.len());
        }
    };
}

elements! {
    Bool(bool) = "bool";
    I8(i8) = "int8";
    I16(i16) = "int16";
    I32(i32) = "int32";
    I64(i64) = "int64";
    U8(u8) = "uint8";
    U16(u16) = "uint16";
    U32(u32) = "uint32";
    U64(u64) = "uint64";
    F16(u16) = "float16";
    F32(f32) = "float32";
    F64(f64) = "float64";
    BF16(u16) = "bfloat16";
    C64(f32, f32) = "complex64";
    C128(f64, f64) = "complex128";
}
