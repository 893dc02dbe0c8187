//! Writing and reading a `uint32` tensor element by element through its
//! strides, independently of the copy code under test: each element's
//! byte offset is computed here from the shape and strides.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use devmm::{DType, Tensor};

/// The byte offset from the first element of each element, in row-major
/// (logical) order.
pub(crate) fn offsets(t: &Tensor) -> Vec<usize> {
    let (shape, strides) = (t.shape(), t.strides());
    let mut out = Vec::with_capacity(t.numel());
    let mut index = vec![0usize; shape.len()];
    if t.numel() == 0 {
        return out;
    }
    loop {
        let elements: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        out.push(elements * t.dtype().itemsize());
        let mut dim = shape.len();
        loop {
            if dim == 0 {
                return out;
            }
            dim -= 1;
            index[dim] += 1;
            if index[dim] < shape[dim] {
                break;
            }
            index[dim] = 0;
        }
    }
}

/// The value the element at row-major position `i` is filled with.
pub(crate) fn value(i: usize) -> u32 {
    u32::try_from(i).unwrap() * 7 + 1
}

/// Writes [`value`]`(i)` into each element of a host `uint32` tensor.
pub(crate) fn fill(t: &Tensor) {
    assert_eq!(t.dtype(), DType::UINT32);
    assert!(t.device().ty().is_host_accessible());
    for (i, offset) in offsets(t).into_iter().enumerate() {
        // SAFETY: the offset is an element of the tensor, inside its
        // buffer, which is live host memory.
        unsafe {
            t.data_ptr()
                .as_host_ptr::<u8>()
                .add(offset)
                .cast::<u32>()
                .write_unaligned(value(i))
        };
    }
}

/// The elements of a host `uint32` tensor in row-major order.
pub(crate) fn values(t: &Tensor) -> Vec<u32> {
    assert_eq!(t.dtype(), DType::UINT32);
    offsets(t)
        .into_iter()
        // SAFETY: as in `fill`, for reads of elements `fill` or a copy wrote.
        .map(|offset| unsafe {
            t.data_ptr()
                .as_host_ptr::<u8>()
                .add(offset)
                .cast::<u32>()
                .read_unaligned()
        })
        .collect()
}

/// The elements of a `uint32` tensor on any device whose buffer can be
/// copied to the host: the buffer's bytes are read back whole and the
/// elements picked out at their strided offsets.
pub(crate) fn values_anywhere(t: &Tensor) -> Vec<u32> {
    let offsets = offsets(t);
    let span = offsets.iter().max().map_or(0, |&o| o + 4);
    let mut bytes = vec![0u8; span];
    // SAFETY: the buffer's resource hands out real memory (the fakes' is
    // host memory), and the span is inside the tensor's extent.
    unsafe {
        t.buffer()
            .copy_to_host_at(t.byte_offset(), &mut bytes, t.buffer().stream())
    }
    .unwrap();
    offsets
        .into_iter()
        .map(|o| u32::from_ne_bytes(bytes[o..o + 4].try_into().unwrap()))
        .collect()
}

/// [`value`] for each of `n` elements.
pub(crate) fn expected(n: usize) -> Vec<u32> {
    (0..n).map(value).collect()
}
