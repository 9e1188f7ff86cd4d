//! The examples run (so they never rot): each as a world of one, on the GPU where there is one,
//! else it must say loudly that it skipped.
use std::path::PathBuf;
use std::process::Command;

/// An example's binary: built by `cargo test` into `target/<profile>/examples/`, or staged beside
/// this test binary as `example-<name>` on GPU machines.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("test binary folder");
    let candidates = [dir.join(format!("example-{name}")), dir.join("..").join("examples").join(name)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("example `{name}` not built: {candidates:?}"))
}

fn run(name: &str) {
    let out = Command::new(example(name)).env_remove("RANK").output().expect("run the example");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "example {name} failed ({}):\n{text}", out.status);
    let skipped = text.contains("skipped: no CUDA device");
    if mkernel::testing::gpu_required() {
        assert!(!skipped, "example {name} skipped although MKERNEL_REQUIRE_GPU=1:\n{text}");
    }
    // Forward the skip line (past the harness's capture) so totals count it as a skip, not a pass.
    if let Some(line) = text.lines().find(|l| l.contains("skipped: no CUDA device")) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

#[test]
fn example_gemm() {
    run("gemm");
}

#[test]
fn example_allgather() {
    run("allgather");
}

#[test]
fn example_ag_gemm() {
    run("ag_gemm");
}
