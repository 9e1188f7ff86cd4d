//! GPU checks of the device std's building blocks: each skips loudly without a Hopper GPU (and
//! fails instead with MKERNEL_REQUIRE_GPU=1). Random data, poisoned outputs.
use half::bf16;
use mkernel::abi::*;
use mkernel::gemm::{stage_tx_bytes, BLayout, Gemm, GemmOptions, GemmShape, Output};
use mkernel::gpu::ModuleSource;
use mkernel::gpu::{kernels, L2Promotion, LaunchConfig, Swizzle, Tile2d, TmaDtype};
use mkernel::testing::{gpu_or_skip, max_scaled_err, rel_err, Rng, POISON_BYTE};
use mkernel::tile::{swizzle128, wgmma_acc_coord};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn elementwise_axpy() {
    let Some(gpu) = gpu_or_skip("elementwise_axpy") else { return };
    let mut rng = Rng::fresh("elementwise_axpy");
    for n in [1usize, 1000, (1 << 20) + 3] {
        let x = rng.f32_vec(n);
        let y0 = rng.f32_vec(n);
        let a = rng.uniform() * 4.0;
        let (dx, dy) = (gpu.upload(&x).unwrap(), gpu.upload(&y0).unwrap());
        let p = AxpyParams { x: dx.addr(), y: dy.addr(), n: n as u64, a, _pad: 0 };
        // SAFETY: the parameters name buffers that live past the synchronisation below.
        unsafe { gpu.launch(kernels::AXPY, &LaunchConfig::linear(264, 256, 0), &p).unwrap() };
        gpu.synchronize_timeout(Duration::from_secs(30)).unwrap();
        let y = dy.to_vec().unwrap();
        for i in 0..n {
            let want = a.mul_add(x[i], y0[i]);
            assert!((y[i] - want).abs() <= 1e-6 * (1.0 + want.abs()), "n={n} i={i}: {} vs {want}", y[i]);
        }
    }
}

/// Element (row, col) of a `cols`-wide row-major bf16 matrix as raw bits.
fn at(v: &[bf16], cols: usize, r: usize, c: usize) -> u16 {
    v[r * cols + c].to_bits()
}

#[test]
fn tma_roundtrip_with_128b_swizzle() {
    let Some(gpu) = gpu_or_skip("tma_roundtrip_with_128b_swizzle") else { return };
    let mut rng = Rng::fresh("tma_roundtrip_with_128b_swizzle");
    let (w, h) = (200usize, 77usize); // awkward: boxes at the edge are partly outside
    let src: Vec<bf16> = rng.bf16_vec(w * h);
    let dsrc = gpu.upload(&src).unwrap();
    let dst = gpu.alloc::<bf16>(w * h).unwrap();
    let (bw, bh) = (64usize, 32usize);
    let box_bytes = (bw * bh * 2) as u32;
    let tile = |base| Tile2d {
        base,
        dtype: TmaDtype::Bf16,
        dims: [w as u64, h as u64],
        row_stride_bytes: 2 * w as u64,
        box_dims: [bw as u32, bh as u32],
        swizzle: Swizzle::B128,
        promotion: L2Promotion::B128,
    };
    let maps = gpu.upload_tensor_maps(&[tile(dsrc.addr()), tile(dst.addr())]).unwrap();
    let raw = gpu.alloc::<u32>(box_bytes as usize / 4).unwrap();
    // Load-only first, then load + store, so a failure says which half broke.
    for &(c0, c1, store) in &[(64usize, 0usize, 0u32), (64, 0, 1), (192, 64, 1), (0, 48, 1)] {
        dst.fill_bytes(POISON_BYTE).unwrap();
        raw.fill_bytes(POISON_BYTE).unwrap();
        println!("box at ({c0}, {c1}), store={store}");
        let p = TmaRoundTripParams {
            src_map: maps.addr(),
            dst_map: maps.addr() + 128,
            raw_out: raw.addr(),
            c0: c0 as i32,
            c1: c1 as i32,
            box_bytes,
            store,
        };
        // SAFETY: the parameters name buffers that live past the synchronisation below.
        unsafe { gpu.launch(kernels::TMA_ROUNDTRIP, &LaunchConfig::linear(1, 128, box_bytes + 1024), &p).unwrap() };
        gpu.synchronize_timeout(Duration::from_secs(10)).unwrap();
        let raw_bytes: Vec<u8> = bytemuck::cast_slice(&raw.to_vec().unwrap()).to_vec();
        let out = dst.to_vec().unwrap();
        for r in 0..bh {
            for c in 0..bw {
                let (gr, gc) = (c1 + r, c0 + c);
                let want = if gr < h && gc < w { at(&src, w, gr, gc) } else { 0 }; // OOB reads as zero
                let o = swizzle128(r as u32, 2 * c as u32) as usize;
                let got = u16::from_le_bytes([raw_bytes[o], raw_bytes[o + 1]]);
                assert_eq!(got, want, "box ({c0},{c1}): smem row {r} col {c} is not where the 128B swizzle puts it");
            }
        }
        for r in 0..h {
            for c in 0..w {
                let inside = store == 1 && (c1..c1 + bh).contains(&r) && (c0..c0 + bw).contains(&c);
                let want = if inside { at(&src, w, r, c) } else { 0xffff };
                assert_eq!(at(&out, w, r, c), want, "box ({c0},{c1}): dst ({r},{c}) (inside={inside})");
            }
        }
    }
}

fn wgmma_case(gpu: &mkernel::Gpu, rng: &mut Rng, n: usize, layout: u32) {
    let a: Vec<bf16> = rng.bf16_vec(64 * 64);
    let b: Vec<bf16> = rng.bf16_vec(64 * n); // KN: [64, n]; NK: [n, 64]
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let sw = |base, dims: [u64; 2], box_dims| Tile2d {
        base,
        dtype: TmaDtype::Bf16,
        dims,
        row_stride_bytes: 2 * dims[0],
        box_dims,
        swizzle: Swizzle::B128,
        promotion: L2Promotion::B128,
    };
    let b_tile = if layout == B_NK {
        sw(db.addr(), [64, n as u64], [64, n as u32])
    } else {
        sw(db.addr(), [n as u64, 64], [64, 64])
    };
    let maps = gpu.upload_tensor_maps(&[sw(da.addr(), [64, 64], [64, 64]), b_tile]).unwrap();
    let out = gpu.alloc::<f32>(64 * n).unwrap();
    out.fill_bytes(POISON_BYTE).unwrap();
    let p = WgmmaTileParams {
        a_map: maps.addr(),
        b_map: maps.addr() + 128,
        out: out.addr(),
        n: n as u32,
        b_layout: layout,
    };
    // A's 64 rows, B as the GEMM stages it (whole 64-column boxes for [K, N]), the barrier.
    let smem = stage_tx_bytes(64, n as u32, true) + 1024;
    // SAFETY: the parameters name buffers that live past the synchronisation below.
    unsafe { gpu.launch(kernels::WGMMA_TILE, &LaunchConfig::linear(1, 128, smem), &p).unwrap() };
    gpu.synchronize_timeout(Duration::from_secs(30)).unwrap();
    let got: Vec<f64> = out.to_vec().unwrap().iter().map(|&x| x as f64).collect();
    let mut want = vec![0f64; 64 * n];
    for i in 0..64 {
        for j in 0..n {
            want[i * n + j] = (0..64)
                .map(|kk| {
                    let bv = if layout == B_NK { b[j * 64 + kk] } else { b[kk * n + j] };
                    a[i * 64 + kk].to_f64() * bv.to_f64()
                })
                .sum();
        }
    }
    let (re, me) = (rel_err(&got, &want), max_scaled_err(&got, &want, 1e-2));
    let name = if layout == B_NK { "NK" } else { "KN" };
    assert!(re < 1e-5 && me < 1e-4, "wgmma m64n{n}k16 x4, B {name}: rel err {re:.2e}, max scaled err {me:.2e}");
    println!("wgmma m64n{n}k16 x4, B {name}: rel err {re:.2e}");
}

#[test]
fn wgmma_tile_products() {
    let Some(gpu) = gpu_or_skip("wgmma_tile_products") else { return };
    let mut rng = Rng::fresh("wgmma_tile_products");
    // 224 columns: a [K, N] B ends in half a swizzle atom (its last box half past the matrix).
    for n in [64, 128, 192, 224, 256] {
        for layout in [B_NK, B_KN] {
            wgmma_case(&gpu, &mut rng, n, layout);
        }
    }
}

#[test]
fn wgmma_accumulator_layout_matches_tile_math() {
    // The host-side description of the fragment layout is what the epilogue uses; keep it honest.
    let (r, c) = wgmma_acc_coord(37, 6);
    assert_eq!((r, c), (16 + 1 + 8, 8 + 2));
}

#[test]
fn host_gpu_flag_handshake() {
    let Some(gpu) = gpu_or_skip("host_gpu_flag_handshake") else { return };
    let mut rng = Rng::fresh("host_gpu_flag_handshake");
    let (iters, words) = (2000u32, 16u32);
    let seed = rng.next_u32();
    let base_epoch = rng.next_u32(); // epochs wrap: start anywhere
    let data = gpu.mapped::<u32>(words as usize + 1).unwrap();
    let flags = gpu.mapped::<u32>(2).unwrap();
    flags.atomic(0).store(base_epoch, Ordering::Relaxed);
    flags.atomic(1).store(base_epoch, Ordering::Relaxed);
    let diag = mkernel::DiagBuffers::new(&gpu, Duration::from_secs(5)).unwrap();
    let out = gpu.alloc::<u32>(iters as usize).unwrap();
    out.fill_bytes(POISON_BYTE).unwrap();
    let p = HandshakeParams {
        host_data: data.device_addr(),
        host_flags: flags.device_addr(),
        out: out.addr(),
        diag: diag.abi(),
        timeout_ns: 5_000_000_000,
        iters,
        words,
        base_epoch,
        seed,
    };
    // SAFETY: the parameters name buffers that live past the synchronisation below.
    unsafe { gpu.launch(kernels::FLAG_HANDSHAKE, &LaunchConfig::linear(1, 32, 0), &p).unwrap() };
    let mut replies = Vec::new();
    let started = Instant::now();
    for i in 0..iters {
        let epoch = base_epoch.wrapping_add(i + 1);
        while flags.atomic(0).load(Ordering::Acquire) != epoch {
            assert!(started.elapsed() < Duration::from_secs(20), "round {i}: GPU never published epoch {epoch}");
            std::hint::spin_loop();
        }
        let mut reply = epoch;
        for w in 0..words {
            let v = data.read(w as usize);
            assert_eq!(v, handshake_word(seed, epoch, w), "round {i} word {w}: torn or stale payload");
            reply = reply.rotate_left(5) ^ v;
        }
        data.write(words as usize, reply);
        flags.atomic(1).store(epoch, Ordering::Release);
        replies.push(reply);
    }
    gpu.synchronize_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(diag.record().status, DIAG_OK);
    assert_eq!(out.to_vec().unwrap(), replies, "GPU read a reply before the host's release store");
    println!(
        "{iters} round trips in {:?} ({:.2} us each)",
        started.elapsed(),
        started.elapsed().as_secs_f64() * 1e6 / iters as f64
    );
}

#[test]
fn bounded_wait_reports_instead_of_hanging() {
    let Some(gpu) = gpu_or_skip("bounded_wait_reports_instead_of_hanging") else { return };
    let data = gpu.mapped::<u32>(2).unwrap();
    let flags = gpu.mapped::<u32>(2).unwrap();
    let diag = mkernel::DiagBuffers::new(&gpu, Duration::from_secs(5)).unwrap();
    let out = gpu.alloc::<u32>(1).unwrap();
    let p = HandshakeParams {
        host_data: data.device_addr(),
        host_flags: flags.device_addr(),
        out: out.addr(),
        diag: diag.abi(),
        timeout_ns: 50_000_000,
        iters: 1,
        words: 1,
        base_epoch: 7,
        seed: 1,
    };
    let started = Instant::now();
    // SAFETY: the parameters name buffers that live past the synchronisation below.
    unsafe { gpu.launch(kernels::FLAG_HANDSHAKE, &LaunchConfig::linear(1, 32, 0), &p).unwrap() };
    gpu.synchronize_timeout(Duration::from_secs(30)).unwrap(); // the host never answers: the kernel must end by itself
    let d = diag.record();
    assert_eq!(d.status, DIAG_TIMED_OUT);
    assert_eq!((d.what, d.expected, d.seen), (WAIT_FLAG, 8, 0));
    assert_eq!(d.flag_addr, flags.device_addr() + 4, "the report must name the flag waited on");
    assert!(d.waited_ns >= 50_000_000, "gave up after {} ns, before its 50 ms bound", d.waited_ns);
    assert!(started.elapsed() < Duration::from_secs(5));
    println!("{}", mkernel::WaitReport(d));
}

#[test]
fn cluster_launch_ids() {
    let Some(gpu) = gpu_or_skip("cluster_launch_ids") else { return };
    let out = gpu.alloc::<u32>(8).unwrap();
    out.fill_bytes(POISON_BYTE).unwrap();
    let cfg = LaunchConfig { grid: [8, 1, 1], block: [64, 1, 1], smem_bytes: 0, cluster: Some([2, 1, 1]) };
    // SAFETY: the parameters name buffers that live past the synchronisation below.
    unsafe { gpu.launch(kernels::CLUSTER_IDS, &cfg, &ClusterIdsParams { out: out.addr() }).unwrap() };
    gpu.synchronize_timeout(Duration::from_secs(30)).unwrap();
    let got = out.to_vec().unwrap();
    for (b, v) in got.iter().enumerate() {
        assert_eq!((v & 0xff, (v >> 8) & 0xff, v >> 16), (b as u32 % 2, 2, b as u32 / 2), "block {b}");
    }
}

/// A device trap poisons the process's CUDA context, so the fault runs in a child process: this
/// test binary again, with only [`trap_child`] selected. The child asserts the host side of the
/// fault (an error from the next wait, errors from later calls, no panic in any `Drop`) and
/// prints a line this test looks for.
#[test]
fn device_trap_is_an_error_not_a_panic() {
    if gpu_or_skip("device_trap_is_an_error_not_a_panic").is_none() {
        return;
    }
    println!("{}", child_verdict("trap_child", "MKERNEL_TRAP_CHILD"));
}

/// Run this test binary again with only the ignored test `child` selected and `env` set (a fault
/// that spoils the process's CUDA state runs there); the child's `{child} ok` line, or a panic
/// with its output when it failed or printed none.
fn child_verdict(child: &str, env: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", child, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{child} failed:\n{text}");
    // The harness prints `test {child} ... ` on the same line before the child's own output.
    let ok = format!("{child} ok");
    let line = text.lines().find_map(|l| l.find(&ok).map(|i| l[i..].to_string()));
    line.unwrap_or_else(|| panic!("no verdict from {child}:\n{text}"))
}

#[test]
#[ignore = "run by device_trap_is_an_error_not_a_panic in a child process"]
fn trap_child() {
    if std::env::var_os("MKERNEL_TRAP_CHILD").is_none() {
        return;
    }
    let gpu = mkernel::Gpu::new(0).unwrap();
    let buf = gpu.upload(&[1f32; 1024]).unwrap();
    let p = AxpyParams { x: buf.addr(), y: buf.addr(), n: 1024, a: 1.0, _pad: 0 };
    // SAFETY: the kernel reads nothing; it traps.
    unsafe { gpu.launch(kernels::TRAP, &LaunchConfig::linear(1, 32, 0), &p).unwrap() };
    let sync = gpu.synchronize_timeout(Duration::from_secs(30));
    let e = sync.expect_err("a trapped kernel must make the wait fail");
    // The context is dead now: later calls fail with an error too, never hang or panic.
    let later = buf.to_vec().expect_err("a read after the trap must fail");
    let alloc = gpu.alloc::<f32>(16).err();
    drop(buf); // the free fails; Drop records it instead of panicking
    let drops = mkernel::gpu::take_drop_errors();
    drop(gpu);
    println!("trap_child ok: wait -> {e}; read after -> {later}; alloc after -> {alloc:?}; drops -> {drops:?}");
}

/// A kernel stuck where no wait is bounded (here: the handshake with a 60 s device bound and a
/// host that never answers) must make the host's bounded wait give up, both with nothing
/// reported and after another kernel's bounded wait reported, and the process must still be able
/// to free (leak) its memory and exit. In a child process: a stuck kernel makes the whole process
/// leak from then on.
#[test]
fn stuck_kernel_is_an_error_not_a_hang() {
    if gpu_or_skip("stuck_kernel_is_an_error_not_a_hang").is_none() {
        return;
    }
    println!("{}", child_verdict("stuck_child", "MKERNEL_STUCK_CHILD"));
}

/// One handshake round's buffers (all allocated before anything launches: an allocation or
/// upload could wait behind a stuck kernel).
struct Handshake {
    data: mkernel::gpu::MappedBuffer<u32>,
    flags: mkernel::gpu::MappedBuffer<u32>,
    out: mkernel::gpu::DeviceBuffer<u32>,
    diag: mkernel::DiagBuffers,
}

impl Handshake {
    fn new(gpu: &mkernel::Gpu, timeout: Duration) -> Self {
        let h = Handshake {
            data: gpu.mapped::<u32>(2).unwrap(),
            flags: gpu.mapped::<u32>(2).unwrap(),
            out: gpu.alloc::<u32>(1).unwrap(),
            diag: mkernel::DiagBuffers::new(gpu, timeout).unwrap(),
        };
        h.flags.atomic(0).store(0, Ordering::Relaxed);
        h.flags.atomic(1).store(0, Ordering::Relaxed);
        h
    }

    /// One round (epoch 8) on `gpu`'s stream; its device wait gives up after the timeout.
    fn launch(&self, gpu: &mkernel::Gpu, timeout: Duration) {
        let p = HandshakeParams {
            host_data: self.data.device_addr(),
            host_flags: self.flags.device_addr(),
            out: self.out.addr(),
            diag: self.diag.abi(),
            timeout_ns: timeout.as_nanos() as u64,
            iters: 1,
            words: 1,
            base_epoch: 7,
            seed: 1,
        };
        // SAFETY: the buffers live in `self`, which the caller keeps until the kernel ended (or
        // leaks once the stream is stuck).
        unsafe { gpu.launch(kernels::FLAG_HANDSHAKE, &LaunchConfig::linear(1, 32, 0), &p).unwrap() };
    }
}

#[test]
#[ignore = "run by stuck_kernel_is_an_error_not_a_hang in a child process"]
fn stuck_child() {
    use mkernel::gpu::{GpuError, StreamBound};
    if std::env::var_os("MKERNEL_STUCK_CHILD").is_none() {
        return;
    }
    let (a, b) = (mkernel::Gpu::new(0).unwrap(), mkernel::Gpu::new(0).unwrap());
    let (long, short) = (Duration::from_secs(60), Duration::from_millis(20));
    let (ha, hb) = (Handshake::new(&a, long), Handshake::new(&b, short));
    let quick = Duration::from_millis(300);
    // 1. Nothing reports: the bound is one launch's allowance.
    ha.launch(&a, long);
    let started = Instant::now();
    let e = a.synchronize_bounded(StreamBound { per_launch: quick, after_report: quick }, || false).unwrap_err();
    let first = started.elapsed();
    assert!(
        matches!(e, GpuError::KernelStuck { pending: 1, after_report: None, .. }),
        "want KernelStuck with one launch and no report, got {e}"
    );
    assert!(first >= quick && first < Duration::from_secs(5), "gave up after {first:?}");
    // A synchronous copy now would wait behind the stuck kernel: refused at once instead.
    let t = Instant::now();
    let e = ha.out.to_vec().unwrap_err();
    assert!(matches!(e, GpuError::Stuck { call: "cuMemcpyDtoH" }) && t.elapsed() < Duration::from_secs(1), "{e}");
    // 2. Another kernel's bounded wait reports (stream b, 20 ms): the op-level wait on stream a
    // gives up `after_report` later, with that report, although a's kernel waits 60 s.
    hb.launch(&b, short);
    let started = Instant::now();
    let e = hb.diag.wait(&a, "selftest", || Ok(())).unwrap_err();
    let second = started.elapsed();
    let mkernel::Error::KernelStuck { op: "selftest", stuck, report: Some(report) } = &e else {
        panic!("want KernelStuck with a report, got {e}")
    };
    assert!(matches!(**report, mkernel::Error::DeviceTimeout(_)), "the report: {report}");
    assert!(matches!(stuck, GpuError::KernelStuck { after_report: Some(_), .. }), "{stuck}");
    let after = mkernel::gpu::RUN_ALLOWANCE + short;
    assert!(second >= after && second < after + Duration::from_secs(5), "gave up after {second:?}");
    // Answer the stuck handshake: both streams drain, a's wait never reported.
    ha.flags.atomic(1).store(8, Ordering::Release);
    a.synchronize_timeout(Duration::from_secs(30)).unwrap();
    b.synchronize_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(ha.diag.record().status, DIAG_OK, "the answered wait must not report");
    assert_eq!(hb.flags.read(0), 8, "b's kernel published its round before giving up");
    let leaked_before = mkernel::gpu::leaked_frees();
    drop(ha); // frees after a stuck stream leak instead of blocking behind it
    let leaked = mkernel::gpu::leaked_frees() - leaked_before;
    assert!(leaked >= 3, "the frees after KernelStuck must be leaked, {leaked} were");
    println!("stuck_child ok: no report -> {first:?}; after a report -> {second:?}: {e}");
}

/// The bits of a GEMM (300 x 520 x 1000, B `[n,k]`, bf16 out) over data from `seed`, as one
/// checksum line.
fn gemm_bits(gpu: &mkernel::Gpu, seed: u64) -> String {
    let shape = GemmShape { m: 300, n: 520, k: 1000 };
    let mut rng = Rng::new(seed);
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    c.fill_bytes(POISON_BYTE).unwrap();
    let g = Gemm::new(gpu, shape, BLayout::NK, &a, &b, Output::Bf16(&c), GemmOptions::default()).unwrap();
    g.run(gpu).unwrap();
    let h = c
        .to_vec()
        .unwrap()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ x.to_bits() as u64).wrapping_mul(0x100_0000_01b3));
    format!("gemm bits {h:016x}")
}

/// The module comes from the cubin build.rs assembled (where it had ptxas), and the PTX the
/// driver JIT-compiles (`MKERNEL_JIT=1`, in a child process: a process loads the module once)
/// computes the same bits.
#[test]
fn cubin_and_jit_modules_compute_the_same_bits() {
    let Some(gpu) = gpu_or_skip("cubin_and_jit_modules_compute_the_same_bits") else { return };
    let source = &gpu.info().module_source;
    println!("module: {source}, loaded in {:?}", gpu.info().module_load);
    if kernels::CUBIN.is_empty() {
        assert!(matches!(source, ModuleSource::Jit { .. }), "no cubin embedded, yet {source}");
    } else if std::env::var("MKERNEL_JIT").is_err() {
        assert_eq!(*source, ModuleSource::Cubin, "the driver did not take the embedded cubin");
    }
    let seed = Rng::fresh("cubin_and_jit_modules_compute_the_same_bits").next_u64();
    let mine = gemm_bits(&gpu, seed);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "jit_child", "--nocapture", "--test-threads=1"])
        .env("MKERNEL_JIT", "1")
        .env("MKERNEL_JIT_CHILD_SEED", seed.to_string())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child failed:\n{text}");
    let theirs = text
        .lines()
        .find_map(|l| l.find("gemm bits").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no verdict:\n{text}"));
    assert_eq!(theirs.trim(), mine, "the JIT-compiled module computed other bits than the {source} one");
    println!("{mine} from both modules");
}

#[test]
#[ignore = "run by cubin_and_jit_modules_compute_the_same_bits in a child process"]
fn jit_child() {
    let Some(seed) = std::env::var("MKERNEL_JIT_CHILD_SEED").ok().and_then(|s| s.parse().ok()) else { return };
    let gpu = mkernel::Gpu::new(0).unwrap();
    let source = &gpu.info().module_source;
    assert_eq!(*source, ModuleSource::Jit { why: "MKERNEL_JIT=1".into() });
    println!("child module: {source}, loaded in {:?}", gpu.info().module_load);
    println!("{}", gemm_bits(&gpu, seed));
}
