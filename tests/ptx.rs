//! The embedded PTX, checked without a GPU: it targets sm_90a and declares every kernel; NVIDIA's
//! ptxas assembles it; the SASS holds the instructions each kernel must use (so a silent fallback
//! to a slower path cannot pass); the GEMM neither spills nor has its wgmmas serialised (the
//! AllGather + GEMM kernels may keep one word of predicates in local memory, outside the k-loop);
//! the fused kernels' k-loops (GEMM + ReduceScatter / AllReduce, split-K, the MoE) stay clean.
//! ptxas / cuobjdump come from scripts/setup.sh (PyPI wheels), `MKERNEL_NVTOOLS`, or a CUDA install.
use mkernel::abi::trace;
use mkernel::gpu::kernels;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// `nvtool`: where NVIDIA's tools are looked for, shared with build.rs.
include!("../nvtools.rs");

fn tool(name: &str) -> PathBuf {
    nvtool(Path::new(env!("CARGO_MANIFEST_DIR")), name).unwrap_or_else(|| {
        panic!("`{name}` not found: run scripts/setup.sh (it installs NVIDIA's ptxas/cuobjdump from PyPI) or set MKERNEL_NVTOOLS")
    })
}

struct Assembled {
    log: String,
    sass: String,
}

/// Assemble once per test binary: ptxas -v log and the full SASS listing.
fn assembled() -> &'static Assembled {
    static A: OnceLock<Assembled> = OnceLock::new();
    A.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("mkernel-ptx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ptx, cubin) = (dir.join("mkernel.ptx"), dir.join("mkernel.cubin"));
        std::fs::write(&ptx, kernels::PTX).unwrap();
        let out = Command::new(tool("ptxas"))
            .args(["-arch=sm_90a", "-v", "-warn-spills", "-o"])
            .arg(&cubin)
            .arg(&ptx)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ptxas rejected the module:\n{log}");
        let cuobjdump = tool("cuobjdump");
        let nvdisasm_dir = tool("nvdisasm").parent().unwrap().to_path_buf();
        let path = std::env::join_paths(
            std::iter::once(nvdisasm_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .unwrap();
        let out = Command::new(cuobjdump).arg("-sass").arg(&cubin).env("PATH", path).output().unwrap();
        assert!(out.status.success(), "cuobjdump failed: {}", String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::remove_dir_all(&dir);
        Assembled { log, sass: String::from_utf8_lossy(&out.stdout).into_owned() }
    })
}

/// SASS of one kernel (its `Function : name` section).
fn sass_of(kernel: &str) -> String {
    let sass = &assembled().sass;
    let marker = format!("Function : {kernel}\n");
    let start = sass.find(&marker).unwrap_or_else(|| panic!("no SASS for {kernel}"));
    let rest = &sass[start + marker.len()..];
    rest[..rest.find("Function : ").unwrap_or(rest.len())].to_string()
}

/// SASS `/*addr*/` of a line, if it has one.
fn sass_addr(line: &str) -> Option<u64> {
    let rest = line.trim_start().strip_prefix("/*")?;
    u64::from_str_radix(&rest[..rest.find("*/")?], 16).ok()
}

/// In `sass`, which starts at the first instruction of a loop body, the end of the line that
/// branches back to at or before that instruction (the loop's back edge).
fn loop_back_edge(sass: &str) -> Option<usize> {
    let start = sass_addr(sass.lines().next()?)?;
    let mut end = 0;
    for line in sass.split_inclusive('\n') {
        end += line.len();
        let (Some(addr), Some(target)) = (sass_addr(line), line.split(" BRA 0x").nth(1)) else { continue };
        let target = u64::from_str_radix(target.split(|c: char| !c.is_ascii_hexdigit()).next()?, 16).ok()?;
        if target <= start && target < addr {
            return Some(end);
        }
    }
    None
}

/// ptxas -v lines about one entry function.
fn ptxas_report(kernel: &str) -> String {
    let log = &assembled().log;
    let start = log
        .find(&format!("Compiling entry function '{kernel}'"))
        .unwrap_or_else(|| panic!("ptxas said nothing of {kernel}"));
    let rest = &log[start..];
    let end = rest[1..].find("Compiling entry function").map(|e| e + 1).unwrap_or(rest.len());
    rest[..end].to_string()
}

#[test]
fn targets_sm90a_and_declares_every_kernel() {
    assert!(kernels::PTX.contains(".target sm_90a"), "module does not target sm_90a");
    for k in kernels::ALL {
        assert!(kernels::PTX.contains(&format!(".entry {k}(")), "kernel {k} missing from the PTX");
    }
}

/// The product's module keeps no launch timelines: the `trace` feature's buffers exist only in a
/// diagnostic build (MKERNEL_DEVICE_FEATURES=trace), whose records carry `+trace` in their commit.
#[test]
fn the_product_module_has_no_timeline_buffers() {
    if std::env::var("MKERNEL_DEVICE_FEATURES").is_ok_and(|f| f.contains("trace")) {
        // A diagnostic build, on purpose: the host must find its buffers by name.
        for sym in [trace::SELECT, trace::COUNT, trace::BUFFER, trace::EXITS] {
            assert!(
                kernels::PTX.lines().any(|l| l.starts_with(".visible .global") && l.contains(&format!(" {sym}["))),
                "the trace module does not export {sym}"
            );
        }
        return;
    }
    assert!(!kernels::PTX.contains("MK_TRACE"), "the module was built with the `trace` feature");
}

#[test]
fn barriers_tolerate_duplication_by_llvm() {
    // `bar.sync` is `barrier.sync.aligned`: if LLVM duplicates it into two arms of a branch, one
    // warp reaches two barrier instructions and deadlocks (seen on an H100). Only the
    // non-aligned forms may appear.
    for (i, line) in kernels::PTX.lines().enumerate() {
        let l = line.trim_start();
        assert!(
            !l.starts_with("bar.sync") && !l.starts_with("bar.arrive") && !l.starts_with("bar.red"),
            "PTX line {}: aligned barrier `{l}`",
            i + 1
        );
        assert!(!(l.starts_with("barrier.") && l.contains(".aligned")), "PTX line {}: aligned barrier `{l}`", i + 1);
    }
}

/// Every kernel built on the GEMM engine: the plain GEMM, the gathered GEMM (its producer
/// warpgroup copying A's rows: at 40 registers their addresses spilled in every k-block) and the
/// fused ops.
const ENGINE_KERNELS: [&str; 6] = [
    kernels::GEMM_KN.name,
    kernels::GEMM_NK.name,
    kernels::GEMM_GATHER_KN.name,
    kernels::GEMM_GATHER_NK.name,
    kernels::AG_GEMM_KN.name,
    kernels::AG_GEMM_NK.name,
];

/// The fused GEMM + ReduceScatter / AllReduce kernels, one node and several.
const GEMM_RS_KERNELS: [&str; 6] = [
    kernels::GEMM_RS_KN.name,
    kernels::GEMM_RS_NK.name,
    kernels::GEMM_AR_ONE_SHOT_KN.name,
    kernels::GEMM_AR_ONE_SHOT_NK.name,
    kernels::GEMM_RS_NODES_KN.name,
    kernels::GEMM_RS_NODES_NK.name,
];

#[test]
fn gemm_kernels_have_launch_bounds() {
    for k in ENGINE_KERNELS.into_iter().chain(GEMM_RS_KERNELS) {
        let at = kernels::PTX.find(&format!(".entry {k}(")).unwrap();
        let head = &kernels::PTX[at..at + kernels::PTX[at..].find('{').unwrap()];
        assert!(
            head.contains(".maxntid 384, 1, 1") && head.contains(".minnctapersm 1"),
            "{k}: launch bounds missing:\n{head}"
        );
    }
}

#[test]
fn ptxas_assembles_for_sm90a() {
    let log = &assembled().log;
    for k in kernels::ALL {
        assert!(log.contains(&format!("Compiling entry function '{k}' for 'sm_90a'")), "ptxas did not compile {k}");
    }
}

#[test]
fn selftest_sass_uses_hopper_instructions() {
    let tile = sass_of(kernels::WGMMA_TILE.name);
    for needle in [
        "HGMMA.64x64x16.F32.BF16",
        "HGMMA.64x128x16.F32.BF16",
        "HGMMA.64x192x16.F32.BF16",
        "HGMMA.64x224x16.F32.BF16",
        "HGMMA.64x256x16.F32.BF16",
        "UTMALDG.2D",
        "SYNCS",
    ] {
        assert!(tile.contains(needle), "mk_wgmma_tile SASS lacks {needle}");
    }
    let tma = sass_of(kernels::TMA_ROUNDTRIP.name);
    for needle in ["UTMALDG.2D", "UTMASTG.2D", "SYNCS"] {
        assert!(tma.contains(needle), "mk_tma_roundtrip SASS lacks {needle}");
    }
}

/// Kernel `k`'s wgmma k-loop in its SASS: from the line of the first `wgmma` instruction to the
/// loop's back edge.
fn mainloop_of<'a>(k: &str, sass: &'a str, wgmma: &str) -> &'a str {
    let at = sass.find(wgmma).unwrap_or_else(|| panic!("{k} has no {wgmma}"));
    let first = sass[..at].rfind('\n').map_or(0, |i| i + 1);
    &sass[first..first + loop_back_edge(&sass[first..]).unwrap_or_else(|| panic!("{k}: no k-loop"))]
}

/// Bytes of spill stores in a kernel's ptxas report (`u32::MAX` when it says none).
fn spilled_bytes(report: &str) -> u32 {
    report
        .split("bytes spill stores")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u32::MAX)
}

#[test]
fn gemm_sass_is_the_fast_path() {
    for k in ENGINE_KERNELS {
        let sass = sass_of(k);
        for needle in ["HGMMA.64x256x16.F32.BF16", "UTMALDG.2D", "UTMASTG.2D", "SYNCS.PHASECHK", "USETMAXREG"] {
            assert!(sass.contains(needle), "{k} SASS lacks {needle}");
        }
        assert!(!sass.contains("CALL"), "{k} makes calls (they serialise wgmma)");
        let report = ptxas_report(k);
        if k.starts_with("mk_ag_gemm") {
            // AllGather + GEMM's spread copies (the producer warpgroup's spare warps, at 56
            // registers) leave ptxas one word of predicates to keep in local memory: allowed,
            // never inside the wgmma k-loop.
            let mainloop = mainloop_of(k, &sass, "HGMMA.64x256x16.F32.BF16");
            assert!(!mainloop.contains("LDL") && !mainloop.contains("STL"), "{k}: local memory inside the mainloop");
            assert!(spilled_bytes(&report) <= 64, "{k} spills:\n{report}");
        } else {
            assert!(!sass.contains("LDL") && !sass.contains("STL"), "{k} uses local memory");
            assert!(report.contains("0 bytes spill stores, 0 bytes spill loads"), "{k} spills:\n{report}");
        }
        let log = &assembled().log;
        for line in log.lines().filter(|l| l.contains(&format!("'{k}'"))) {
            assert!(!line.contains("Performance Loss") && !line.contains("ignored"), "{k}: {line}");
        }
        // The four k16 products of a k-block go back to back, then at most one batch stays in
        // flight: a DEPBAR after every HGMMA would mean a serialised pipeline.
        let hgmma = sass.matches("HGMMA.64x256x16").count();
        let drain = sass.matches("WARPGROUP.DEPBAR.LE gsb0, 0x0").count();
        assert!(hgmma >= 4, "{k}: {hgmma} HGMMA");
        assert!(sass.contains("WARPGROUP.DEPBAR.LE gsb0, 0x1"), "{k}: no wgmma batch stays in flight");
        assert!(drain <= 2, "{k}: {drain} full drains of the wgmma pipeline (serialised?)");
    }
}

#[test]
fn moe_mainloops_stay_clean() {
    // The MoE kernels' router and pull code may spill a little (ptxas puts it outside the
    // tiles), but their grouped GEMM's wgmma k-loop must not touch local memory nor be
    // serialised, laid out or gathered.
    for k in [kernels::MOE_KN.name, kernels::MOE_NK.name, kernels::MOE_GATHER_KN.name, kernels::MOE_GATHER_NK.name] {
        let sass = sass_of(k);
        let mainloop = mainloop_of(k, &sass, "HGMMA.64x256x16.F32.BF16");
        assert!(mainloop.matches("HGMMA.64x256x16").count() >= 4, "{k}: the k-loop has no k-block of wgmmas");
        assert!(!mainloop.contains("LDL") && !mainloop.contains("STL"), "{k}: local memory inside the k-loop");
        assert!(sass.contains("WARPGROUP.DEPBAR.LE gsb0, 0x1"), "{k}: no wgmma batch stays in flight");
        for line in assembled().log.lines().filter(|l| l.contains(&format!("'{k}'"))) {
            assert!(!line.contains("Performance Loss") && !line.contains("ignored"), "{k}: {line}");
        }
    }
}

#[test]
fn comm_kernels_copy_with_tma_bulk_copies_and_no_multicast() {
    // The NVLink copies are TMA bulk copies (global -> shared -> peer global), never the NVLink
    // multicast our GPU machines forbid.
    for k in [kernels::ALLGATHER.name, kernels::AG_GEMM_KN.name, kernels::AG_GEMM_NK.name] {
        let sass = sass_of(k);
        assert!(sass.contains("UBLKCP.S.G") && sass.contains("UBLKCP.G.S"), "{k} SASS lacks bulk copies");
        // (AllGather + GEMM's one word of spilled predicates: `gemm_sass_is_the_fast_path`.)
        assert!(k.starts_with("mk_ag_gemm") || !sass.contains("LDL") && !sass.contains("STL"), "{k} uses local memory");
        assert!(!sass.contains("multimem") && !sass.contains("MULTIMEM"), "{k} uses NVLink multicast");
    }
    // The GEMM + ReduceScatter / AllReduce helpers move tiles with bulk copies too: stores
    // everywhere, loads where owners pull (the one-shot all-reduce only pushes).
    for k in GEMM_RS_KERNELS {
        let sass = sass_of(k);
        assert!(sass.contains("UBLKCP.G.S"), "{k} SASS lacks bulk stores");
        let pushes_only = k.contains("one_shot");
        assert!(pushes_only || sass.contains("UBLKCP.S.G"), "{k} SASS lacks bulk loads");
    }
    assert!(!kernels::PTX.contains("multimem"), "the module uses NVLink multicast (multimem)");
}

#[test]
fn summing_epilogues_keep_the_mainloop_clean() {
    // The fused reduce-scatter epilogue (the sum over sources) and the split-K one (the sum over
    // splits) hold more than the others: a few values set up before the tile loop may spill, but
    // the wgmma k-loop (first wgmma to its back edge) must not touch local memory nor be
    // serialised.
    // The deep-ring GEMMs (no staging tiles, stores from registers) in every tile width are held
    // to the same, each with the wgmma of its width.
    // The several-node GEMM + ReduceScatter / AllReduce walks a node-class order (its producer
    // thread, 40 registers, does that index math per tile) and holds more loop-invariant values
    // (where the node's collectors and node-partial slots are): those spill a little more before
    // and after the tile loop, never inside the k-loop.
    let wide = "HGMMA.64x256x16.F32.BF16";
    let (n224, n192, n128, n64) =
        ("HGMMA.64x224x16.F32.BF16", "HGMMA.64x192x16.F32.BF16", "HGMMA.64x128x16.F32.BF16", "HGMMA.64x64x16.F32.BF16");
    let kernels = [
        (kernels::GEMM_DEEP_KN.name, wide, 128),
        (kernels::GEMM_DEEP_NK.name, wide, 128),
        (kernels::GEMM_DEEP_N224_KN.name, n224, 128),
        (kernels::GEMM_DEEP_N224_NK.name, n224, 128),
        (kernels::GEMM_DEEP_N192_KN.name, n192, 128),
        (kernels::GEMM_DEEP_N192_NK.name, n192, 128),
        (kernels::GEMM_DEEP_N128_KN.name, n128, 128),
        (kernels::GEMM_DEEP_N128_NK.name, n128, 128),
        (kernels::GEMM_DEEP_N64_KN.name, n64, 128),
        (kernels::GEMM_DEEP_N64_NK.name, n64, 128),
        (kernels::GEMM_RS_KN.name, wide, 128),
        (kernels::GEMM_RS_NK.name, wide, 128),
        (kernels::GEMM_AR_ONE_SHOT_KN.name, wide, 128),
        (kernels::GEMM_AR_ONE_SHOT_NK.name, wide, 128),
        (kernels::GEMM_RS_NODES_KN.name, wide, 256),
        (kernels::GEMM_RS_NODES_NK.name, wide, 256),
        (kernels::GEMM_SPLITK_KN.name, wide, 128),
        (kernels::GEMM_SPLITK_NK.name, wide, 128),
        (kernels::GEMM_SPLITK_N224_KN.name, n224, 128),
        (kernels::GEMM_SPLITK_N224_NK.name, n224, 128),
        (kernels::GEMM_SPLITK_N192_KN.name, n192, 128),
        (kernels::GEMM_SPLITK_N192_NK.name, n192, 128),
        (kernels::GEMM_SPLITK_N128_KN.name, n128, 128),
        (kernels::GEMM_SPLITK_N128_NK.name, n128, 128),
        (kernels::GEMM_SPLITK_N64_KN.name, n64, 128),
        (kernels::GEMM_SPLITK_N64_NK.name, n64, 128),
        (kernels::GEMM_STREAMK_KN.name, wide, 128),
        (kernels::GEMM_STREAMK_NK.name, wide, 128),
    ];
    for (k, width, limit) in kernels {
        let sass = sass_of(k);
        // One width per kernel: a narrow kernel that also holds a wider wgmma is the wrong one.
        for other in [wide, n224, n192, n128, n64].into_iter().filter(|&o| o != width) {
            assert!(!sass.contains(other), "{k} holds {other} besides {width}");
        }
        assert!(sass.contains("WARPGROUP.DEPBAR.LE gsb0, 0x1"), "{k}: no wgmma batch stays in flight");
        let mainloop = mainloop_of(k, &sass, width);
        assert!(!mainloop.contains("LDL") && !mainloop.contains("STL"), "{k}: local memory inside the mainloop");
        let report = ptxas_report(k);
        let spilled = spilled_bytes(&report);
        assert!(spilled <= limit, "{k} spills {spilled} bytes:\n{report}");
        for line in assembled().log.lines().filter(|l| l.contains(&format!("'{k}'"))) {
            assert!(!line.contains("Performance Loss") && !line.contains("ignored"), "{k}: {line}");
        }
    }
    for k in [kernels::REDUCE_PULL.name, kernels::REDUCE_NODES.name] {
        let reduce = sass_of(k);
        assert!(!reduce.contains("LDL") && !reduce.contains("STL"), "{k} uses local memory");
    }
}

#[test]
fn fifo_push_claims_tickets_with_a_compare_and_swap() {
    // The device follows the host's ticket protocol: a ticket is taken only once its slot is free,
    // with a CAS on the head, never an unconditional add (which leaves a hole when a push times
    // out). Every kernel that pushes must show it.
    for k in [
        kernels::FIFO_PUSH_TEST.name,
        kernels::ALLGATHER.name,
        kernels::GEMM_RS_NODES_KN.name,
        kernels::GEMM_RS_NODES_NK.name,
        kernels::REDUCE_NODES.name,
    ] {
        let sass = sass_of(k);
        assert!(sass.contains("ATOMG.E.CAS.64") || sass.contains("ATOM.E.CAS.64"), "{k}: no 64-bit CAS in its SASS");
    }
    assert!(kernels::PTX.contains("atom.relaxed.gpu.cas.b64"), "no CAS on the FIFO head in the PTX");
}

#[test]
fn the_build_embeds_the_module_assembled_for_sm90a() {
    // This machine has ptxas (the tests above use it), so build.rs found one too and the host
    // loads a cubin, not 15-20 s of JIT: an sm_90a ELF holding every kernel.
    let cubin = kernels::CUBIN;
    if std::env::var("MKERNEL_PTXAS").is_ok_and(|v| v == "off") {
        assert!(cubin.is_empty(), "MKERNEL_PTXAS=off, yet a cubin was embedded");
        return;
    }
    let _ = tool("ptxas");
    assert!(!cubin.is_empty(), "no cubin embedded although ptxas is here (build.rs warnings say why)");
    assert!(kernels::CUBIN_PTXAS.starts_with("ptxas "), "assembler: {:?}", kernels::CUBIN_PTXAS);
    assert_eq!(&cubin[..4], b"\x7fELF", "the cubin is not an ELF image");
    let text = String::from_utf8_lossy(cubin);
    for k in kernels::ALL {
        assert!(text.contains(&format!("{k}\0")), "the cubin lacks {k}");
    }
    let dir = std::env::temp_dir().join(format!("mkernel-cubin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("embedded.cubin");
    std::fs::write(&path, cubin).unwrap();
    let out = Command::new(tool("cuobjdump")).arg("-lelf").arg("-arch=sm_90a").arg(&path).output().unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cuobjdump: {}", String::from_utf8_lossy(&out.stderr));
    assert!(listing.contains("sm_90a"), "not an sm_90a cubin: {listing}");
    let _ = std::fs::remove_dir_all(&dir);
}
