//! `DlpackRequest` validation, with every field as a consumer may pass it,
//! against tensors of any small shape, read-only or not: an export is made
//! exactly when the request is one devmm serves, and every refusal is
//! `Error::Dlpack`. The tensors live on the recording resource, so nothing
//! is dereferenced.
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use devmm::dlpack::{DlpackFlavor, DlpackRequest};
use devmm::testing::RecordingMemoryResource;
use devmm::{DType, EmptyOptions, Error};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    shape: [u8; 3],
    ndim: u8,
    read_only: bool,
    max_version: Option<(u32, u32)>,
    stream: Option<i64>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
}

fuzz_target!(|input: Input| {
    let shape: Vec<usize> = input.shape[..usize::from(input.ndim % 4)]
        .iter()
        .map(|&n| usize::from(n % 8))
        .collect();
    let options = EmptyOptions::new().resource(Arc::new(RecordingMemoryResource::new()));
    let tensor = devmm::empty(&shape, DType::FLOAT32, &options).expect("a small tensor");
    let tensor = if input.read_only {
        tensor.to_read_only()
    } else {
        tensor
    };
    let request = DlpackRequest {
        max_version: input.max_version,
        stream: input.stream,
        dl_device: input.dl_device,
        copy: input.copy,
    };
    let serves = input.copy != Some(true)
        && input
            .dl_device
            .is_none_or(|d| d == tensor.device().dlpack_device())
        && !(input.read_only && request.flavor() == DlpackFlavor::Legacy);
    match tensor.to_dlpack(&request) {
        Ok(export) => {
            assert!(serves, "{request:?} was served");
            assert_eq!(export.flavor(), request.flavor());
            assert_eq!(export.shape().len(), shape.len());
            assert_eq!(tensor.buffer().live_exports(), 1);
            drop(export);
            assert_eq!(tensor.buffer().live_exports(), 0);
        }
        Err(Error::Dlpack { .. }) if !serves => {}
        Err(Error::Stream { .. }) if serves && input.stream.is_some() => {}
        Err(error) => panic!("{request:?}: unexpected {error:?}"),
    }
});
