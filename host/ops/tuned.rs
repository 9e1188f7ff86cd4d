//! Per-shape defaults of the fused ops: the tables `mkernel tune <op>` measured on our machines
//! (embedded JSON lines, `host/ops/tuned/*.jsonl`), and the rules of thumb used where no
//! measured shape is near.
//!
//! A table entry applies to the same op, world size and node count, at the measured shape
//! nearest to the asked one if it is closer than a factor of two in every dimension; of lines
//! equally near, the last one (the newest measurement) wins.
use super::gemm_rs::Collective;
use super::Path;
use crate::comm::world::World;
use crate::gemm::GemmShape;
use serde::Deserialize;
use std::sync::OnceLock;

/// A measured AllGather + GEMM choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgGemmEntry {
    /// NVLink push CTAs.
    pub push_ctas: u32,
    /// Rows per arrival flag.
    pub chunk_rows: u32,
    /// The faster path at that shape.
    pub path: Path,
}

/// Where a GEMM-shaped table line was measured: the op, world size, node count, shape and,
/// across nodes, the transport (such a line applies over that transport only).
#[derive(Deserialize)]
struct GemmAt {
    op: String,
    world: u32,
    nodes: u32,
    m: usize,
    n: usize,
    k: usize,
    #[serde(default)]
    transport: Option<String>,
}

/// A line of a GEMM-shaped table.
trait Measured {
    /// Where it was measured.
    fn at(&self) -> &GemmAt;
}

/// A table line's `path`.
fn path_of(name: &str) -> Path {
    if name == "unfused" {
        Path::Unfused
    } else {
        Path::Fused
    }
}

#[derive(Deserialize)]
struct Line {
    #[serde(flatten)]
    at: GemmAt,
    push_ctas: u32,
    chunk_rows: u32,
    path: String,
}

impl Measured for Line {
    fn at(&self) -> &GemmAt {
        &self.at
    }
}

const AG_GEMM_TABLE: &str = include_str!("tuned/ag_gemm.jsonl");

fn ag_gemm_table() -> &'static [(Line, AgGemmEntry)] {
    static T: OnceLock<Vec<(Line, AgGemmEntry)>> = OnceLock::new();
    T.get_or_init(|| parse(AG_GEMM_TABLE))
}

/// Lines of a table; malformed lines are skipped (a unit test keeps the embedded one clean).
fn parse(text: &str) -> Vec<(Line, AgGemmEntry)> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .filter(|l| l.at.op == "ag_gemm")
        .map(|l| {
            let e = AgGemmEntry { push_ctas: l.push_ctas, chunk_rows: l.chunk_rows, path: path_of(&l.path) };
            (l, e)
        })
        .collect()
}

fn distance(a: GemmShape, m: usize, n: usize, k: usize) -> f64 {
    let d = |x: usize, y: usize| ((x.max(1) as f64) / (y.max(1) as f64)).ln().abs();
    d(a.m, m).max(d(a.n, n)).max(d(a.k, k))
}

/// The entry of `table` measured on `world`'s size and node count nearest to `shape`, if closer
/// than a factor of two in every dimension (4096^3's split, a quarter of the tiles, says nothing
/// about 8192^3's waves). Lines measured over a transport apply over that transport only
/// (`transport`: this communicator's, or None to take none of them).
fn nearest<L: Measured, E: Copy>(
    table: &[(L, E)],
    shape: GemmShape,
    world: &World,
    transport: Option<&str>,
) -> Option<E> {
    table
        .iter()
        .rev()
        .filter(|(l, _)| {
            let a = l.at();
            a.world == world.world_size
                && a.nodes == world.nodes
                && a.transport.as_deref().is_none_or(|t| Some(t) == transport)
        })
        .map(|(l, e)| (distance(shape, l.at().m, l.at().n, l.at().k), *e))
        .filter(|(d, _)| *d < std::f64::consts::LN_2 - 1e-9)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| e)
}

/// The measured choice for the nearest AllGather + GEMM shape on this world, if any; entries
/// measured over a transport apply over that transport only (`transport`: this communicator's,
/// or None to take none of them).
pub fn ag_gemm(shape: GemmShape, world: &World, transport: Option<&str>) -> Option<AgGemmEntry> {
    nearest(ag_gemm_table(), shape, world, transport)
}

/// Most push CTAs the per-shape default gives.
pub const AG_GEMM_MAX_PUSH_CTAS: u32 = 16;

/// Rule of thumb for the push CTAs a shape needs: enough copy CTAs (about
/// [`AG_GEMM_PUSH_RATE`] each, measured 40-45 GB/s) to deliver the shard to this node's peers,
/// and into this rank's own gathered buffer when they make that copy (`local_copy`: not in
/// place, and not left to the compute tiles), within 80% of the GEMM's own time (about
/// [`AG_GEMM_RATE`]), so compute never waits; between 1 and [`AG_GEMM_MAX_PUSH_CTAS`].
pub fn ag_gemm_push_ctas(shape: GemmShape, world: &World, local_copy: bool) -> u32 {
    let gemm_s = shape.flops() / AG_GEMM_RATE;
    let ctas = ag_gemm_push_seconds(shape, world, local_copy, 1) / (0.8 * gemm_s);
    (ctas.ceil() as u32).clamp(1, AG_GEMM_MAX_PUSH_CTAS)
}

/// Bytes per second one push CTA is counted on for (measured 40-45 GB/s on H200).
pub const AG_GEMM_PUSH_RATE: f64 = 30e9;
/// FLOP/s the GEMM is counted on for.
pub const AG_GEMM_RATE: f64 = 650e12;

/// Seconds `push_ctas` push CTAs take, by the rule of thumb's rate, to deliver the shard to this
/// node's peers (and into this rank's own gathered buffer with `local_copy`); 0 with nothing to
/// copy.
pub fn ag_gemm_push_seconds(shape: GemmShape, world: &World, local_copy: bool, push_ctas: u32) -> f64 {
    let copies = world.local_world_size - 1 + local_copy as u32;
    let shard_bytes = (shape.m / world.world_size as usize * shape.k * 2) as f64;
    shard_bytes * copies as f64 / (push_ctas.max(1) as f64 * AG_GEMM_PUSH_RATE)
}

/// Fewest comm CTAs ring attention passes K/V on with over NVLink: eight push about what NVLink
/// takes (8 x 40 GB/s), and a faster hop lets more tiles run as one unit over every step
/// ([`ring_split_tiles`]); the copying costs about the same SM time however many CTAs share it,
/// and they join the attention when done (1 x 4 H200: 8 beat 4 by 1.5-2.5% with full masks).
pub const RING_MIN_COMM_CTAS: u32 = 8;
/// Most comm CTAs the rule below asks for.
pub const RING_MAX_COMM_CTAS: u32 = 16;
/// FLOP/s ring attention's steps are counted on (one H200 runs the single-GPU kernel at 540-590).
pub const RING_ATTENTION_RATE: f64 = 550e12;

/// Rule of thumb for ring attention's comm CTAs over NVLink: enough (about [`AG_GEMM_PUSH_RATE`]
/// each) that one hop of a step's K/V (`step_bytes`) takes at most 60% of one step's attention
/// (`step_flops` at [`RING_ATTENTION_RATE`]), so a step's K/V is in before the step before ends
/// even though it crossed several hops; between [`RING_MIN_COMM_CTAS`] and
/// [`RING_MAX_COMM_CTAS`].
pub fn ring_comm_ctas(step_bytes: u64, step_flops: f64) -> u32 {
    let step_s = step_flops / RING_ATTENTION_RATE;
    let ctas = step_bytes as f64 / (AG_GEMM_PUSH_RATE * 0.6 * step_s);
    if !ctas.is_finite() {
        return RING_MAX_COMM_CTAS;
    }
    (ctas.ceil() as u32).clamp(RING_MIN_COMM_CTAS, RING_MAX_COMM_CTAS)
}

/// Rule of thumb for ring attention's split tiles (`attn_tiles::Units`): the tiles walked one
/// step per unit, first, while the later steps' K/V arrives; the others are one unit over every
/// step, with no merge through memory (at 1 x 4 H200 the merges cost 6-11% of the ring's rate).
/// Walking step `s` of the split tiles must take at least the hop that brings step `s + 1`'s
/// K/V (`hop_s`), so the split tiles are the fraction `hop_s / step_s` of `tiles` (`step_s`:
/// one step's attention, `step_flops` at [`RING_ATTENTION_RATE`]); all of them when a hop takes
/// a step or longer (a ring bound by its links walks every tile step by step).
pub fn ring_split_tiles(tiles: u32, step_flops: f64, hop_s: f64) -> u32 {
    let step_s = step_flops / RING_ATTENTION_RATE;
    let split = (hop_s / step_s * tiles as f64).ceil();
    if split.is_nan() || split >= tiles as f64 {
        tiles
    } else {
        split.max(0.0) as u32
    }
}

/// Rule of thumb for the path: fused unless the product is too small (under 32 GFLOP) for its
/// tiles to hide the communication's start-up.
pub fn ag_gemm_heuristic(shape: GemmShape, _world: &World) -> Path {
    if shape.flops() < 32e9 {
        Path::Unfused
    } else {
        Path::Fused
    }
}

/// A measured GEMM + ReduceScatter / AllReduce choice (`mkernel tune gemm-rs|gemm-ar`): on one
/// node the tile walk's lead and (all-reduce) the form, on several the inter-reduce CTAs and
/// tiles per FIFO WRITE; `None` where the knob does not apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmRsEntry {
    /// Rounds of sends before the first own tile (`u32::MAX`: every send first).
    pub lead: Option<u32>,
    /// The all-reduce in one shot.
    pub one_shot: Option<bool>,
    /// Inter-reduce CTAs.
    pub inter_reduce: Option<u32>,
    /// Tiles per FIFO WRITE.
    pub group: Option<u32>,
    /// The faster path at that shape.
    pub path: Path,
}

#[derive(Deserialize)]
struct GemmRsLine {
    #[serde(flatten)]
    at: GemmAt,
    lead: Option<u32>,
    one_shot: Option<bool>,
    inter_reduce: Option<u32>,
    group: Option<u32>,
    path: String,
}

impl Measured for GemmRsLine {
    fn at(&self) -> &GemmAt {
        &self.at
    }
}

const GEMM_RS_TABLE: &str = include_str!("tuned/gemm_rs.jsonl");

/// The lines of a GEMM + ReduceScatter / AllReduce table for `op` (`gemm_rs` or `gemm_ar`).
fn parse_gemm_rs(text: &str, op: &str) -> Vec<(GemmRsLine, GemmRsEntry)> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<GemmRsLine>(l).ok())
        .filter(|l| l.at.op == op)
        .map(|l| {
            let (lead, one_shot, inter_reduce, group) = (l.lead, l.one_shot, l.inter_reduce, l.group);
            let e = GemmRsEntry { lead, one_shot, inter_reduce, group, path: path_of(&l.path) };
            (l, e)
        })
        .collect()
}

/// The measured choice for the nearest shape of `collective` on this world, if any; entries
/// measured over a transport apply over that transport only (`transport`: this communicator's,
/// or None to take none of them).
pub fn gemm_rs(
    collective: Collective,
    shape: GemmShape,
    world: &World,
    transport: Option<&str>,
) -> Option<GemmRsEntry> {
    static RS: OnceLock<Vec<(GemmRsLine, GemmRsEntry)>> = OnceLock::new();
    static AR: OnceLock<Vec<(GemmRsLine, GemmRsEntry)>> = OnceLock::new();
    let op = collective.op_name();
    let table = match collective {
        Collective::ReduceScatter => RS.get_or_init(|| parse_gemm_rs(GEMM_RS_TABLE, op)),
        Collective::AllReduce => AR.get_or_init(|| parse_gemm_rs(GEMM_RS_TABLE, op)),
    };
    nearest(table, shape, world, transport)
}

/// A measured MoE dispatch + grouped GEMM choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeEntry {
    /// CTAs that route and move rows.
    pub pull_ctas: u32,
    /// Records per pull item.
    pub run_records: u32,
    /// Whether the pull CTAs join the tiles (`MoeOptions::join`): as measured; lines written
    /// before the option (no `join` field) were measured without it.
    pub join: bool,
    /// The faster path at that config.
    pub path: Path,
}

#[derive(Deserialize)]
struct MoeLine {
    op: String,
    world: u32,
    nodes: u32,
    tokens: usize,
    hidden: usize,
    inter: usize,
    experts: usize,
    top_k: usize,
    pull_ctas: u32,
    run_records: u32,
    #[serde(default)]
    join: bool,
    path: String,
}

const MOE_TABLE: &str = include_str!("tuned/moe.jsonl");

fn parse_moe(text: &str) -> Vec<(MoeLine, MoeEntry)> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<MoeLine>(l).ok())
        .filter(|l| l.op == "moe")
        .map(|l| {
            let e =
                MoeEntry { pull_ctas: l.pull_ctas, run_records: l.run_records, join: l.join, path: path_of(&l.path) };
            (l, e)
        })
        .collect()
}

fn moe_table() -> &'static [(MoeLine, MoeEntry)] {
    static T: OnceLock<Vec<(MoeLine, MoeEntry)>> = OnceLock::new();
    T.get_or_init(|| parse_moe(MOE_TABLE))
}

fn nearest_moe(table: &[(MoeLine, MoeEntry)], c: [usize; 5], world: &World) -> Option<MoeEntry> {
    let d = |x: usize, y: usize| ((x.max(1) as f64) / (y.max(1) as f64)).ln().abs();
    table
        .iter()
        .rev()
        .filter(|(l, _)| l.world == world.world_size && l.nodes == world.nodes)
        .map(|(l, e)| {
            let dist = [l.tokens, l.hidden, l.inter, l.experts, l.top_k]
                .iter()
                .zip(c)
                .map(|(&a, b)| d(a, b))
                .fold(0.0f64, f64::max);
            (dist, *e)
        })
        .filter(|(dist, _)| *dist <= std::f64::consts::LN_2 + 1e-9)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| e)
}

/// The measured choice for the nearest MoE config (`[tokens per rank, hidden, inter, experts,
/// top_k]`) on this world, if any.
pub fn moe(config: [usize; 5], world: &World) -> Option<MoeEntry> {
    nearest_moe(moe_table(), config, world)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(w: u32, nodes: u32) -> World {
        let mut x = World::single(0);
        x.world_size = w;
        x.local_world_size = w / nodes;
        x.nodes = nodes;
        x
    }

    #[test]
    fn embedded_table_parses() {
        let lines = AG_GEMM_TABLE.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(parse(AG_GEMM_TABLE).len(), lines, "a line of host/ops/tuned/ag_gemm.jsonl does not parse");
    }

    #[test]
    fn nearest_entry_within_a_factor_of_two() {
        let t = parse(concat!(
            r#"{"op":"ag_gemm","world":2,"nodes":1,"m":16384,"n":4096,"k":8192,"push_ctas":4,"chunk_rows":128,"path":"fused"}"#,
            "\n",
            r#"{"op":"ag_gemm","world":2,"nodes":1,"m":2048,"n":4096,"k":4096,"push_ctas":2,"chunk_rows":256,"path":"unfused"}"#,
            "\n"
        ));
        let s = |m, n, k| GemmShape { m, n, k };
        assert_eq!(nearest(&t, s(16384, 4096, 8192), &world(2, 1), None).unwrap().push_ctas, 4);
        assert_eq!(nearest(&t, s(2048, 4096, 4096), &world(2, 1), None).unwrap().path, Path::Unfused);
        assert_eq!(nearest(&t, s(3000, 4096, 4096), &world(2, 1), None).unwrap().chunk_rows, 256);
        assert!(nearest(&t, s(16384, 4096, 8192), &world(4, 1), None).is_none(), "other world size");
        assert!(nearest(&t, s(65536, 4096, 8192), &world(2, 1), None).is_none(), "too far");
        assert!(nearest(&t, s(4096, 8192, 8192), &world(2, 1), None).is_none(), "twice as large is too far");
        let nodes = parse(concat!(
            r#"{"op":"ag_gemm","world":2,"nodes":2,"m":8192,"n":8192,"k":8192,"transport":"emulated-nic","push_ctas":3,"chunk_rows":32,"path":"fused"}"#,
            "\n"
        ));
        let big = s(8192, 8192, 8192);
        assert_eq!(nearest(&nodes, big, &world(2, 2), Some("emulated-nic")).unwrap().chunk_rows, 32);
        assert!(nearest(&nodes, big, &world(2, 2), Some("verbs")).is_none(), "measured over another transport");
        assert!(nearest(&nodes, big, &world(2, 2), None).is_none(), "transport unknown");
        // Of two lines for the same shape, the later (newer) one wins.
        let twice = parse(concat!(
            r#"{"op":"ag_gemm","world":4,"nodes":1,"m":8192,"n":8192,"k":8192,"push_ctas":4,"chunk_rows":128,"path":"fused"}"#,
            "\n",
            r#"{"op":"ag_gemm","world":4,"nodes":1,"m":8192,"n":8192,"k":8192,"push_ctas":6,"chunk_rows":64,"path":"fused"}"#,
            "\n"
        ));
        assert_eq!(nearest(&twice, big, &world(4, 1), None).unwrap().push_ctas, 6);
    }

    #[test]
    fn gemm_rs_table_parses_and_matches_within_a_factor_of_two() {
        let lines = GEMM_RS_TABLE.lines().filter(|l| !l.trim().is_empty()).count();
        let parsed = parse_gemm_rs(GEMM_RS_TABLE, "gemm_rs").len() + parse_gemm_rs(GEMM_RS_TABLE, "gemm_ar").len();
        assert_eq!(parsed, lines, "a line of host/ops/tuned/gemm_rs.jsonl does not parse");
        let text = concat!(
            r#"{"op":"gemm_ar","world":2,"nodes":1,"m":1024,"n":4096,"k":4096,"lead":null,"one_shot":true,"inter_reduce":null,"group":null,"path":"fused"}"#,
            "\n",
            r#"{"op":"gemm_ar","world":2,"nodes":2,"m":8192,"n":8192,"k":8192,"transport":"emulated-nic","lead":null,"one_shot":null,"inter_reduce":64,"group":8,"path":"fused"}"#,
            "\n",
            r#"{"op":"gemm_rs","world":2,"nodes":1,"m":512,"n":4096,"k":4096,"lead":7,"one_shot":null,"inter_reduce":null,"group":null,"path":"unfused"}"#,
            "\n"
        );
        let (ar, rs) = (parse_gemm_rs(text, "gemm_ar"), parse_gemm_rs(text, "gemm_rs"));
        let s = |m, n, k| GemmShape { m, n, k };
        let nic = Some("emulated-nic");
        assert_eq!(nearest(&ar, s(1024, 4096, 4096), &world(2, 1), None).unwrap().one_shot, Some(true));
        assert_eq!(nearest(&ar, s(8192, 8192, 8192), &world(2, 2), nic).unwrap().inter_reduce, Some(64));
        assert!(nearest(&ar, s(8192, 8192, 8192), &world(2, 2), Some("verbs")).is_none(), "other transport");
        assert!(nearest(&ar, s(8192, 8192, 8192), &world(2, 2), None).is_none(), "transport unknown");
        assert!(nearest(&ar, s(8192, 8192, 8192), &world(2, 1), nic).is_none(), "other node count");
        let small = nearest(&rs, s(600, 4096, 4096), &world(2, 1), nic).unwrap();
        assert_eq!((small.lead, small.path), (Some(7), Path::Unfused));
        assert!(nearest(&rs, s(1024, 4096, 4096), &world(2, 1), None).is_none(), "twice as large is too far");
    }

    #[test]
    fn moe_table_parses_and_matches_within_a_factor_of_two() {
        let lines = MOE_TABLE.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(parse_moe(MOE_TABLE).len(), lines, "a line of host/ops/tuned/moe.jsonl does not parse");
        let t = parse_moe(concat!(
            r#"{"op":"moe","world":2,"nodes":1,"tokens":4096,"hidden":7168,"inter":2048,"experts":256,"top_k":8,"pull_ctas":20,"run_records":64,"path":"fused"}"#,
            "\n"
        ));
        assert_eq!(nearest_moe(&t, [4096, 7168, 2048, 256, 8], &world(2, 1)).unwrap().pull_ctas, 20);
        assert_eq!(nearest_moe(&t, [3000, 7168, 2048, 200, 8], &world(2, 1)).unwrap().run_records, 64);
        assert!(nearest_moe(&t, [4096, 7168, 2048, 8, 2], &world(2, 1)).is_none(), "too far");
        assert!(nearest_moe(&t, [4096, 7168, 2048, 256, 8], &world(4, 1)).is_none(), "other world");
        // A config measured twice: the newer (later) line wins.
        let twice = parse_moe(concat!(
            r#"{"op":"moe","world":4,"nodes":1,"tokens":8192,"hidden":4096,"inter":14336,"experts":8,"top_k":2,"pull_ctas":16,"run_records":32,"path":"fused"}"#,
            "\n",
            r#"{"op":"moe","world":4,"nodes":1,"tokens":8192,"hidden":4096,"inter":14336,"experts":8,"top_k":2,"pull_ctas":8,"run_records":16,"path":"fused"}"#,
            "\n"
        ));
        let newer = nearest_moe(&twice, [8192, 4096, 14336, 8, 2], &world(4, 1)).unwrap();
        assert_eq!((newer.pull_ctas, newer.run_records), (8, 16));
        // The embedded table's world-4 lines (tune moe --rounds 3, 2026-11-27; the DeepSeek-like
        // one again with the pull CTAs joining the tiles, 2026-11-28).
        let mixtral = nearest_moe(moe_table(), [8192, 4096, 14336, 8, 2], &world(4, 1)).unwrap();
        assert_eq!((mixtral.pull_ctas, mixtral.run_records), (8, 16));
        let deepseek = nearest_moe(moe_table(), [4096, 7168, 2048, 256, 8], &world(4, 1)).unwrap();
        assert_eq!((deepseek.pull_ctas, deepseek.run_records, deepseek.join), (32, 5, true));
        // A line without `join` was measured before the option: off.
        assert!(!twice[0].1.join && !newer.join);
        let joined = parse_moe(concat!(
            r#"{"op":"moe","world":2,"nodes":1,"tokens":4096,"hidden":7168,"inter":2048,"experts":256,"top_k":8,"pull_ctas":28,"run_records":5,"join":true,"path":"fused"}"#,
            "\n"
        ));
        assert!(joined[0].1.join);
    }

    #[test]
    fn rules_of_thumb() {
        let big = GemmShape { m: 16384, n: 4096, k: 8192 };
        assert_eq!(ag_gemm_push_ctas(big, &world(2, 1), false), 4);
        assert_eq!(ag_gemm_push_ctas(big, &world(2, 1), true), 7, "the local copy too");
        assert!(ag_gemm_push_ctas(big, &world(4, 1), false) >= 5);
        assert_eq!(ag_gemm_push_ctas(big, &world(2, 2), false), 1, "one rank per node: no NVLink peers");
        assert_eq!(ag_gemm_heuristic(big, &world(2, 1)), Path::Fused);
        assert_eq!(ag_gemm_heuristic(GemmShape { m: 256, n: 4096, k: 4096 }, &world(2, 1)), Path::Unfused);
        // Ring attention at world 4 (K and V of one step: 256 MiB in both configs): the floor of
        // 8, more only where a step's attention is much shorter than a hop.
        let kv = 2 * 2 * 4 * 16 * 8192 * 128;
        let block = 4.0 * 64.0 * 8192f64.powi(2) * 128.0;
        assert_eq!(ring_comm_ctas(kv, block), 8, "full mask");
        assert_eq!(ring_comm_ctas(kv, block / 2.0), 8, "causal");
        assert_eq!(ring_comm_ctas(kv, block / 8.0), 16, "a short step");
        assert_eq!(ring_comm_ctas(kv, 0.0), RING_MAX_COMM_CTAS, "no work: as fast as allowed");
        assert_eq!(ring_comm_ctas(1 << 20, block), RING_MIN_COMM_CTAS);
        // A hop of a quarter step: a quarter of the tiles walked step by step.
        let step_s = block / RING_ATTENTION_RATE;
        assert_eq!(ring_split_tiles(4096, block, step_s / 4.0), 1024);
        assert_eq!(ring_split_tiles(4096, block, step_s * 2.0), 4096, "link-bound: every tile");
        assert_eq!(ring_split_tiles(4096, block, 0.0), 0);
        assert_eq!(ring_split_tiles(4096, 0.0, 1e-3), 4096, "no work: every tile");
    }
}
