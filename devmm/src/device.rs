//! Devices: a platform kind plus an ordinal, with DLPack's numbering.

use std::fmt;
use std::str::FromStr;

/// Why a device, a device type or an ordinal was refused: what
/// [`Device`]'s and [`DeviceType`]'s fallible constructors and parsers
/// return. Devices sit below devmm's [`Error`](crate::Error), which carries
/// them, so they have an error of their own; it converts into `Error`
/// (`?` in a function returning [`devmm::Result`](crate::Result)) as the
/// variant its doc names, with the same message.
///
/// ```
/// use devmm::{Device, Error, ParseDeviceError};
/// let err = "gpu:0".parse::<Device>().unwrap_err();
/// assert!(matches!(err, ParseDeviceError::Unrecognized { what: "unknown device type", .. }));
/// assert!(matches!(Error::from(err), Error::Parse { what: "unknown device type", .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseDeviceError {
    /// Text or a DLPack code that names no device
    /// ([`Error::Parse`](crate::Error::Parse)).
    #[error("{what} {input:?}: expected {expected}")]
    Unrecognized {
        /// What is wrong with it ("malformed device string", ...).
        what: &'static str,
        /// The text given.
        input: String,
        /// The accepted forms.
        expected: String,
    },
    /// A number outside what the argument it was given for takes; the
    /// message names the argument, the range and the value
    /// ([`Error::Refused`](crate::Error::Refused)).
    #[error("{reason}")]
    Refused {
        /// The whole message.
        reason: String,
    },
    /// An ordinal past [`Device::MAX_INDEX`] given with its type
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    #[error("invalid argument: {reason}")]
    InvalidIndex {
        /// What was passed and what is accepted.
        reason: String,
    },
}

impl ParseDeviceError {
    fn unrecognized(what: &'static str, input: &str, expected: impl Into<String>) -> Self {
        ParseDeviceError::Unrecognized {
            what,
            input: input.to_owned(),
            expected: expected.into(),
        }
    }

    /// The refusal of `value`, given for the argument `name`, outside
    /// `range` (also [`Error::out_of_range`](crate::Error::out_of_range)'s).
    pub(crate) fn out_of_range(name: &str, value: i128, range: &str) -> Self {
        ParseDeviceError::Refused {
            reason: format!("{name} must be {range}; {value} is out of range"),
        }
    }
}

/// The kind of memory a device owns.
///
/// The discriminants are DLPack's `DLDeviceType` codes, so converting to the
/// wire format is a cast, never a lookup table. Python sees these variants
/// as the members of an `enum.IntEnum`:
///
/// Python enum: `DeviceType`
///
/// ```
/// use devmm::DeviceType;
/// assert_eq!(DeviceType::Rocm as i32, 10);
/// assert_eq!(DeviceType::from_dlpack(2), Some(DeviceType::Cuda));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum DeviceType {
    /// Ordinary host memory.
    Cpu = 1,
    /// CUDA device memory.
    Cuda = 2,
    /// Page-locked host memory registered with CUDA.
    CudaHost = 3,
    /// ROCm (HIP) device memory.
    Rocm = 10,
    /// Page-locked host memory registered with ROCm.
    RocmHost = 11,
    /// CUDA managed (unified) memory.
    CudaManaged = 13,
}

impl DeviceType {
    /// Every device type devmm knows, in DLPack code order.
    pub const ALL: [DeviceType; 6] = [
        DeviceType::Cpu,
        DeviceType::Cuda,
        DeviceType::CudaHost,
        DeviceType::Rocm,
        DeviceType::RocmHost,
        DeviceType::CudaManaged,
    ];

    /// The DLPack `DLDeviceType` code.
    ///
    /// ```
    /// assert_eq!(devmm::DeviceType::CudaManaged.dlpack_code(), 13);
    /// ```
    pub const fn dlpack_code(self) -> i32 {
        self as i32
    }

    /// The device type for a DLPack code, if devmm supports it.
    ///
    /// ```
    /// assert_eq!(devmm::DeviceType::from_dlpack(4), None); // OpenCL: not ours
    /// ```
    pub const fn from_dlpack(code: i32) -> Option<DeviceType> {
        Some(match code {
            1 => DeviceType::Cpu,
            2 => DeviceType::Cuda,
            3 => DeviceType::CudaHost,
            10 => DeviceType::Rocm,
            11 => DeviceType::RocmHost,
            13 => DeviceType::CudaManaged,
            _ => return None,
        })
    }

    /// The device type of any integer `code`, as a caller reading untyped
    /// numbers (Python's `Device(2, 0)`) gives it: one outside `i32` is a
    /// [`ParseDeviceError::Refused`] naming the argument `type`, one devmm does not
    /// know is `"{code} is not a valid DeviceType"`, the words of Python's
    /// `enum` that `devmm.DeviceType` is.
    ///
    /// ```
    /// use devmm::DeviceType;
    /// assert_eq!(DeviceType::from_code(2)?, DeviceType::Cuda);
    /// assert_eq!(DeviceType::from_code(99).unwrap_err().to_string(), "99 is not a valid DeviceType");
    /// assert!(DeviceType::from_code(1 << 40).unwrap_err().to_string().contains("out of range"));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn from_code(code: i128) -> Result<DeviceType, ParseDeviceError> {
        let code = i32::try_from(code)
            .map_err(|_| ParseDeviceError::out_of_range("type", code, "a DeviceType code"))?;
        DeviceType::from_dlpack(code).ok_or_else(|| ParseDeviceError::Refused {
            reason: format!("{code} is not a valid DeviceType"),
        })
    }

    /// The lower-case name used in device strings (`"cuda_host"`).
    ///
    /// ```
    /// assert_eq!(devmm::DeviceType::CudaHost.name(), "cuda_host");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Cuda => "cuda",
            DeviceType::CudaHost => "cuda_host",
            DeviceType::Rocm => "rocm",
            DeviceType::RocmHost => "rocm_host",
            DeviceType::CudaManaged => "cuda_managed",
        }
    }

    /// Whether the host can dereference this memory directly.
    ///
    /// ```
    /// assert!(devmm::DeviceType::CudaHost.is_host_accessible());
    /// assert!(!devmm::DeviceType::Cuda.is_host_accessible());
    /// ```
    pub const fn is_host_accessible(self) -> bool {
        matches!(
            self,
            DeviceType::Cpu | DeviceType::CudaHost | DeviceType::RocmHost | DeviceType::CudaManaged
        )
    }

    /// The runtime that serves this device type: `"cpu"`, `"cuda"` or `"rocm"`.
    ///
    /// ```
    /// assert_eq!(devmm::DeviceType::CudaManaged.runtime_name(), "cuda");
    /// ```
    pub const fn runtime_name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Cuda | DeviceType::CudaHost | DeviceType::CudaManaged => "cuda",
            DeviceType::Rocm | DeviceType::RocmHost => "rocm",
        }
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DeviceType {
    type Err = ParseDeviceError;

    fn from_str(s: &str) -> Result<Self, ParseDeviceError> {
        DeviceType::ALL
            .into_iter()
            .find(|ty| ty.name() == s)
            .ok_or_else(|| {
                ParseDeviceError::unrecognized("unknown device type", s, device_type_names())
            })
    }
}

fn device_type_names() -> String {
    let names: Vec<&str> = DeviceType::ALL.iter().map(|ty| ty.name()).collect();
    format!("one of {}", names.join(", "))
}

/// One device: a [`DeviceType`] and its ordinal.
///
/// A small `Copy` value. devmm has no ambient "current device": every
/// buffer, stream and resource carries the `Device` it belongs to.
///
/// ```
/// use devmm::{Device, DeviceType};
/// let gpu: Device = "cuda:1".parse()?;
/// assert_eq!(gpu, Device::new(DeviceType::Cuda, 1));
/// assert_eq!(gpu.to_string(), "cuda:1");
/// assert_eq!(gpu.dlpack_device(), (2, 1));
/// assert_eq!("cpu".parse::<Device>()?, Device::CPU);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    ty: DeviceType,
    index: u32,
}

impl Device {
    /// The host, `cpu:0`.
    pub const CPU: Device = Device {
        ty: DeviceType::Cpu,
        index: 0,
    };

    /// The largest ordinal: DLPack carries device ids as `int32`.
    pub const MAX_INDEX: u32 = i32::MAX as u32;

    /// A device of `ty` with ordinal `index`.
    ///
    /// Ordinals above [`Device::MAX_INDEX`] are clamped into range by
    /// [`Device::try_new`]; this constructor is for literals.
    ///
    /// ```
    /// let d = devmm::Device::new(devmm::DeviceType::Rocm, 0);
    /// assert_eq!(d.to_string(), "rocm:0");
    /// ```
    pub const fn new(ty: DeviceType, index: u32) -> Device {
        assert!(
            index <= Device::MAX_INDEX,
            "device ordinal exceeds i32::MAX"
        );
        Device { ty, index }
    }

    /// A device of `ty` with ordinal `index`, or an error when the ordinal
    /// does not fit DLPack's `int32`.
    ///
    /// ```
    /// assert!(devmm::Device::try_new(devmm::DeviceType::Cuda, u32::MAX).is_err());
    /// ```
    pub fn try_new(ty: DeviceType, index: u32) -> Result<Device, ParseDeviceError> {
        if index > Device::MAX_INDEX {
            return Err(ParseDeviceError::InvalidIndex {
                reason: format!(
                    "device index {index} of {ty} out of range; DLPack device ids are int32, so \
                     give an index from 0 to {}",
                    Device::MAX_INDEX
                ),
            });
        }
        Ok(Device { ty, index })
    }

    /// A device ordinal given as any integer: one outside 0 to
    /// [`Device::MAX_INDEX`] is a [`ParseDeviceError::Refused`] naming the argument
    /// `index` and that range.
    ///
    /// ```
    /// use devmm::Device;
    /// assert_eq!(Device::checked_index(3)?, 3);
    /// assert_eq!(Device::checked_index(Device::MAX_INDEX.into())?, Device::MAX_INDEX);
    /// let err = Device::checked_index(-1).unwrap_err();
    /// assert_eq!(err.to_string(), "index must be a device index from 0 to 2147483647; -1 is out of range");
    /// assert!(Device::checked_index(i128::from(Device::MAX_INDEX) + 1).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn checked_index(index: i128) -> Result<u32, ParseDeviceError> {
        match u32::try_from(index) {
            Ok(fits) if fits <= Device::MAX_INDEX => Ok(fits),
            _ => Err(ParseDeviceError::out_of_range(
                "index",
                index,
                &format!("a device index from 0 to {}", Device::MAX_INDEX),
            )),
        }
    }

    /// `cuda:index`.
    ///
    /// ```
    /// assert_eq!(devmm::Device::cuda(0).to_string(), "cuda:0");
    /// ```
    pub const fn cuda(index: u32) -> Device {
        Device::new(DeviceType::Cuda, index)
    }

    /// `rocm:index`.
    ///
    /// ```
    /// assert_eq!(devmm::Device::rocm(2).to_string(), "rocm:2");
    /// ```
    pub const fn rocm(index: u32) -> Device {
        Device::new(DeviceType::Rocm, index)
    }

    /// The device type.
    pub const fn ty(self) -> DeviceType {
        self.ty
    }

    /// The ordinal within its type.
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The `(device_type, device_id)` pair of DLPack's `__dlpack_device__`.
    /// As `dlpack.h` says, the id of CPU, pinned and managed memory is 0:
    /// such memory is not one GPU's, whichever device allocated it.
    ///
    /// ```
    /// use devmm::{Device, DeviceType};
    /// assert_eq!(Device::CPU.dlpack_device(), (1, 0));
    /// assert_eq!(Device::cuda(1).dlpack_device(), (2, 1));
    /// assert_eq!(Device::new(DeviceType::CudaHost, 1).dlpack_device(), (3, 0));
    /// ```
    pub const fn dlpack_device(self) -> (i32, i32) {
        let id = match self.ty {
            DeviceType::Cpu
            | DeviceType::CudaHost
            | DeviceType::RocmHost
            | DeviceType::CudaManaged => 0,
            // `index` never exceeds i32::MAX (checked at construction).
            _ => self.index as i32,
        };
        (self.ty as i32, id)
    }

    /// The device named by a DLPack `(device_type, device_id)` pair.
    ///
    /// ```
    /// assert_eq!(devmm::Device::from_dlpack(2, 3)?, devmm::Device::cuda(3));
    /// assert!(devmm::Device::from_dlpack(2, -1).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn from_dlpack(device_type: i32, device_id: i32) -> Result<Device, ParseDeviceError> {
        let ty = DeviceType::from_dlpack(device_type).ok_or_else(|| {
            ParseDeviceError::unrecognized(
                "unknown DLPack device type",
                &device_type.to_string(),
                "one of 1 (cpu), 2 (cuda), 3 (cuda_host), 10 (rocm), 11 (rocm_host), 13 (cuda_managed)",
            )
        })?;
        let index = u32::try_from(device_id).map_err(|_| {
            ParseDeviceError::unrecognized(
                "negative DLPack device id",
                &device_id.to_string(),
                "a non-negative ordinal",
            )
        })?;
        Ok(Device { ty, index })
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ty, self.index)
    }
}

impl FromStr for Device {
    type Err = ParseDeviceError;

    /// Parses `"cpu"`, `"cuda:1"`, `"rocm:0"`, `"cuda_host"`; the ordinal
    /// defaults to 0.
    fn from_str(s: &str) -> Result<Self, ParseDeviceError> {
        const EXPECTED: &str = "TYPE or TYPE:ORDINAL, TYPE one of cpu, cuda, cuda_host, rocm, rocm_host, cuda_managed (e.g. \"cuda:1\")";
        let malformed = || ParseDeviceError::unrecognized("malformed device string", s, EXPECTED);
        let (ty, index) = match s.split_once(':') {
            Some((ty, index)) => (ty, Some(index)),
            None => (s, None),
        };
        if ty.is_empty() || !ty.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(malformed());
        }
        let index = match index {
            None => None,
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                Some(digits)
            }
            Some(_) => return Err(malformed()),
        };
        let ty = ty
            .parse::<DeviceType>()
            .map_err(|_| ParseDeviceError::unrecognized("unknown device type", s, EXPECTED))?;
        let index = match index {
            None => 0,
            // All digits: too many for a `u32` is out of range too.
            Some(digits) => digits.parse::<u32>().unwrap_or(u32::MAX),
        };
        Device::try_new(ty, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_indices_from_untyped_numbers() {
        for ty in DeviceType::ALL {
            assert_eq!(DeviceType::from_code(ty.dlpack_code().into()), Ok(ty));
        }
        assert_eq!(
            DeviceType::from_code(4).unwrap_err().to_string(),
            "4 is not a valid DeviceType"
        );
        assert_eq!(
            DeviceType::from_code(-(1 << 40)).unwrap_err().to_string(),
            format!(
                "type must be a DeviceType code; {} is out of range",
                -(1i128 << 40)
            )
        );
        assert_eq!(
            Device::checked_index(Device::MAX_INDEX.into()),
            Ok(Device::MAX_INDEX)
        );
        for past in [i128::from(Device::MAX_INDEX) + 1, u32::MAX.into(), 1 << 32] {
            let err = Device::checked_index(past).unwrap_err();
            assert!(matches!(err, ParseDeviceError::Refused { .. }), "{err:?}");
            assert_eq!(
                err.to_string(),
                format!(
                    "index must be a device index from 0 to 2147483647; {past} is out of range"
                )
            );
        }
    }

    #[test]
    fn parses_the_seed_spellings() {
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::CPU);
        assert_eq!("cpu:0".parse::<Device>().unwrap(), Device::CPU);
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::cuda(1));
        assert_eq!("rocm:0".parse::<Device>().unwrap(), Device::rocm(0));
        assert_eq!(
            "cuda_managed:2".parse::<Device>().unwrap(),
            Device::new(DeviceType::CudaManaged, 2)
        );
    }

    #[test]
    fn rejects_malformed_strings_with_the_expected_form() {
        let refusals = [
            ("", "malformed device string"),
            ("gpu", "unknown device type"),
            ("gpu:0", "unknown device type"),
            ("cuda:", "malformed device string"),
            ("cuda:-1", "malformed device string"),
            ("cuda:x", "malformed device string"),
            ("cuda:1:2", "malformed device string"),
            ("CUDA:0", "malformed device string"),
            ("cuda:+1", "malformed device string"),
        ];
        for (bad, problem) in refusals {
            let err = bad.parse::<Device>().unwrap_err();
            let msg = err.to_string();
            assert!(msg.starts_with(problem), "{bad:?}: {msg}");
            assert!(msg.contains("TYPE:ORDINAL"), "{bad:?}: {msg}");
            assert!(msg.contains(&format!("{bad:?}")), "{bad:?}: {msg}");
        }
    }

    #[test]
    fn an_index_past_int32_is_out_of_range() {
        for bad in [
            "cuda:2147483648",
            "cuda:4294967296",
            "cuda:99999999999999999999",
        ] {
            let msg = bad.parse::<Device>().unwrap_err().to_string();
            assert!(msg.contains("device index"), "{bad:?}: {msg}");
            assert!(msg.contains("out of range"), "{bad:?}: {msg}");
            assert!(msg.contains("from 0 to 2147483647"), "{bad:?}: {msg}");
        }
    }

    #[test]
    fn display_round_trips() {
        for ty in DeviceType::ALL {
            let d = Device::new(ty, 7);
            assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
            assert_eq!(DeviceType::from_dlpack(ty as i32), Some(ty));
        }
    }
}
