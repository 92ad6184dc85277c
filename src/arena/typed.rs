//! Typed allocation on top of [`MonotonicArena::alloc_layout`]: values,
//! slices and strings. Nothing placed here is ever dropped.
//!
//! Handing out `&mut T` from `&self` is the point of an arena (bumpalo does
//! the same): every block is fresh and disjoint, so the references never
//! alias, and `reset` needs `&mut self`, so none outlives its memory.
#![allow(clippy::mut_from_ref)]

use std::alloc::{Layout, handle_alloc_error};
use std::ptr;
use std::slice;

use super::{AllocError, MonotonicArena};

impl MonotonicArena {
    /// Moves `value` into the arena and returns a mutable reference to it,
    /// or an error (the arena unchanged) if no buffer could be had.
    ///
    /// The value's `Drop` never runs.
    #[inline]
    pub fn try_alloc<T>(&self, value: T) -> Result<&mut T, AllocError> {
        let ptr = self.alloc_layout(Layout::new::<T>())?.cast::<T>();
        // SAFETY: `ptr` is aligned for `T` and valid for a write of
        // `size_of::<T>()` bytes (a dangling aligned pointer for a zero-size
        // `T`); nobody else references that memory, which stays valid for as
        // long as the arena is borrowed (`reset`/`release` need `&mut`).
        unsafe {
            ptr.as_ptr().write(value);
            Ok(&mut *ptr.as_ptr())
        }
    }

    /// Moves `value` into the arena and returns a mutable reference to it.
    ///
    /// Aborts through [`handle_alloc_error`] if the global allocator fails,
    /// like `Box::new`; use [`try_alloc`](Self::try_alloc) to get an error
    /// instead. The value's `Drop` never runs.
    ///
    /// ```
    /// use tonic_hotpath::arena::MonotonicArena;
    ///
    /// let arena = MonotonicArena::new();
    /// let point = arena.alloc((3_i32, 4_i32));
    /// point.0 += 1;
    /// assert_eq!(*point, (4, 4));
    /// ```
    #[inline]
    pub fn alloc<T>(&self, value: T) -> &mut T {
        match self.try_alloc(value) {
            Ok(value) => value,
            Err(_) => handle_alloc_error(Layout::new::<T>()),
        }
    }

    /// Copies `src` into the arena.
    pub fn alloc_slice_copy<T: Copy>(&self, src: &[T]) -> Result<&mut [T], AllocError> {
        let dst = self.alloc_layout(Layout::for_value(src))?.cast::<T>();
        // SAFETY: `dst` is aligned and valid for `src.len()` elements, fresh
        // arena memory that cannot overlap `src` (which the caller borrows
        // from elsewhere or from an earlier, disjoint arena block).
        unsafe {
            ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len());
            Ok(slice::from_raw_parts_mut(dst.as_ptr(), src.len()))
        }
    }

    /// Clones every element of `src` into the arena.
    pub fn alloc_slice_clone<T: Clone>(&self, src: &[T]) -> Result<&mut [T], AllocError> {
        self.alloc_slice_fill_with(src.len(), |i| src[i].clone())
    }

    /// A slice of `len` elements, element `i` being `fill(i)`.
    ///
    /// Errors if `len * size_of::<T>()` overflows `isize::MAX` or no buffer
    /// could be had. If `fill` panics, the elements made so far are leaked
    /// (never dropped), which is safe.
    ///
    /// ```
    /// use tonic_hotpath::arena::MonotonicArena;
    ///
    /// let arena = MonotonicArena::new();
    /// let squares = arena.alloc_slice_fill_with(4, |i| (i * i) as u32)?;
    /// assert_eq!(squares, [0, 1, 4, 9]);
    /// # Ok::<(), tonic_hotpath::arena::AllocError>(())
    /// ```
    pub fn alloc_slice_fill_with<T>(
        &self,
        len: usize,
        mut fill: impl FnMut(usize) -> T,
    ) -> Result<&mut [T], AllocError> {
        let layout = Layout::array::<T>(len).map_err(|_| AllocError::SizeOverflow {
            size: len,
            align: size_of::<T>(),
        })?;
        let dst = self.alloc_layout(layout)?.cast::<T>();
        for i in 0..len {
            // SAFETY: `i < len` and `dst` is valid and aligned for `len`
            // elements (an aligned dangling pointer when the layout is
            // zero-size, where writes are no-ops).
            unsafe { dst.as_ptr().add(i).write(fill(i)) };
        }
        // SAFETY: all `len` elements were initialised above.
        Ok(unsafe { slice::from_raw_parts_mut(dst.as_ptr(), len) })
    }

    /// Copies `src` into the arena.
    pub fn alloc_str(&self, src: &str) -> Result<&mut str, AllocError> {
        let bytes = self.alloc_slice_copy(src.as_bytes())?;
        // SAFETY: the bytes are an exact copy of a valid `str`.
        Ok(unsafe { std::str::from_utf8_unchecked_mut(bytes) })
    }
}
