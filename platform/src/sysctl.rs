//! A kernel value read by `sysctl(3)` (macOS and the BSDs): the one call the machine's memory,
//! a process's argument limit and the open-file limit share.

use std::ffi::c_int;

use nix::libc;

/// The value `mib` names, when the kernel gives one of exactly `T`'s size. `T` is a plain
/// integer (`c_int`, `u64`, …), which every bit pattern is.
pub(crate) fn value<T: Copy + Default>(mib: &[c_int]) -> Option<T> {
    let mut mib = mib.to_vec();
    let mut value = T::default();
    let mut size = std::mem::size_of::<T>();
    // SAFETY: the kernel writes at most `size` bytes into `value` and says how many; `T` is a
    // plain integer, valid for any bytes.
    let rc = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            u32::try_from(mib.len()).ok()?,
            (&raw mut value).cast(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && size == std::mem::size_of::<T>()).then_some(value)
}
