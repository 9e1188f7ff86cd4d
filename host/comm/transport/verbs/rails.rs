//! Which NIC(s) a GPU uses: the rails. Read from sysfs (the root is a parameter, so a fixture
//! directory drives the tests): each RDMA device's PCI path and NUMA node
//! (`class/infiniband/*/device`), and the GPU's (`bus/pci/devices/<bus id>`).
//!
//! Preference, best first: a NIC behind the same PCIe switch (the GPU's and the NIC's PCI paths
//! share a bridge, so traffic stays off the CPU's root complex), then a NIC on the same NUMA
//! node, then any NIC. A rank stripes over every NIC of the best class found (p5: the four EFA
//! NICs of a GPU's switch), at most `max_rails`; ties go by PCI distance, then name. A list of
//! names given by the user overrides the choice.
use crate::comm::error::{CommError, CommResult};
use std::path::{Path, PathBuf};

/// Where a PCI device sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciPlace {
    /// PCI addresses from the root port down to the device itself (`0000:00:01.0`, ...).
    pub path: Vec<String>,
    /// Its NUMA node (-1: unknown).
    pub numa: i32,
}

/// An RDMA device and where it sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicPlace {
    /// Its verbs name (`mlx5_0`, `rdmap79s0`).
    pub name: String,
    /// Its PCI place.
    pub place: PciPlace,
}

/// How close a NIC is to a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Affinity {
    /// Behind the same PCIe switch (or root port) as the GPU.
    SharedSwitch,
    /// On the GPU's NUMA node.
    SameNuma,
    /// Elsewhere.
    Remote,
    /// Named by the user.
    Named,
}

/// One chosen NIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rail {
    /// The NIC's name.
    pub name: String,
    /// Why it was chosen.
    pub affinity: Affinity,
}

impl std::fmt::Display for Rail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match self.affinity {
            Affinity::SharedSwitch => "same PCIe switch",
            Affinity::SameNuma => "same NUMA node",
            Affinity::Remote => "other NUMA node",
            Affinity::Named => "named",
        };
        write!(f, "{} ({why})", self.name)
    }
}

fn is_bdf(s: &str) -> bool {
    // dddd:bb:dd.f
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

fn place_of(dev: &Path) -> Option<PciPlace> {
    let real = std::fs::canonicalize(dev).ok()?;
    let path: Vec<String> =
        real.components().filter_map(|c| c.as_os_str().to_str()).filter(|s| is_bdf(s)).map(str::to_string).collect();
    if path.is_empty() {
        return None;
    }
    let numa = std::fs::read_to_string(real.join("numa_node")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(-1);
    Some(PciPlace { path, numa })
}

/// The RDMA devices under `sysfs` (normally `/sys`) with their places, by name.
pub fn nics(sysfs: &Path) -> Vec<NicPlace> {
    let Ok(dir) = std::fs::read_dir(sysfs.join("class/infiniband")) else { return Vec::new() };
    let mut out: Vec<NicPlace> = dir
        .flatten()
        .filter_map(|e| {
            let place = place_of(&e.path().join("device"))?;
            Some(NicPlace { name: e.file_name().to_string_lossy().into_owned(), place })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The place of the PCI device `bus_id` (as CUDA prints it, any case) under `sysfs`.
pub fn pci_place(sysfs: &Path, bus_id: &str) -> Option<PciPlace> {
    place_of(&sysfs.join("bus/pci/devices").join(bus_id.to_ascii_lowercase()))
}

fn affinity(gpu: &PciPlace, nic: &PciPlace) -> (Affinity, usize) {
    let shared = gpu.path.iter().zip(&nic.path).take_while(|(a, b)| a == b).count();
    let a = if shared > 0 {
        Affinity::SharedSwitch
    } else if gpu.numa >= 0 && gpu.numa == nic.numa {
        Affinity::SameNuma
    } else {
        Affinity::Remote
    };
    (a, shared)
}

/// The rails of a GPU at `gpu` among `nics`: every NIC of the best affinity class, closest
/// first, at most `max_rails` (at least 1). Empty only when there are no NICs.
pub fn choose(gpu: Option<&PciPlace>, nics: &[NicPlace], max_rails: usize) -> Vec<Rail> {
    let unknown = PciPlace { path: Vec::new(), numa: -1 };
    let gpu = gpu.unwrap_or(&unknown);
    let mut ranked: Vec<(Affinity, std::cmp::Reverse<usize>, &str)> = nics
        .iter()
        .map(|n| {
            let (a, shared) = affinity(gpu, &n.place);
            (a, std::cmp::Reverse(shared), n.name.as_str())
        })
        .collect();
    ranked.sort();
    let Some(best) = ranked.first().map(|r| r.0) else { return Vec::new() };
    ranked
        .into_iter()
        .filter(|r| r.0 == best)
        .take(max_rails.max(1))
        .map(|(affinity, _, name)| Rail { name: name.to_string(), affinity })
        .collect()
}

/// `names` (a comma-separated override), each checked against the devices present.
pub fn named(names: &str, present: &[String]) -> CommResult<Vec<Rail>> {
    let rails: Vec<Rail> = names
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|n| Rail { name: n.to_string(), affinity: Affinity::Named })
        .collect();
    if rails.is_empty() {
        return Err(CommError::InvalidArgument { arg: "device", rule: format!("`{names}` names no RDMA device") });
    }
    if let Some(r) = rails.iter().find(|r| !present.contains(&r.name)) {
        let rule = format!("RDMA device `{}` not found; present: {}", r.name, present.join(", "));
        return Err(CommError::InvalidArgument { arg: "device", rule });
    }
    Ok(rails)
}

/// The system's sysfs root.
pub fn sysfs() -> PathBuf {
    PathBuf::from("/sys")
}

/// The rails for the GPU with PCI `bus_id` on this machine (or the fixture at `sysfs`).
pub fn for_gpu(sysfs: &Path, bus_id: Option<&str>, max_rails: usize) -> Vec<Rail> {
    let gpu = bus_id.and_then(|b| pci_place(sysfs, b));
    choose(gpu.as_ref(), &nics(sysfs), max_rails)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(path: &[&str], numa: i32) -> PciPlace {
        PciPlace { path: path.iter().map(|s| s.to_string()).collect(), numa }
    }
    fn nic(name: &str, path: &[&str], numa: i32) -> NicPlace {
        NicPlace { name: name.into(), place: place(path, numa) }
    }

    #[test]
    fn switch_beats_numa_beats_remote_and_striping_takes_the_best_class() {
        let gpu = place(&["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"], 0);
        let nics = [
            nic("far", &["0000:80:01.0", "0000:81:00.0"], 1),
            nic("numa", &["0000:00:03.0", "0000:07:00.0"], 0),
            nic("sw_b", &["0000:00:01.0", "0000:01:00.0", "0000:02:02.0", "0000:05:00.0"], 0),
            nic("sw_a", &["0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0"], 0),
        ];
        let names = |r: Vec<Rail>| r.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(choose(Some(&gpu), &nics, 4)), ["sw_a", "sw_b"]);
        assert_eq!(names(choose(Some(&gpu), &nics, 1)), ["sw_a"]);
        assert_eq!(names(choose(Some(&gpu), &nics[..2], 4)), ["numa"]);
        assert_eq!(choose(Some(&gpu), &nics[..1], 4)[0].affinity, Affinity::Remote);
        assert_eq!(names(choose(None, &nics, 1)), ["far"], "unknown GPU: all remote, by name");
        assert!(choose(Some(&gpu), &[], 4).is_empty());
    }

    #[test]
    fn a_named_override_is_checked() {
        let present = ["mlx5_0".to_string(), "mlx5_1".to_string()];
        assert_eq!(named("mlx5_1, mlx5_0", &present).unwrap().len(), 2);
        let e = named("mlx5_9", &present).unwrap_err().to_string();
        assert!(e.contains("`device`") && e.contains("mlx5_9") && e.contains("present: mlx5_0, mlx5_1"), "{e}");
        assert!(named(" , ", &present).is_err());
    }
}
