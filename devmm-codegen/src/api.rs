//! The parsed form of an API description: what one driver library exports
//! and how to find it.
//!
//! A description file (`*.api`) is line-based. `#` starts a comment; blank
//! lines are ignored. Every other line is one directive:
//!
//! ```text
//! api CUDA runtime                      # the name used in messages
//! table CudaRuntimeTable                # the generated struct
//! library libcudart.so                  # library names to try, in order
//! library libcudart.so.12
//! env DEVMM_CUDART_PATH                 # a full path that overrides the names
//! type cudaError_t = int                # a C type alias
//! type cudaStream_t = void*
//! fn required 2.0 cudaError_t cudaMalloc(void** devPtr, size_t size)
//! fn optional 11.2 cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) as malloc_async
//! ```
//!
//! A `fn` line is `fn required|optional MAJOR.MINOR` followed by the C
//! declaration, with every parameter named. Types are `void`, `char`,
//! `signed char`, `unsigned char`, `short`, `unsigned short`, `int`,
//! `unsigned int` (or `unsigned`), `long`, `unsigned long`, `long long`,
//! `unsigned long long`, `float`, `double`, `size_t`, the fixed-width
//! `int8_t` .. `uint64_t`, and aliases declared earlier with `type`, each
//! optionally preceded by `const` and followed by any number of `*`, and
//! `struct N`: an opaque struct of N bytes passed by value (a C struct of
//! one `char reserved[N]`, such as `cudaIpcMemHandle_t`), which the
//! generated code spells `Opaque<N>` at the consumer's path (the table's
//! support path, the fake's entry path), a `#[repr(C)]` struct of `[u8; N]`.
//!
//! A trailing `as ROLE` names the function's role: the generated table's
//! `roles()` fills the field `ROLE` of the consumer's role struct (the
//! entry points its shared code calls, the same for CUDA and HIP) with it.
//!
//! ```
//! use devmm_codegen::parse::parse;
//! let api = parse("mini.api", "api Mini\ntable MiniTable\nlibrary libmini.so\nenv MINI_PATH\n\
//!                              fn required 1.0 int miniInit(unsigned int flags)\n")?;
//! assert_eq!(api.functions[0].name, "miniInit");
//! assert_eq!(api.functions[0].to_string(), "int miniInit(unsigned int flags)");
//! # Ok::<(), devmm_codegen::parse::ParseErrors>(())
//! ```

use std::fmt;

/// One API description: the library, its names, and its functions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Api {
    /// The human-readable name (`CUDA runtime`), used in error messages.
    pub name: String,
    /// The name of the generated table struct (`CudaRuntimeTable`).
    pub table: String,
    /// The library file names to try, in order.
    pub libraries: Vec<String>,
    /// The environment variable whose value, a full path, overrides the names.
    pub env: String,
    /// C type aliases, in declaration order.
    pub types: Vec<TypeAlias>,
    /// The functions, in declaration order.
    pub functions: Vec<Function>,
}

/// `type NAME = C-TYPE`: a named C type such as `cudaStream_t`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeAlias {
    /// The alias (`cudaStream_t`).
    pub name: String,
    /// What it stands for.
    pub ty: CType,
}

/// Whether loading fails when the symbol is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Every supported library version exports it; loading fails without it.
    Required,
    /// Newer libraries only; the table holds an `Option`.
    Optional,
}

/// The first library version that exports a function (`11.2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One C function the library exports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The symbol name.
    pub name: String,
    /// The return type (`void` for none).
    pub ret: CType,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// Required or optional.
    pub availability: Availability,
    /// The first version that has it.
    pub since: Version,
    /// What the consumer calls it by (`malloc` for `cudaMalloc`), from a
    /// trailing `as ROLE`: the role struct's field it fills.
    pub role: Option<String>,
}

impl fmt::Display for Function {
    /// The C declaration, as written in the description (normalized spacing).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}(", self.ret, self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", p.ty, p.name)?;
        }
        f.write_str(")")
    }
}

/// A named parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The parameter name, used as the Rust parameter name.
    pub name: String,
    /// Its type.
    pub ty: CType,
}

/// A C type: a base type, whether it is `const`, and a pointer depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CType {
    /// The base type.
    pub base: BaseType,
    /// `const` on the base type (`const char*`).
    pub is_const: bool,
    /// How many `*` follow.
    pub pointers: usize,
}

impl CType {
    /// Whether this is plain `void` (no value).
    pub fn is_void(&self) -> bool {
        self.base == BaseType::Void && self.pointers == 0
    }
}

impl fmt::Display for CType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_const {
            f.write_str("const ")?;
        }
        write!(f, "{}{}", self.base, "*".repeat(self.pointers))
    }
}

/// The base of a C type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseType {
    /// `void`.
    Void,
    /// A built-in scalar such as `unsigned int`.
    Scalar(Scalar),
    /// An alias declared with `type`.
    Alias(String),
    /// `struct N`: an opaque struct of `N` bytes, passed by value.
    Opaque(usize),
}

impl fmt::Display for BaseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaseType::Void => f.write_str("void"),
            BaseType::Scalar(s) => f.write_str(s.c_name()),
            BaseType::Alias(name) => f.write_str(name),
            BaseType::Opaque(bytes) => write!(f, "struct {bytes}"),
        }
    }
}

/// The built-in C scalar types a description may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // each variant is the C type its name spells
pub enum Scalar {
    Char,
    SignedChar,
    UnsignedChar,
    Short,
    UnsignedShort,
    Int,
    UnsignedInt,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    SizeT,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
}

impl Scalar {
    /// Every scalar, for lookups by name.
    pub const ALL: [Scalar; 22] = [
        Scalar::Char,
        Scalar::SignedChar,
        Scalar::UnsignedChar,
        Scalar::Short,
        Scalar::UnsignedShort,
        Scalar::Int,
        Scalar::UnsignedInt,
        Scalar::Long,
        Scalar::UnsignedLong,
        Scalar::LongLong,
        Scalar::UnsignedLongLong,
        Scalar::Float,
        Scalar::Double,
        Scalar::SizeT,
        Scalar::Int8,
        Scalar::Int16,
        Scalar::Int32,
        Scalar::Int64,
        Scalar::Uint8,
        Scalar::Uint16,
        Scalar::Uint32,
        Scalar::Uint64,
    ];

    /// The C spelling (`unsigned long long`).
    pub const fn c_name(self) -> &'static str {
        match self {
            Scalar::Char => "char",
            Scalar::SignedChar => "signed char",
            Scalar::UnsignedChar => "unsigned char",
            Scalar::Short => "short",
            Scalar::UnsignedShort => "unsigned short",
            Scalar::Int => "int",
            Scalar::UnsignedInt => "unsigned int",
            Scalar::Long => "long",
            Scalar::UnsignedLong => "unsigned long",
            Scalar::LongLong => "long long",
            Scalar::UnsignedLongLong => "unsigned long long",
            Scalar::Float => "float",
            Scalar::Double => "double",
            Scalar::SizeT => "size_t",
            Scalar::Int8 => "int8_t",
            Scalar::Int16 => "int16_t",
            Scalar::Int32 => "int32_t",
            Scalar::Int64 => "int64_t",
            Scalar::Uint8 => "uint8_t",
            Scalar::Uint16 => "uint16_t",
            Scalar::Uint32 => "uint32_t",
            Scalar::Uint64 => "uint64_t",
        }
    }

    /// The Rust type with the same ABI, as a path.
    pub const fn rust_name(self) -> &'static str {
        match self {
            Scalar::Char => "::core::ffi::c_char",
            Scalar::SignedChar => "::core::ffi::c_schar",
            Scalar::UnsignedChar => "::core::ffi::c_uchar",
            Scalar::Short => "::core::ffi::c_short",
            Scalar::UnsignedShort => "::core::ffi::c_ushort",
            Scalar::Int => "::core::ffi::c_int",
            Scalar::UnsignedInt => "::core::ffi::c_uint",
            Scalar::Long => "::core::ffi::c_long",
            Scalar::UnsignedLong => "::core::ffi::c_ulong",
            Scalar::LongLong => "::core::ffi::c_longlong",
            Scalar::UnsignedLongLong => "::core::ffi::c_ulonglong",
            Scalar::Float => "::core::ffi::c_float",
            Scalar::Double => "::core::ffi::c_double",
            Scalar::SizeT => "usize",
            Scalar::Int8 => "i8",
            Scalar::Int16 => "i16",
            Scalar::Int32 => "i32",
            Scalar::Int64 => "i64",
            Scalar::Uint8 => "u8",
            Scalar::Uint16 => "u16",
            Scalar::Uint32 => "u32",
            Scalar::Uint64 => "u64",
        }
    }
}
