//! A program that leaks, as `docs/observability.md` runs it: a training
//! loop that keeps every fifth step's activations in a cache it never
//! empties. It traces each allocation (JSON lines with call sites) and
//! tracks what is live, so its leak report names the line that leaks and
//! `devmm plot` draws the growth.
//!
//! ```text
//! DEVMM_LEAK_REPORT=1 cargo run -p devmm --example leaky -- leaky.jsonl
//! ```

use std::sync::Arc;
use std::time::Duration;

use devmm::trace::TraceFormat;
use devmm::{
    DType, EmptyOptions, MallocMemoryResource, MemoryResource, Tensor, TraceAdaptor,
    TrackingAdaptor, empty, using_memory_resource,
};

fn step(cache: &mut Vec<Tensor>, step: usize) -> devmm::Result<()> {
    let options = EmptyOptions::new();
    let activations = empty(&[256, 256], DType::FLOAT32, &options)?;
    let gradients = empty(&[128, 256], DType::FLOAT32, &options)?;
    if step.is_multiple_of(5) {
        // The leak: kept "for later", never dropped.
        cache.push(empty(&[64, 1024], DType::FLOAT32, &options)?);
    }
    std::thread::sleep(Duration::from_millis(2));
    drop((activations, gradients));
    Ok(())
}

fn main() -> devmm::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "leaky.jsonl".into());
    let traced = TraceAdaptor::to_file(
        MallocMemoryResource::new(),
        path.as_ref(),
        TraceFormat::JsonLines,
    )?
    .with_call_sites(32);
    let tracked = Arc::new(TrackingAdaptor::new(traced));
    let _current = using_memory_resource(Arc::clone(&tracked) as Arc<dyn MemoryResource>);

    let mut cache = Vec::new();
    for i in 0..60 {
        step(&mut cache, i)?;
    }
    // What a reference cycle or a global does in a real program: the cache
    // is never freed. With DEVMM_LEAK_REPORT=1 the tracking adaptor (kept
    // alive by the cached tensors) reports it at exit.
    std::mem::forget(cache);
    Ok(())
}
