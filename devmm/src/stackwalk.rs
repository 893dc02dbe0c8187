//! The calling thread's return addresses, fast: a DWARF unwinder
//! ([`framehop`]) whose rules are cached per address, so that a stack seen
//! before (allocations come from the same few call sites over and over)
//! costs a cache lookup and one or two stack reads a frame instead of an
//! unwind-table search. libgcc's unwinder, behind `backtrace::trace`,
//! searches and interprets the unwind tables anew for every frame of every
//! capture (about 1,650 instructions a frame; docs/benchmarks.md has the
//! figures).
//!
//! Linux on x86-64 only; elsewhere, when the thread's stack or the loaded
//! objects cannot be read, or when the unwind information runs out before
//! the stack's end, [`trace`] says so and the caller takes
//! `backtrace::trace` instead.
//!
//! Not async-signal-safe, as libgcc's unwinder is not: a capture takes the
//! loader's lock and may allocate. Inside a signal handler the walk may
//! also end at the signal frame, whose unwind rule the cached unwinder does
//! not evaluate and replaces with the frame pointer (a handler's call site
//! then names the handler's frames only).

/// How a [`trace`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// At the stack's end, or where `each` asked to stop.
    Done,
    /// Not walked: this unwinder is not available here (the platform, a
    /// stack it cannot bound, a walk already running on the thread), and
    /// `each` was called for no frame.
    Unavailable,
    /// Cut short: the unwind information ran out before the stack's end (a
    /// signal frame, code registered at run time, a rule the unwinder does
    /// not evaluate). The frames given are right but not all of them:
    /// libgcc's unwinder, which knows those cases, should walk instead.
    Broken,
}

/// Calls `each` with the instruction pointer of each frame of the calling
/// thread's stack, innermost first (the first is inside this module, the
/// rest are return addresses, as `backtrace::Frame::ip` gives them), until
/// it returns `false` or the stack ends.
#[inline(never)]
pub(crate) fn trace(each: impl FnMut(usize) -> bool) -> Walk {
    imp::trace(each)
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
mod imp {
    use std::cell::RefCell;
    use std::ffi::{c_int, c_void};
    use std::ops::{Deref, Range};

    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
    use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};

    use super::Walk;

    /// Bytes of a loaded object's unwind section, read in place.
    ///
    /// Invariant: `ptr..ptr + len` lies in a segment of an object that the
    /// dynamic loader had mapped when the [`Walker`] holding this section
    /// was built, in the file-backed part of a segment that is not
    /// writable, and a `Walker` is rebuilt before use whenever the
    /// loader's count of loaded or unloaded objects has changed since
    /// (see [`load_generation`]), so the object is still mapped when a
    /// walk starts. A walk reads the sections of the objects its frames
    /// return into, which cannot be unloaded while they are on the stack.
    /// The gap left: framehop falls back to the frame pointer for any
    /// frame whose unwind information fails to evaluate, and a return
    /// address guessed that way may point into an object that another
    /// thread unloads during the walk, whose sections are then read.
    struct Section {
        ptr: *const u8,
        len: usize,
    }

    impl Deref for Section {
        type Target = [u8];

        fn deref(&self) -> &[u8] {
            // SAFETY: by the type's invariant the bytes are mapped, and
            // loaded segments' unwind sections are never written.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }
    }

    /// One thread's unwinder: the loaded objects' unwind sections, the
    /// rules already worked out, and the thread's stack.
    struct Walker {
        unwinder: UnwinderX86_64<Section>,
        cache: CacheX86_64,
        /// The loader's (loaded, unloaded) object counts when built.
        generation: (u64, u64),
        /// The thread's stack, if the thread library could tell (if not,
        /// this thread takes libgcc's unwinder without asking again until
        /// the loaded objects change).
        stack: Option<Stack>,
    }

    /// A thread's stack: what the thread library says it may span, and how
    /// much of that is known to be mapped.
    struct Stack {
        /// Lowest to highest address. For the main thread this is the
        /// most the stack may grow to, not what is mapped: another mapping
        /// (a coroutine's stack) may lie inside it, below a gap.
        limit: Range<u64>,
        /// From here to `limit.end` every page is mapped: checked with
        /// `mincore` when a walk first starts below it. A stack's mapping
        /// never shrinks, and the kernel keeps other mappings a guard gap
        /// away from a stack that grows down, so what was mapped stays
        /// mapped and is all stack.
        mapped_from: u64,
        /// The system's page size.
        page: u64,
    }

    impl Stack {
        /// Whether every word from `sp` to the stack's end can be read:
        /// `sp` inside the limit and every page from it up mapped.
        fn readable_from(&mut self, sp: u64) -> bool {
            if !self.limit.contains(&sp) {
                return false;
            }
            let from = sp & !(self.page - 1);
            if from < self.mapped_from {
                if !mapped(from..self.mapped_from, self.page) {
                    return false;
                }
                self.mapped_from = from;
            }
            true
        }
    }

    /// Whether every page of `range` (page-aligned start) is mapped:
    /// `mincore` fails with `ENOMEM` on any page that is not. Asked a
    /// bounded number of pages at a time, into a buffer on the stack (no
    /// allocation: a capture may run inside an allocator).
    fn mapped(range: Range<u64>, page: u64) -> bool {
        const PAGES: u64 = 256;
        let mut residency = [0u8; PAGES as usize];
        let mut start = range.start;
        while start < range.end {
            let len = (range.end - start).min(PAGES * page);
            // SAFETY: `residency` holds a byte for each of the at most
            // `PAGES` pages of `start..start + len`; `start` is page
            // aligned. mincore reads no memory of the range itself.
            let status = unsafe {
                libc::mincore(start as *mut c_void, len as usize, residency.as_mut_ptr())
            };
            if status != 0 {
                return false;
            }
            start += len;
        }
        true
    }

    thread_local! {
        static WALKER: RefCell<Option<Walker>> = const { RefCell::new(None) };
    }

    // Inlined into the outer `trace`, whose frame is the first: the
    // registers are read there, in a frame that stays live while the stack
    // is walked.
    #[inline(always)]
    pub(super) fn trace(mut each: impl FnMut(usize) -> bool) -> Walk {
        let (ip, sp, bp) = registers();
        let walk = WALKER
            .try_with(|cell| {
                // Busy only if `each` allocated through a tracking adaptor
                // on this thread: that inner capture takes the slow path.
                let Ok(mut walker) = cell.try_borrow_mut() else {
                    return Walk::Unavailable;
                };
                let Some(generation) = load_generation() else {
                    return Walk::Unavailable;
                };
                if walker.as_ref().is_none_or(|w| w.generation != generation) {
                    *walker = Some(Walker::new(generation));
                }
                let Some(walker) = walker.as_mut() else {
                    return Walk::Unavailable;
                };
                // Not on the part of the stack known to be mapped (an
                // alternate signal stack, a coroutine's): nothing to bound
                // reads by.
                let Some(end) = walker
                    .stack
                    .as_mut()
                    .and_then(|s| s.readable_from(sp).then_some(s.limit.end))
                else {
                    return Walk::Unavailable;
                };
                let stack = sp..end;
                let mut read_stack = |address: u64| read_stack(&stack, address);
                let regs = UnwindRegsX86_64::new(ip, sp, bp);
                let mut frames =
                    walker
                        .unwinder
                        .iter_frames(ip, regs, &mut walker.cache, &mut read_stack);
                // Every real frame holds at least its return address, so
                // a stack has no more frames than words: the bound ends a
                // walk that stopped advancing on unwind information gone
                // wrong.
                let mut words = (end - sp) / 8;
                loop {
                    match frames.next() {
                        Ok(Some(frame)) => {
                            if !each(frame.address() as usize) {
                                return Walk::Done;
                            }
                        }
                        Ok(None) => return Walk::Done,
                        Err(_) => return Walk::Broken,
                    }
                    if words == 0 {
                        return Walk::Broken;
                    }
                    words -= 1;
                }
            })
            .unwrap_or(Walk::Unavailable);
        // Nothing after the walk keeps this frame: were the call into the
        // walk ever made a tail call, the first frame's registers would
        // describe a frame already gone and the walk would name wrong
        // callers, reading only this thread's stack all the same (the
        // bounds above hold). `the_walk_finds_the_frames_libgcc_finds`
        // checks the frames. (A `black_box` here made LLVM give this
        // function a frame whose unwind rule the cached unwinder could not
        // cache: every capture 3 to 4 times slower.)
        walk
    }

    /// Reads the word at `address` if it lies in `stack`, the calling
    /// thread's stack from its current top (lowest address) to its end.
    fn read_stack(stack: &Range<u64>, address: u64) -> Result<u64, ()> {
        let in_stack = address.is_multiple_of(8)
            && address >= stack.start
            && address.checked_add(8).is_some_and(|end| end <= stack.end);
        if !in_stack {
            return Err(());
        }
        // SAFETY: `address` is 8-aligned and the word lies between the
        // calling thread's stack pointer and the end of its stack (checked
        // above; `stack` comes from `trace`, which is still running on
        // this stack, and `Stack::readable_from` checked every page of it
        // mapped). The word belongs to a live frame of a caller, which may
        // hold a reference to it: this reads it as plain bytes, the way a
        // debugger would, and nothing is written. Volatile keeps the read
        // as a read of memory the compiler knows nothing of.
        Ok(unsafe { std::ptr::read_volatile(address as *const u64) })
    }

    /// The instruction pointer, stack pointer and frame pointer at this
    /// point of the caller (inlined into it).
    #[inline(always)]
    fn registers() -> (u64, u64, u64) {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: copies three registers into three others; reads and
        // writes no memory, leaves the stack and the flags alone.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        (ip, sp, bp)
    }

    /// The dynamic loader's counts of objects loaded and unloaded so far.
    fn load_generation() -> Option<(u64, u64)> {
        unsafe extern "C" fn first(
            info: *mut libc::dl_phdr_info,
            size: usize,
            data: *mut c_void,
        ) -> c_int {
            if size >= std::mem::size_of::<libc::dl_phdr_info>() {
                // SAFETY: the loader passes a valid `info` of `size` bytes,
                // large enough to hold the counts (checked above), and
                // `data` is the `Option` that `load_generation` passed.
                unsafe {
                    let counts = ((*info).dlpi_adds, (*info).dlpi_subs);
                    *data.cast::<Option<(u64, u64)>>() = Some(counts);
                }
            }
            1 // the first object tells the counts: stop
        }
        let mut counts: Option<(u64, u64)> = None;
        // SAFETY: `first` matches the callback type and only writes
        // `counts`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut counts).cast()) };
        counts
    }

    impl Walker {
        fn new(generation: (u64, u64)) -> Walker {
            // SAFETY: sysconf has no preconditions.
            let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                .ok()
                .filter(|p| p.is_power_of_two());
            let stack = thread_stack().zip(page).map(|(limit, page)| Stack {
                mapped_from: limit.end,
                limit,
                page,
            });
            let mut modules: Vec<Module<Section>> = Vec::new();
            unsafe extern "C" fn add(
                info: *mut libc::dl_phdr_info,
                _size: usize,
                data: *mut c_void,
            ) -> c_int {
                // SAFETY: the loader passes a valid `info` whose program
                // headers are mapped while it runs this callback, and
                // `data` is the `Vec` that `Walker::new` passed.
                unsafe {
                    let info = &*info;
                    let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
                        &[]
                    } else {
                        std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum))
                    };
                    if let Some(module) = module(info.dlpi_addr, phdrs) {
                        (*data.cast::<Vec<Module<Section>>>()).push(module);
                    }
                }
                0 // every object
            }
            // SAFETY: `add` matches the callback type and only pushes onto
            // `modules`, which outlives the call.
            unsafe { libc::dl_iterate_phdr(Some(add), (&raw mut modules).cast()) };
            let mut unwinder = UnwinderX86_64::new();
            for module in modules {
                unwinder.add_module(module);
            }
            Walker {
                unwinder,
                cache: CacheX86_64::new(),
                generation,
                stack,
            }
        }
    }

    /// The unwind information of one loaded object, loaded at `bias`
    /// (object addresses plus `bias` are addresses in this process), from
    /// its program headers; `None` for an object without code or without
    /// an `.eh_frame_hdr` this reader understands.
    ///
    /// # Safety
    ///
    /// The object must be mapped as `phdrs` describe.
    unsafe fn module(bias: u64, phdrs: &[libc::Elf64_Phdr]) -> Option<Module<Section>> {
        let segment = |p: &libc::Elf64_Phdr| Some(p.p_vaddr..p.p_vaddr.checked_add(p.p_memsz)?);
        let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
        let code = loads()
            .filter(|p| p.p_flags & libc::PF_X != 0)
            .filter_map(&segment)
            .reduce(|a, b| a.start.min(b.start)..a.end.max(b.end))?;
        let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME)?;
        let hdr_svma = segment(hdr)?;
        // The file-backed part of the read-only segment that holds an
        // object address: unwind sections are read in place, so they must
        // never be written while a walk reads them, nor lie in memory the
        // file does not fill.
        let file_backed = |p: &libc::Elf64_Phdr| {
            (p.p_flags & libc::PF_W == 0)
                .then(|| Some(p.p_vaddr..p.p_vaddr.checked_add(p.p_filesz)?))
                .flatten()
        };
        let holder = |start: u64| loads().filter_map(file_backed).find(|s| s.contains(&start));
        let hdr_segment = holder(hdr_svma.start)?;
        if hdr_svma.end > hdr_segment.end || hdr_svma.end - hdr_svma.start < 8 {
            return None;
        }
        let hdr_len = usize::try_from(hdr_svma.end - hdr_svma.start).ok()?;
        let hdr_ptr = bias.wrapping_add(hdr_svma.start) as *const u8;
        // SAFETY: the header lies in a loaded segment (checked above),
        // mapped as the caller guarantees.
        let hdr_bytes = unsafe { std::slice::from_raw_parts(hdr_ptr, hdr_len) };
        let eh_frame_start = eh_frame_address(hdr_bytes, hdr_svma.start)?;
        // `.eh_frame_hdr` does not say how long `.eh_frame` is: up to the
        // end of its segment, which is mapped, is long enough.
        let eh_frame_svma = eh_frame_start..holder(eh_frame_start)?.end;
        let section = |svma: &Range<u64>| Section {
            ptr: bias.wrapping_add(svma.start) as *const u8,
            len: (svma.end - svma.start) as usize,
        };
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some(code.clone()),
            // No code bytes: the first frame is `trace`'s own body, past
            // its prologue, so no prologue analysis is needed.
            text: None,
            stubs_svma: None,
            stub_helper_svma: None,
            got_svma: None,
            unwind_info: None,
            eh_frame: Some(section(&eh_frame_svma)),
            eh_frame_svma: Some(eh_frame_svma),
            eh_frame_hdr: Some(section(&hdr_svma)),
            eh_frame_hdr_svma: Some(hdr_svma),
            debug_frame: None,
            text_segment_svma: None,
            text_segment: None,
        };
        let avma = bias.checked_add(code.start)?..bias.checked_add(code.end)?;
        Some(Module::new(String::new(), avma, bias, info))
    }

    /// Where `.eh_frame` starts (an object address), as the
    /// `.eh_frame_hdr` at object address `hdr_svma` says.
    fn eh_frame_address(hdr: &[u8], hdr_svma: u64) -> Option<u64> {
        const PCREL: u8 = 0x10;
        const DATAREL: u8 = 0x30;
        const INDIRECT: u8 = 0x80;
        let (&[version, encoding, ..], Some(field)) = (hdr, hdr.get(4..)) else {
            return None;
        };
        // An indirect pointer names where the address is, not the address.
        if version != 1 || encoding & INDIRECT != 0 {
            return None;
        }
        let word = |n: usize| field.get(..n);
        let value: i64 = match encoding & 0x0f {
            0x03 => u32::from_le_bytes(word(4)?.try_into().ok()?).into(),
            0x0b => i32::from_le_bytes(word(4)?.try_into().ok()?).into(),
            0x00 | 0x04 | 0x0c => i64::from_le_bytes(word(8)?.try_into().ok()?),
            _ => return None,
        };
        let base = match encoding & 0x70 {
            0 => 0,
            PCREL => hdr_svma + 4,
            DATAREL => hdr_svma,
            _ => return None,
        };
        base.checked_add_signed(value)
    }

    /// The calling thread's stack, lowest to highest address.
    fn thread_stack() -> Option<Range<u64>> {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
        // SAFETY: `pthread_getattr_np` initialises `attr` when it returns
        // 0; only then is it read, and destroyed once.
        unsafe {
            if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
                return None;
            }
            let mut low: *mut c_void = std::ptr::null_mut();
            let mut size = 0usize;
            let read = libc::pthread_attr_getstack(attr.as_ptr(), &mut low, &mut size);
            libc::pthread_attr_destroy(attr.as_mut_ptr());
            if read != 0 || low.is_null() {
                return None;
            }
            let low = low as u64;
            Some(low..low.checked_add(size as u64)?)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn stack_reads_stay_in_the_stack_and_aligned() {
            let word = 0x1234_5678_u64;
            let at = &raw const word as u64;
            let stack = at..at + 16;
            assert_eq!(read_stack(&stack, at), Ok(0x1234_5678));
            assert_eq!(read_stack(&stack, at + 4), Err(()));
            assert_eq!(read_stack(&stack, at - 8), Err(()));
            assert_eq!(read_stack(&stack, at + 16), Err(()));
            assert_eq!(read_stack(&stack, u64::MAX - 7), Err(()));
        }

        #[test]
        fn the_eh_frame_pointer_decodes() {
            // version 1, pcrel|sdata4, then -0x20 from the field at +4.
            let hdr = [1, 0x1b, 0x03, 0x3b, 0xe0, 0xff, 0xff, 0xff];
            assert_eq!(eh_frame_address(&hdr, 0x1000), Some(0x1004 - 0x20));
            let absolute = [1, 0x03, 0, 0, 0x00, 0x20, 0, 0];
            assert_eq!(eh_frame_address(&absolute, 0x1000), Some(0x2000));
            assert_eq!(eh_frame_address(&[2, 0x1b, 0, 0, 0, 0, 0, 0], 0), None);
            assert_eq!(eh_frame_address(&[1, 0x1b, 0, 0], 0), None);
            assert_eq!(
                eh_frame_address(&[1, 0x1b], 0),
                None,
                "shorter than its header"
            );
            let indirect = [1, 0x9b, 0x03, 0x3b, 0xe0, 0xff, 0xff, 0xff];
            assert_eq!(
                eh_frame_address(&indirect, 0x1000),
                None,
                "an indirect pointer"
            );
        }

        #[test]
        fn every_loaded_object_with_code_is_read() {
            let walker = Walker::new((0, 0));
            let here = every_loaded_object_with_code_is_read as *const () as u64;
            assert!(walker.unwinder.max_known_code_address() > here);
            let sp = registers().1;
            let mut stack = walker.stack.expect("this thread's stack");
            assert!(stack.limit.contains(&sp), "{sp:x} in {:x?}", stack.limit);
            assert!(stack.readable_from(sp));
            assert!(stack.mapped_from <= sp && stack.mapped_from > sp - stack.page);
        }

        #[test]
        fn a_stack_pointer_below_a_gap_in_the_limit_is_not_walked() {
            // The main thread's limit may span a gap with another mapping
            // (a coroutine's stack) below it: a walk from there would read
            // the gap on its way up.
            let real = Walker::new((0, 0)).stack.expect("this thread's stack");
            let page = real.page;
            let sp = registers().1;
            let mut stack = Stack {
                limit: page..real.limit.end,
                mapped_from: real.limit.end,
                page,
            };
            // The first page is never mapped: a stack pointer there is
            // refused, and nothing is taken as mapped.
            assert!(!stack.readable_from(page + 64));
            assert_eq!(stack.mapped_from, real.limit.end);
            // This stack's own pages are.
            assert!(stack.readable_from(sp));
            assert!(!mapped(0..page, page));
            assert!(mapped(stack.mapped_from..real.limit.end, page));
        }
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri))))]
mod imp {
    #[inline(always)]
    pub(super) fn trace(_each: impl FnMut(usize) -> bool) -> super::Walk {
        super::Walk::Unavailable
    }
}

#[cfg(test)]
mod tests {
    /// Whether this target has the fast walk (Miri runs no assembly and no
    /// loader calls: it takes `backtrace`'s own path).
    const WALKS: bool = cfg!(all(target_os = "linux", target_arch = "x86_64", not(miri)));

    /// The same frames as libgcc's unwinder finds, from this test up to
    /// the start of the thread (frames below `trace` differ: each has its
    /// own).
    #[inline(never)]
    fn both() -> (Vec<usize>, Vec<usize>) {
        let mut fast = Vec::new();
        let walked = super::trace(&mut |ip| {
            fast.push(ip);
            true
        }) == super::Walk::Done;
        let mut slow = Vec::new();
        backtrace::trace(|frame| {
            slow.push(frame.ip() as usize);
            true
        });
        if !walked {
            fast.clear();
        }
        (fast, slow)
    }

    #[test]
    fn the_walk_finds_the_frames_libgcc_finds() {
        let (fast, slow) = both();
        if !WALKS {
            assert!(fast.is_empty());
            return;
        }
        // From the return address into `both`'s caller (this test) on,
        // the two agree frame for frame, down to the thread's start: every
        // frame of the test harness and the C runtime unwinds as libgcc
        // unwinds it.
        let caller = |frames: &[usize]| {
            let at = frames
                .iter()
                .position(|&ip| names(ip).iter().any(|n| n.contains("the_walk_finds")))
                .expect("this test's frame");
            frames[at..].to_vec()
        };
        let (fast, mut slow) = (caller(&fast), caller(&slow));
        // libgcc ends a thread's stack with a null frame; the walk stops
        // at the last real one.
        if slow.last() == Some(&0) {
            slow.pop();
        }
        assert!(fast.len() >= 2, "{fast:x?}");
        assert_eq!(fast, slow, "{fast:x?} vs {slow:x?}");
    }

    #[test]
    fn a_walk_inside_a_walk_is_left_to_libgcc() {
        use super::Walk;
        // The thread's walker is busy: the inner call declines, calling
        // nothing, and the caller falls back to `backtrace::trace`.
        let mut inner = None;
        let mut outer = 0;
        let walked = super::trace(&mut |_| {
            if inner.is_none() {
                let mut called = false;
                let walk = super::trace(&mut |_| {
                    called = true;
                    true
                });
                inner = Some((walk, called));
            }
            outer += 1;
            true
        });
        if WALKS {
            assert_eq!(walked, Walk::Done);
            assert_eq!(inner, Some((Walk::Unavailable, false)));
            assert!(outer >= 3, "{outer}");
        } else {
            assert!(walked == Walk::Unavailable && inner.is_none() && outer == 0);
        }
        // And the walker is free again.
        assert_eq!(super::trace(&mut |_| false), walked);
    }

    fn names(ip: usize) -> Vec<String> {
        let mut names = Vec::new();
        backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
            if let Some(name) = symbol.name() {
                names.push(format!("{name:#}"));
            }
        });
        names
    }
}
