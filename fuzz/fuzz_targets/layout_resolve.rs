//! Layout resolution from arbitrary shape, dtype, policy and device
//! parameters: a resolved layout always keeps the invariants
//! (`Layout::validate`: positive, non-overlapping strides, bytes that cover
//! the last element, a base alignment that is a power of two); anything
//! else is `Error::InvalidLayout`, never a panic or an overflow.
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use devmm::{
    Aligned, ColMajor, DType, DTypeCode, Device, DeviceOptimal, DeviceType, Error, Layout,
    LayoutPolicy, Permuted, RowMajor,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Policy {
    RowMajor,
    ColMajor,
    Permuted(Vec<usize>),
    Aligned {
        inner: Box<Policy>,
        unit_stride_alignment: usize,
        base_alignment: usize,
    },
    DeviceOptimal,
}

impl Policy {
    fn build(&self) -> Result<Arc<dyn LayoutPolicy>, Error> {
        Ok(match self {
            Policy::RowMajor => Arc::new(RowMajor),
            Policy::ColMajor => Arc::new(ColMajor),
            Policy::Permuted(order) => Arc::new(Permuted::new(order.iter().copied())),
            Policy::Aligned {
                inner,
                unit_stride_alignment,
                base_alignment,
            } => Arc::new(Aligned::over(
                inner.build()?,
                *unit_stride_alignment,
                *base_alignment,
            )?),
            Policy::DeviceOptimal => Arc::new(DeviceOptimal),
        })
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    shape: Vec<usize>,
    code: u8,
    bits: u8,
    lanes: u16,
    device_type: i32,
    device_index: i32,
    policy: Policy,
}

fuzz_target!(|input: Input| {
    let Some(code) = DTypeCode::from_dlpack(input.code) else {
        return;
    };
    let Ok(dtype) = DType::new(code, input.bits, input.lanes) else {
        return;
    };
    let device = Device::from_dlpack(input.device_type, input.device_index)
        .unwrap_or(Device::new(DeviceType::Cpu, 0));
    let policy = match input.policy.build() {
        Ok(policy) => policy,
        Err(error) => {
            assert!(matches!(error, Error::InvalidLayout { .. }), "{error:?}");
            return;
        }
    };
    match Layout::resolve(&policy, &input.shape, dtype, device) {
        Ok(layout) => {
            layout
                .validate()
                .expect("a resolved layout keeps the invariants");
            assert_eq!(layout.shape(), &input.shape[..]);
            assert!(layout.base_alignment().is_power_of_two());
        }
        Err(error) => assert!(matches!(error, Error::InvalidLayout { .. }), "{error:?}"),
    }
});
