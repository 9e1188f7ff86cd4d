//! NIC (rail) choice from a sysfs fixture of a two-socket node (tests/fixtures/sysfs-2socket).
use mkernel::comm::transport::verbs::rails::{self, Affinity};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-2socket")
}

fn chosen(bus_id: &str, max: usize) -> Vec<(String, Affinity)> {
    rails::for_gpu(&fixture(), Some(bus_id), max).into_iter().map(|r| (r.name, r.affinity)).collect()
}

#[test]
fn the_fixture_lists_every_nic_with_its_numa_node() {
    let nics = rails::nics(&fixture());
    let got: Vec<(&str, i32, usize)> =
        nics.iter().map(|n| (n.name.as_str(), n.place.numa, n.place.path.len())).collect();
    assert_eq!(got, [("rdmap0", 0, 4), ("rdmap1", 0, 4), ("rdmap2", 1, 4), ("rdmap3", 0, 2)]);
}

#[test]
fn a_gpu_behind_a_switch_stripes_over_the_nics_of_that_switch() {
    use Affinity::SharedSwitch;
    assert_eq!(chosen("0000:03:00.0", 4), [("rdmap0".into(), SharedSwitch), ("rdmap1".into(), SharedSwitch)]);
    assert_eq!(chosen("0000:03:00.0", 1), [("rdmap0".into(), SharedSwitch)], "max_rails caps the stripe");
    assert_eq!(chosen("0000:83:00.0", 4), [("rdmap2".into(), SharedSwitch)]);
}

#[test]
fn a_gpu_sharing_no_switch_takes_the_nics_of_its_numa_node() {
    use Affinity::SameNuma;
    let numa0 = chosen("0000:06:00.0", 4);
    assert_eq!(numa0, [("rdmap0".into(), SameNuma), ("rdmap1".into(), SameNuma), ("rdmap3".into(), SameNuma)]);
    assert_eq!(chosen("0000:86:00.0", 4), [("rdmap2".into(), SameNuma)], "NUMA 1 GPU -> the NUMA 1 NIC");
}

#[test]
fn an_unknown_gpu_still_gets_a_nic() {
    let r = chosen("0000:99:00.0", 1);
    assert_eq!(r, [("rdmap0".into(), Affinity::Remote)]);
    assert!(rails::for_gpu(&fixture().join("nowhere"), Some("0000:03:00.0"), 4).is_empty());
}
