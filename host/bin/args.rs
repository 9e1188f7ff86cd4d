//! Typed command-line values, checked by the parser before anything touches a GPU: each parser
//! returns the rule a bad value broke, and clap names the flag beside it.
use mkernel::gemm::{BLayout, GemmShape};

/// `MxNxK`, each at least 1.
pub fn shape(s: &str) -> Result<GemmShape, String> {
    let dims: Vec<&str> = s.split('x').collect();
    let [m, n, k] = dims[..] else {
        return Err(format!("`{s}` is not MxNxK (three sizes joined by `x`, e.g. 8192x8192x8192)"));
    };
    let dim = |v: &str, name: &str| -> Result<usize, String> {
        match v.parse::<usize>() {
            Ok(0) => Err(format!("`{s}`: {name} must be at least 1")),
            Ok(x) => Ok(x),
            Err(_) => Err(format!("`{s}`: {name} = `{v}` is not a whole number")),
        }
    };
    Ok(GemmShape { m: dim(m, "M")?, n: dim(n, "N")?, k: dim(k, "K")? })
}

/// A B layout: `nk` ([N, K], a torch Linear weight) or `kn` ([K, N]).
pub fn layout(s: &str) -> Result<BLayout, String> {
    match s {
        "nk" => Ok(BLayout::NK),
        "kn" => Ok(BLayout::KN),
        _ => Err(format!("`{s}`: a B layout is `nk` ([N, K]) or `kn` ([K, N])")),
    }
}

/// An attention config `BxHxSxD` (batch, heads, sequence length, head dimension), every size at
/// least 1 (the op itself checks the head dimension).
pub fn attention(s: &str) -> Result<mkernel::attention::AttentionShape, String> {
    let dims: Vec<&str> = s.split('x').collect();
    let [b, h, sq, d] = dims[..] else {
        return Err(format!("`{s}` is not BxHxSxD (four sizes joined by `x`, e.g. 4x16x8192x128)"));
    };
    let dim = |v: &str, name: &str| -> Result<usize, String> {
        match v.parse::<usize>() {
            Ok(0) => Err(format!("`{s}`: {name} must be at least 1")),
            Ok(x) => Ok(x),
            Err(_) => Err(format!("`{s}`: {name} = `{v}` is not a whole number")),
        }
    };
    let (heads, seq) = (dim(h, "H")?, dim(sq, "S")?);
    Ok(mkernel::attention::AttentionShape {
        batch: dim(b, "B")?,
        heads,
        heads_kv: heads,
        seq_q: seq,
        seq_k: seq,
        head_dim: dim(d, "D")?,
    })
}

/// An attention layout: `bhsd` or `bshd`.
pub fn attn_layout(s: &str) -> Result<mkernel::attention::AttnLayout, String> {
    match s {
        "bhsd" => Ok(mkernel::attention::AttnLayout::Bhsd),
        "bshd" => Ok(mkernel::attention::AttnLayout::Bshd),
        _ => Err(format!("`{s}`: an attention layout is `bhsd` ([B, H, S, D]) or `bshd` ([B, S, H, D])")),
    }
}

/// An attention mask: `causal` (true) or `full` (false).
pub fn mask(s: &str) -> Result<bool, String> {
    match s {
        "causal" => Ok(true),
        "full" => Ok(false),
        _ => Err(format!("`{s}`: a mask is `causal` or `full`")),
    }
}

/// A byte count at least 1: a whole number with an optional binary suffix (`K`, `M`, `G`, with or
/// without `iB`), e.g. `1048576`, `16M`, `256MiB`.
pub fn size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("`{s}` is not a size (a whole number, e.g. 16M or 1048576)"));
    }
    let shift = match unit.trim_end_matches("iB").trim_end_matches('B') {
        "" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use a number with K, M or G, e.g. 16M)")),
    };
    let n: usize = num.parse().map_err(|_| format!("`{s}` is not a size (a whole number, e.g. 16M or 1048576)"))?;
    if n == 0 {
        return Err(format!("`{s}`: a size must be at least 1 byte"));
    }
    n.checked_shl(shift).filter(|v| v >> shift == n).ok_or_else(|| format!("`{s}` is too large"))
}

/// A whole number in `LO..=HI`; a negative or non-numeric value gets the same rule, not clap's
/// "unexpected argument".
pub fn count<const LO: u32, const HI: u32>(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if (LO as i64..=HI as i64).contains(&v) => Ok(v as u32),
        Ok(v) => Err(format!("{v} is not in {LO}..={HI}")),
        Err(_) => Err(format!("`{s}` is not a whole number in {LO}..={HI}")),
    }
}

/// A GPU ordinal list: `0,1,2`.
pub fn ordinal(s: &str) -> Result<u32, String> {
    s.trim().parse().map_err(|_| format!("`{s}` is not a GPU ordinal (0, 1, ...)"))
}

/// A GEMM tile width: one of `gemm::TILE_WIDTHS`.
pub fn tile_width(s: &str) -> Result<u32, String> {
    let widths = mkernel::gemm::TILE_WIDTHS;
    s.parse::<u32>().ok().filter(|w| widths.contains(w)).ok_or_else(|| format!("`{s}`: must be one of {widths:?}"))
}

/// A lead of the reduce-scatter's tile walk: a number of rounds, or `all` (every send first).
pub fn lead(s: &str) -> Result<u32, String> {
    if s == "all" {
        return Ok(u32::MAX);
    }
    s.parse::<u32>().map_err(|_| format!("`{s}`: a number of rounds, or `all`"))
}

/// Traced launches: `FIRST` or `FIRST,COUNT` (epochs count from 1; COUNT defaults to 1).
pub fn epochs(s: &str) -> Result<(u32, u32), String> {
    let whole = |v: &str, name: &str| -> Result<u32, String> {
        match v.parse::<u32>() {
            Ok(0) => Err(format!("`{s}`: {name} must be at least 1")),
            Ok(x) => Ok(x),
            Err(_) => Err(format!("`{s}`: {name} = `{v}` is not a whole number")),
        }
    };
    match s.split(',').collect::<Vec<_>>()[..] {
        [first] => Ok((whole(first, "FIRST")?, 1)),
        [first, count] => Ok((whole(first, "FIRST")?, whole(count, "COUNT")?)),
        _ => Err(format!("`{s}` is not FIRST or FIRST,COUNT")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leads() {
        assert_eq!(lead("all"), Ok(u32::MAX));
        assert_eq!(lead("66"), Ok(66));
        assert!(lead("-1").unwrap_err().contains("`all`"));
    }

    #[test]
    fn shapes() {
        assert_eq!(shape("8x16x24").unwrap(), GemmShape { m: 8, n: 16, k: 24 });
        for bad in ["0x8x8", "8x8", "8x8x8x8", "axbxc", "8x-1x8", ""] {
            assert!(shape(bad).is_err(), "{bad} accepted");
        }
        assert!(shape("0x8x8").unwrap_err().contains("M must be at least 1"));
    }

    #[test]
    fn sizes() {
        assert_eq!(size("17").unwrap(), 17);
        assert_eq!(size("16M").unwrap(), 16 << 20);
        assert_eq!(size("256MiB").unwrap(), 256 << 20);
        assert_eq!(size("1G").unwrap(), 1 << 30);
        for bad in ["0", "abc", "-1", "5X", "99999999999999999999G"] {
            assert!(size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn counts() {
        assert_eq!(count::<1, 8>("8").unwrap(), 8);
        assert_eq!(count::<1, 8>("-1").unwrap_err(), "-1 is not in 1..=8");
        assert_eq!(count::<1, 8>("0").unwrap_err(), "0 is not in 1..=8");
        assert!(count::<1, 8>("x").unwrap_err().contains("not a whole number"));
        assert!(count::<1, 8>("99999999999999999999").unwrap_err().contains("not a whole number"));
    }

    #[test]
    fn layouts() {
        assert_eq!(layout("nk").unwrap(), BLayout::NK);
        assert_eq!(layout("kn").unwrap(), BLayout::KN);
        assert!(layout("NK").is_err());
    }

    #[test]
    fn epochs_take_a_first_and_a_count() {
        assert_eq!(epochs("41"), Ok((41, 1)));
        assert_eq!(epochs("41,2"), Ok((41, 2)));
        assert!(epochs("0,2").unwrap_err().contains("FIRST must be at least 1"));
        assert!(epochs("4,0").unwrap_err().contains("COUNT must be at least 1"));
        assert!(epochs("1,2,3").unwrap_err().contains("not FIRST or FIRST,COUNT"));
        assert!(epochs("x").unwrap_err().contains("not a whole number"));
    }
}
