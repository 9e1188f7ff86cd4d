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

/// `$f!(0); ... $f!(31);`
macro_rules! unroll32 {
    ($f:ident) => {
        unroll16!($f, 0);
        unroll16!($f, 16);
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
