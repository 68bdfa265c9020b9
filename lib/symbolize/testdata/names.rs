// Test fixture for demangling Rust symbols: a function in a module and a generic method, kept out of line
// so both appear in the symbol table under the legacy and the v0 mangling.
pub mod inner {
    #[inline(never)]
    pub fn spin_function(x: u32) -> u32 {
        (0..x).fold(1, |acc, i| acc.wrapping_mul(31).wrapping_add(i))
    }
}

pub struct Widget<T>(pub T);

impl<T: Copy + Into<u64>> Widget<T> {
    #[inline(never)]
    pub fn widen(&self) -> u64 {
        self.0.into() * 3
    }
}

fn main() {
    let n = std::env::args().count() as u32;
    println!("{} {}", inner::spin_function(n), Widget(n).widen());
}
