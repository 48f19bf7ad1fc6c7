//! A global allocator that counts allocations on the threads that arm it, for
//! the tests that prove a loop allocates nothing per packet (`no_alloc.rs`,
//! `logging.rs`, and the capture writer's test in `it/capture.rs`). Each test
//! program installs it with
//! `#[global_allocator] static GLOBAL: counting::Counting = counting::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The counting allocator: the system's, counting while armed.
pub struct Counting;

thread_local! {
    /// Set on a thread whose allocations are counted.
    pub static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Allocations counted so far, over every armed thread.
pub static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn count() {
    if ARMED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: every call is passed to the system allocator unchanged; counting
// touches only an atomic and a thread-local flag, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}
