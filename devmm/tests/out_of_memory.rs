//! Recovering from running out: `FailureCallbackAdaptor`'s retries, the
//! figures of an out-of-memory error, and `on_out_of_memory` hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

use devmm::mrs::cpu::MallocMemoryResource;
use devmm::{
    CallbackError, CallbackMemoryResource, Device, DeviceBuffer, DevicePtr, Error,
    FailureCallbackAdaptor, LimitingAdaptor, MemoryResource, StatisticsAdaptor, Stream,
    on_out_of_memory,
};

#[derive(Debug, thiserror::Error)]
#[error("the cache could not be dropped")]
struct CacheBusy;

fn limited(limit: usize) -> Arc<LimitingAdaptor<MallocMemoryResource>> {
    Arc::new(LimitingAdaptor::new(MallocMemoryResource::new(), limit))
}

#[test]
fn a_callback_that_frees_a_held_buffer_lets_the_retry_succeed_after_one_call() {
    let limiting = limited(100);
    let s = Stream::cpu();
    let held = Arc::new(Mutex::new(Some(
        DeviceBuffer::new(80, limiting.clone(), &s).unwrap(),
    )));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mr = FailureCallbackAdaptor::new(limiting.clone(), {
        let (held, calls) = (Arc::clone(&held), Arc::clone(&calls));
        move |nbytes, attempt, error: &Error| {
            calls
                .lock()
                .unwrap()
                .push((nbytes, attempt, error.is_out_of_memory()));
            let freed = held.lock().unwrap().take();
            Ok(freed.is_some())
        }
    });
    let p = mr.allocate(50, &s).unwrap();
    assert_eq!(*calls.lock().unwrap(), [(50, 1, true)]);
    assert_eq!(limiting.used_bytes(), 50);
    // SAFETY: allocated above with 50 bytes, freed once.
    unsafe { mr.deallocate(p, 50, &s).unwrap() };
    assert_eq!(limiting.used_bytes(), 0);
}

#[test]
fn a_callback_that_declines_returns_the_original_error_with_its_figures() {
    let limiting = limited(100);
    let s = Stream::cpu();
    let held = limiting.allocate(70, &s).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mr = FailureCallbackAdaptor::new(limiting.clone(), {
        let calls = Arc::clone(&calls);
        move |_, _, _: &Error| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(false)
        }
    });
    let err = mr.allocate(40, &s).unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    let Error::LimitExceeded {
        nbytes,
        limit,
        in_use,
        ref chain,
        ..
    } = err
    else {
        panic!("expected the limit's error, got {err:?}");
    };
    assert_eq!((nbytes, limit, in_use), (40, 100, 70));
    assert!(
        chain.starts_with("FailureCallbackAdaptor -> LimitingAdaptor -> MallocMemoryResource"),
        "{chain}"
    );
    let figures = err.out_of_memory_figures().unwrap();
    assert_eq!(figures.device, Device::CPU);
    assert_eq!(figures.nbytes, 40);
    assert_eq!(figures.largest_fit, Some(30));
    assert_eq!(figures.pool, None);
    assert_eq!(&figures.chain, chain);
    // SAFETY: allocated above with 70 bytes, freed once.
    unsafe { limiting.deallocate(held, 70, &s).unwrap() };
}

#[test]
fn the_callback_is_asked_again_after_each_failed_retry_until_it_declines() {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let mr = FailureCallbackAdaptor::new(limited(10), {
        let attempts = Arc::clone(&attempts);
        move |_, attempt, _: &Error| {
            attempts.lock().unwrap().push(attempt);
            Ok(attempt < 3)
        }
    });
    assert!(
        mr.allocate(11, &Stream::cpu())
            .unwrap_err()
            .is_out_of_memory()
    );
    assert_eq!(*attempts.lock().unwrap(), [1, 2, 3]);
}

#[test]
fn errors_other_than_out_of_memory_pass_through_without_the_callback() {
    let refusing = CallbackMemoryResource::new(
        Device::CPU,
        1,
        |nbytes, _| {
            Err(Error::InvalidArgument {
                reason: format!("{nbytes} is not a size this resource serves"),
            })
        },
        |_, _, _| Ok(()),
    )
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mr = FailureCallbackAdaptor::new(refusing, {
        let calls = Arc::clone(&calls);
        move |_, _, _: &Error| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(true)
        }
    });
    let err = mr.allocate(8, &Stream::cpu()).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidArgument {
            reason: "8 is not a size this resource serves".into()
        }
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0);
}

#[test]
fn a_failing_callback_returns_its_error_as_the_source() {
    let mr = FailureCallbackAdaptor::new(limited(10), |_, _, _: &Error| {
        Err(CallbackError::new(CacheBusy))
    });
    let err = mr.allocate(11, &Stream::cpu()).unwrap_err();
    let Error::Callback {
        ref callback,
        device,
        ref source,
    } = err
    else {
        panic!("expected the callback's error, got {err:?}");
    };
    assert_eq!(callback, "FailureCallbackAdaptor callback");
    assert_eq!(device, Some(Device::CPU));
    assert!(source.downcast_ref::<CacheBusy>().is_some());
    assert!(!err.is_out_of_memory());
}

/// Hooks are process-wide and tests run on many threads: each test counts
/// only the failures of its own thread.
fn count_on(
    thread: ThreadId,
    seen: &Arc<Mutex<Vec<usize>>>,
) -> impl Fn(&Error) -> Result<(), CallbackError> + Send + Sync + 'static {
    let seen = Arc::clone(seen);
    move |err: &Error| {
        if thread::current().id() == thread {
            let nbytes = err.out_of_memory_figures().map_or(0, |f| f.nbytes);
            seen.lock().unwrap().push(nbytes);
        }
        Ok(())
    }
}

#[test]
fn hooks_run_once_per_failure_through_every_layer_and_stop_when_removed() {
    let me = thread::current().id();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = on_out_of_memory(count_on(me, &seen));
    let retrying =
        FailureCallbackAdaptor::new(limited(64), |_, attempt, _: &Error| Ok(attempt < 2));
    let mr: Arc<dyn MemoryResource> = Arc::new(StatisticsAdaptor::new(retrying));
    let s = Stream::cpu();
    assert!(
        DeviceBuffer::new(100, Arc::clone(&mr), &s)
            .unwrap_err()
            .is_out_of_memory()
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [100],
        "one failure, two retries, three layers: one call"
    );
    assert!(
        devmm::empty(
            &[200],
            devmm::DType::UINT8,
            &devmm::EmptyOptions::new().resource(Arc::clone(&mr))
        )
        .is_err()
    );
    assert_eq!(*seen.lock().unwrap(), [100, 200]);
    // A success runs nothing.
    drop(DeviceBuffer::new(8, Arc::clone(&mr), &s).unwrap());
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(hook.remove());
    assert!(!hook.remove(), "a second remove finds nothing");
    assert!(DeviceBuffer::new(100, mr, &s).is_err());
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn an_allocation_nested_in_another_runs_the_hooks_once() {
    let me = thread::current().id();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = on_out_of_memory(count_on(me, &seen));
    let inner = limited(16);
    // A resource that allocates a buffer of its own (as a Python resource
    // allocating a devmm buffer does), which fails.
    let outer: Arc<dyn MemoryResource> = Arc::new(
        CallbackMemoryResource::new(
            Device::CPU,
            1,
            move |nbytes, s| {
                let buffer = DeviceBuffer::new(nbytes, inner.clone(), s)?;
                Ok(DevicePtr::from_addr(buffer.ptr().addr()))
            },
            |_, _, _| Ok(()),
        )
        .unwrap(),
    );
    assert!(
        DeviceBuffer::new(32, outer, &Stream::cpu())
            .unwrap_err()
            .is_out_of_memory()
    );
    assert_eq!(*seen.lock().unwrap(), [32]);
    hook.remove();
}

#[test]
fn a_failing_hook_neither_hides_the_error_nor_stops_the_next_hook() {
    let me = thread::current().id();
    let failing = on_out_of_memory(move |_| {
        if thread::current().id() == me {
            return Err(CallbackError::new(CacheBusy));
        }
        Ok(())
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let counting = on_out_of_memory(count_on(me, &seen));
    let err = DeviceBuffer::new(65, limited(64), &Stream::cpu()).unwrap_err();
    assert!(
        matches!(err, Error::LimitExceeded { nbytes: 65, .. }),
        "{err:?}"
    );
    assert_eq!(*seen.lock().unwrap(), [65]);
    failing.remove();
    counting.remove();
}

#[test]
fn errors_that_are_not_out_of_memory_run_no_hook() {
    let me = thread::current().id();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = on_out_of_memory(count_on(me, &seen));
    let refusing: Arc<dyn MemoryResource> = Arc::new(
        CallbackMemoryResource::new(
            Device::CPU,
            1,
            |_, _| {
                Err(Error::InvalidArgument {
                    reason: "no".into(),
                })
            },
            |_, _, _| Ok(()),
        )
        .unwrap(),
    );
    assert!(DeviceBuffer::new(8, refusing, &Stream::cpu()).is_err());
    assert!(seen.lock().unwrap().is_empty());
    hook.remove();
}
