//! Compile-time unrolling for per-register code: a thread's wgmma accumulators are registers only
//! while every index into them is a constant, so loops over them are written out.

/// `$f!(o + 0); ... $f!(o + 15);` with `o` the optional offset (0 without one).
macro_rules! unroll16 {
    ($f:ident) => {
        unroll16!($f, 0)
    };
    ($f:ident, $o:expr) => {
        $f!($o + 0);
        $f!($o + 1);
        $f!($o + 2);
        $f!($o + 3);
        $f!($o + 4);
        $f!($o + 5);
        $f!($o + 6);
        $f!($o + 7);
        $f!($o + 8);
        $f!($o + 9);
        $f!($o + 10);
        $f!($o + 11);
        $f!($o + 12);
        $f!($o + 13);
        $f!($o + 14);
        $f!($o + 15);
    };
}

/// `$f!(j)` for `j` in `0..$n` (`$n` a constant `u32` of at most 32, such as an
/// `Accumulators::CHUNKS`): written out for all 32 and skipped past `$n` at compile time.
macro_rules! unroll_below {
    ($n:expr, $f:ident) => {
        unroll_below!(@ $n, $f, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
    (@ $n:expr, $f:ident, $($j:literal)*) => {
        const { assert!($n <= 32) };
        $(
            if $j < $n {
                $f!($j);
            }
        )*
    };
}

/// `$f!(0); ... $f!(7);`
macro_rules! unroll8 {
    ($f:ident) => {
        $f!(0);
        $f!(1);
        $f!(2);
        $f!(3);
        $f!(4);
        $f!(5);
        $f!(6);
        $f!(7);
    };
}
