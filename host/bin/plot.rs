//! `mkernel plot`: one bar chart per (op, world, nodes, layout, in place) from benchmark JSON
//! lines, ours (`mkernel bench --json`) beside the baselines `torch_baselines.py --json` measured
//! on the same machine; drawn as SVG by plotters, rasterised to PNG by resvg with a bundled font
//! (DejaVu Sans, `assets/fonts`), so the PNG looks the same on a machine with no fonts.
//!
//! Every bar is a time divided by mkernel's time for the same shape (`mkernel-fused`, else
//! `mkernel`), so a bar above 1 is a run that mkernel beats. Ratios are only meaningful between
//! records of one device call (the GPU drifts 15-20% between calls): give `plot` the files of one
//! call. Baselines join a group by op, world and shape; they were timed on one node, so they only
//! join one-node groups.

use anyhow::{bail, Context, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What `plot` wrote and read.
pub struct PlotSummary {
    /// Charts written (SVG, then its PNG), in group order.
    pub files: Vec<PathBuf>,
    /// Records drawn from (ours and baselines).
    pub records: usize,
    /// Lines that are neither our records nor a known baseline (old schemas, tuning rows, ...).
    pub skipped: usize,
    /// Baseline values whose op, world and shape match no group of ours.
    pub unmatched: usize,
    /// Bars given twice (the same op, world, nodes, shape and series in two records): the later
    /// record wins. Files from several calls do that; their ratios would mix calls anyway.
    pub replaced: usize,
    /// Charts not drawn because none of their series is mkernel's (nothing to divide by).
    pub no_reference: Vec<String>,
}

/// The series every bar of a group is divided by, in order of preference.
const REFERENCES: [&str; 2] = ["mkernel-fused", "mkernel"];

/// Which chart a record of ours belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    op: String,
    world: u32,
    nodes: u32,
    layout: String,
    in_place: bool,
}

/// A timed baseline from `torch_baselines.py`.
#[derive(Clone, Debug, PartialEq)]
struct Baseline {
    op: String,
    world: u32,
    shape: String,
    series: &'static str,
    ms: f64,
}

/// One line, classified.
#[derive(Debug, PartialEq)]
enum Line {
    Ours { key: GroupKey, shape: String, series: String, ms: f64, gpu: String, commit: String },
    Baselines(Vec<Baseline>),
    Unknown,
}

/// The bars of one chart.
#[derive(Default)]
struct Group {
    /// Shapes in order of first appearance.
    shapes: Vec<String>,
    /// Series in order of first appearance.
    series: Vec<String>,
    ms: BTreeMap<(String, String), f64>,
    gpus: BTreeSet<String>,
    commits: BTreeSet<String>,
}

impl Group {
    /// Adds a bar; true when it replaced one.
    fn insert(&mut self, shape: &str, series: &str, ms: f64) -> bool {
        if !self.shapes.iter().any(|s| s == shape) {
            self.shapes.push(shape.to_string());
        }
        if !self.series.iter().any(|s| s == series) {
            self.series.push(series.to_string());
        }
        self.ms.insert((shape.to_string(), series.to_string()), ms).is_some()
    }

    /// The reference series, moved first; `None` where the group has none of [`REFERENCES`].
    fn reference(&mut self) -> Option<String> {
        let i = REFERENCES.iter().find_map(|r| self.series.iter().position(|s| s == r))?;
        let r = self.series.remove(i);
        self.series.insert(0, r.clone());
        Some(r)
    }
}

fn str_field<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn u32_field(v: &Value, k: &str) -> Option<u32> {
    v.get(k).and_then(Value::as_u64).and_then(|x| u32::try_from(x).ok())
}

fn ms_field(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64).filter(|ms| ms.is_finite() && *ms > 0.0)
}

/// Sorts a parsed JSON line into ours, baselines or unknown.
fn classify(v: &Value) -> Line {
    let op = str_field(v, "op").unwrap_or_default().to_string();
    // Ours: the `bench::harness::Record` schema.
    if let (Some(shape), Some(series), Some(world), Some(nodes), Some(ms)) =
        (str_field(v, "shape"), str_field(v, "impl"), u32_field(v, "world"), u32_field(v, "nodes"), ms_field(v, "ms"))
    {
        let key = GroupKey {
            op,
            world,
            nodes,
            layout: str_field(v, "layout").unwrap_or("-").to_string(),
            in_place: v.get("in_place").and_then(Value::as_bool).unwrap_or(false),
        };
        return Line::Ours {
            key,
            shape: shape.to_string(),
            series: series.to_string(),
            ms,
            gpu: str_field(v, "gpu").unwrap_or("?").to_string(),
            commit: str_field(v, "commit").unwrap_or("?").to_string(),
        };
    }
    let world = u32_field(v, "world").unwrap_or(1);
    let mnk = match (u32_field(v, "m"), u32_field(v, "n"), u32_field(v, "k")) {
        (Some(m), Some(n), Some(k)) => Some(format!("{m}x{n}x{k}")),
        _ => None,
    };
    // MoE configs read as `bench moe` labels them: tokens per rank, hidden, inter, experts, top-k.
    let moe = match ["tokens_per_rank", "hidden", "inter", "experts", "top_k"].map(|k| u32_field(v, k)) {
        [Some(t), Some(h), Some(i), Some(e), Some(k)] => Some(format!("T{t}xH{h}xI{i}xE{e}xk{k}")),
        _ => None,
    };
    let columns: &[(&str, &'static str)] = match (op.as_str(), str_field(v, "impl")) {
        ("moe_dispatch_gemm", None) => &[
            ("torch_ms", "torch all_to_all + grouped_mm"),
            ("gemm_alone_ms", "torch grouped_mm alone"),
            ("dispatch_alone_ms", "NCCL all_to_all alone"),
        ],
        ("ag_gemm" | "gemm_rs" | "gemm_ar", None) => {
            &[("nccl_cublas_ms", "NCCL+cuBLAS"), ("async_tp_ms", "torch async-TP")]
        }
        ("gemm", Some("cublas")) => &[("ms", "torch cuBLAS")],
        ("all_gather" | "all_reduce", Some("nccl")) => &[("ms", "NCCL")],
        _ => &[],
    };
    let shape = mnk.or(moe).or_else(|| v.get("bytes").and_then(Value::as_u64).map(|b| b.to_string()));
    let (Some(shape), false) = (shape, columns.is_empty()) else { return Line::Unknown };
    let found: Vec<Baseline> = columns
        .iter()
        .filter_map(|&(col, series)| {
            ms_field(v, col).map(|ms| Baseline { op: op.clone(), world, shape: shape.clone(), series, ms })
        })
        .collect();
    if found.is_empty() {
        Line::Unknown
    } else {
        Line::Baselines(found)
    }
}

/// `1048576` -> `1 MiB`; shapes that are not byte counts pass through.
fn shape_label(shape: &str) -> String {
    match shape.parse::<u64>() {
        Ok(b) if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        Ok(b) if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        Ok(b) if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        Ok(b) => format!("{b} B"),
        Err(_) => shape.to_string(),
    }
}

fn file_name(k: &GroupKey) -> String {
    let mut name = format!("{}-w{}-n{}", k.op, k.world, k.nodes);
    if k.layout != "-" {
        name += &format!("-{}", k.layout);
    }
    if k.in_place {
        name += "-inplace";
    }
    name + ".svg"
}

/// Reads `inputs`, writes one chart per group into `out`.
pub fn plot(inputs: &[PathBuf], out: &Path) -> Result<PlotSummary> {
    let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
    let mut baselines = Vec::new();
    let (mut records, mut skipped, mut replaced) = (0, 0, 0);
    for path in inputs {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a JSON object", path.display(), i + 1))?;
            match classify(&v) {
                Line::Ours { key, shape, series, ms, gpu, commit } => {
                    let g = groups.entry(key).or_default();
                    replaced += usize::from(g.insert(&shape, &series, ms));
                    g.gpus.insert(gpu);
                    g.commits.insert(commit);
                    records += 1;
                }
                Line::Baselines(b) => {
                    baselines.extend(b);
                    records += 1;
                }
                Line::Unknown => skipped += 1,
            }
        }
    }
    if groups.is_empty() {
        bail!("no mkernel records (from `mkernel bench --json`) in {} file(s): nothing to plot", inputs.len());
    }
    let mut unmatched = 0;
    for b in &baselines {
        let mut used = false;
        for (k, g) in groups.iter_mut() {
            if k.op == b.op && k.world == b.world && k.nodes == 1 && g.shapes.contains(&b.shape) {
                replaced += usize::from(g.insert(&b.shape, b.series, b.ms));
                used = true;
            }
        }
        unmatched += usize::from(!used);
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let (mut files, mut no_reference) = (Vec::new(), Vec::new());
    for (key, mut g) in groups {
        let path = out.join(file_name(&key));
        let Some(reference) = g.reference() else {
            no_reference.push(file_name(&key));
            continue;
        };
        draw(&key, &g, &reference, &path).with_context(|| format!("drawing {}", path.display()))?;
        let png = path.with_extension("png");
        rasterise(&path, &png).with_context(|| format!("rendering {}", png.display()))?;
        files.push(path);
        files.push(png);
    }
    Ok(PlotSummary { files, records, skipped, unmatched, replaced, no_reference })
}

/// The font every chart's text is set in (plotters writes the family `sans-serif`).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// `svg` -> `png` at twice the SVG's size (crisp on high-DPI screens and in reviews).
fn rasterise(svg: &Path, png: &Path) -> Result<()> {
    render(&std::fs::read(svg)?, true)?.save_png(png)?;
    Ok(())
}

/// The SVG at twice its size; `fonts: false` leaves the text out (tests compare the two).
fn render(svg: &[u8], fonts: bool) -> Result<resvg::tiny_skia::Pixmap> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options { font_family: "DejaVu Sans".into(), ..Default::default() };
    if fonts {
        let db = opt.fontdb_mut();
        db.load_font_data(FONT.to_vec());
        db.set_sans_serif_family("DejaVu Sans");
    }
    let tree = usvg::Tree::from_data(svg, &opt)?;
    let size = tree.size().to_int_size().scale_by(2.0).context("chart too large to render")?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).context("no memory for the PNG")?;
    resvg::render(&tree, tiny_skia::Transform::from_scale(2.0, 2.0), &mut pixmap.as_mut());
    Ok(pixmap)
}

/// The x axis: cluster `i` spans `[i, i + 1)`, its tick (the shape's name) at the centre.
struct Clusters(usize);

impl Ranged for Clusters {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        limit.0 + ((limit.1 - limit.0) as f64 * v / self.0 as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        (0..self.0).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.0 as f64
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// Grouped bars: one cluster per shape, one bar per series, each over the reference's time.
fn draw(key: &GroupKey, g: &Group, reference: &str, path: &Path) -> Result<()> {
    let n = g.shapes.len();
    // (cluster, series, time over the reference's time at that shape)
    let mut bars: Vec<(usize, usize, f64)> = Vec::new();
    for (i, shape) in g.shapes.iter().enumerate() {
        let Some(r) = g.ms.get(&(shape.clone(), reference.to_string())) else { continue };
        for (s, series) in g.series.iter().enumerate() {
            if let Some(ms) = g.ms.get(&(shape.clone(), series.clone())) {
                bars.push((i, s, ms / r));
            }
        }
    }
    let top = bars.iter().map(|b| b.2).fold(1.0f64, f64::max) * 1.18;
    let width = 0.8 / g.series.len() as f64;
    let commits: Vec<&str> = g.commits.iter().map(String::as_str).collect();
    let gpus: Vec<&str> = g.gpus.iter().map(String::as_str).collect();
    let mut title = format!("{}  world {}, {} node(s)", key.op, key.world, key.nodes);
    if key.layout != "-" {
        title += &format!(", B [{}]", key.layout);
    }
    if key.in_place {
        title += ", in place";
    }
    title += &format!("  |  {}, commit {}", gpus.join(", "), commits.join(", "));

    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    // The legend gets its own column so that no bar hides under it.
    let (plot_area, legend_area) = root.split_horizontally(1010);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(50)
        .y_label_area_size(64)
        .build_cartesian_2d(Clusters(n), 0f64..top)?;
    let shapes = g.shapes.clone();
    let label = move |x: &f64| shapes.get(x.floor() as usize).map(|s| shape_label(s)).unwrap_or_default();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&label)
        .x_desc(match (key.layout.as_str(), key.op.as_str()) {
            ("-", _) => "bytes",
            (_, "moe_dispatch_gemm") => "tokens per rank x hidden x inter x experts x top-k",
            _ => "shape MxNxK",
        })
        .y_desc(format!("time / {reference} time (above 1: mkernel faster)"))
        .draw()?;
    for (s, series) in g.series.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        let mine: Vec<(f64, f64)> =
            bars.iter().filter(|b| b.1 == s).map(|&(i, _, r)| (i as f64 + 0.1 + s as f64 * width, r)).collect();
        chart.draw_series(
            mine.iter().map(|&(x, r)| Rectangle::new([(x, 0.0), (x + width * 0.92, r)], color.filled())),
        )?;
        let y = 60 + 20 * s as i32;
        legend_area.draw(&Rectangle::new([(4, y), (16, y + 12)], color.filled()))?;
        legend_area.draw(&Text::new(series.as_str(), (22, y), ("sans-serif", 13)))?;
        let value = TextStyle::from(("sans-serif", 11)).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(
            mine.iter().map(|&(x, r)| Text::new(format!("{r:.2}"), (x + width * 0.46, r + top * 0.005), value.clone())),
        )?;
    }
    chart.draw_series(LineSeries::new([(0.0, 1.0), (n as f64, 1.0)], BLACK.stroke_width(1)))?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mkernel-plot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn ours(op: &str, shape: &str, imp: &str, ms: f64) -> Value {
        json!({"op": op, "shape": shape, "world": 2, "nodes": 1, "layout": "kn", "impl": imp, "ms": ms,
               "tflops": null, "gbps": null, "commit": "abc1234", "gpu": "NVIDIA H200", "date": "2026-11-22"})
    }

    #[test]
    fn classifies_ours_baselines_and_unknown() {
        let Line::Ours { key, shape, series, ms, .. } = classify(&ours("ag_gemm", "8x8x8", "mkernel-fused", 2.0))
        else {
            panic!("ours not recognised")
        };
        assert_eq!(
            (key.op.as_str(), key.world, shape.as_str(), series.as_str(), ms),
            ("ag_gemm", 2, "8x8x8", "mkernel-fused", 2.0)
        );
        let torch =
            json!({"op": "ag_gemm", "world": 2, "m": 8, "n": 8, "k": 8, "nccl_cublas_ms": 3.0, "async_tp_ms": 2.5});
        let Line::Baselines(b) = classify(&torch) else { panic!("baseline not recognised") };
        assert_eq!(
            b.iter().map(|b| (b.series, b.ms, b.shape.as_str())).collect::<Vec<_>>(),
            [("NCCL+cuBLAS", 3.0, "8x8x8"), ("torch async-TP", 2.5, "8x8x8")]
        );
        let moe = json!({"op": "moe_dispatch_gemm", "world": 2, "tokens_per_rank": 4096, "hidden": 7168, "inter": 2048,
                         "experts": 256, "top_k": 8, "torch_ms": 4.0, "gemm_alone_ms": 2.0, "dispatch_alone_ms": 1.6});
        let Line::Baselines(b) = classify(&moe) else { panic!("moe baseline not recognised") };
        assert_eq!(b.len(), 3);
        assert_eq!(
            (b[0].shape.as_str(), b[0].series, b[0].ms),
            ("T4096xH7168xI2048xE256xk8", "torch all_to_all + grouped_mm", 4.0)
        );
        let nccl = json!({"op": "all_gather", "impl": "nccl", "world": 4, "bytes": 1048576, "ms": 0.06});
        assert!(matches!(classify(&nccl), Line::Baselines(b) if b[0].shape == "1048576" && b[0].series == "NCCL"));
        // Old schema, tuning rows, non-positive times: not drawn.
        assert_eq!(classify(&json!({"op": "gemm", "ours_ms": 1.0, "cublas_ms": 1.1})), Line::Unknown);
        assert_eq!(classify(&json!({"op": "ag_gemm", "world": 2, "nodes": 1, "best": {}})), Line::Unknown);
        assert_eq!(classify(&ours("gemm", "8x8x8", "mkernel", 0.0)), Line::Unknown);
    }

    #[test]
    fn writes_ratio_charts_with_joined_baselines() {
        let d = temp_dir("ok");
        let lines = [
            ours("ag_gemm", "8x8x8", "gemm-alone", 1.5),
            ours("ag_gemm", "8x8x8", "mkernel-fused", 2.0),
            ours("ag_gemm", "16x8x8", "mkernel-fused", 5.0),
            // Given again: replaces the one above, and is counted.
            ours("ag_gemm", "16x8x8", "mkernel-fused", 4.0),
            json!({"op": "ag_gemm", "world": 2, "m": 8, "n": 8, "k": 8, "nccl_cublas_ms": 3.0, "async_tp_ms": 2.5}),
            // A world no record of ours has: unmatched, not drawn.
            json!({"op": "ag_gemm", "world": 8, "m": 8, "n": 8, "k": 8, "nccl_cublas_ms": 3.0}),
            json!({"op": "gemm", "ours_ms": 1.0}),
            // A group with no series of mkernel's: nothing to divide by, not drawn, named.
            json!({"op": "all_gather", "shape": "1024", "world": 2, "nodes": 1, "layout": "-",
                   "impl": "copy-engine-p2p", "ms": 0.01, "commit": "abc1234", "gpu": "NVIDIA H200"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n\n")).collect();
        std::fs::write(d.join("in.jsonl"), text).unwrap();
        let s = plot(&[d.join("in.jsonl")], &d.join("plots")).unwrap();
        assert_eq!((s.records, s.skipped, s.unmatched, s.replaced), (7, 1, 1, 1));
        assert_eq!(s.no_reference, ["all_gather-w2-n1.svg"]);
        assert_eq!(s.files, [d.join("plots/ag_gemm-w2-n1-kn.svg"), d.join("plots/ag_gemm-w2-n1-kn.png")]);
        // The PNG holds the picture: twice the SVG's size, mostly white, with the bars' colours.
        let png = std::fs::read(&s.files[1]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let pixmap = resvg::tiny_skia::Pixmap::decode_png(&png).unwrap();
        assert_eq!((pixmap.width(), pixmap.height()), (2400, 1120));
        let count =
            |rgb: (u8, u8, u8)| pixmap.pixels().iter().filter(|p| (p.red(), p.green(), p.blue()) == rgb).count();
        assert!(count((0xff, 0xff, 0xff)) > pixmap.pixels().len() / 2);
        assert!(count((0x1f, 0x77, 0xb4)) > 1000, "no bar of the first series in the PNG");
        // The text was set: far more dark pixels than the same chart rendered without a font.
        let dark = |p: &resvg::tiny_skia::Pixmap| {
            p.pixels().iter().filter(|p| p.red() < 0x40 && p.green() < 0x40 && p.blue() < 0x40).count()
        };
        let bare = render(&std::fs::read(&s.files[0]).unwrap(), false).unwrap();
        assert!(
            dark(&pixmap) > 2 * dark(&bare),
            "no text in the PNG: {} vs {} dark pixels",
            dark(&pixmap),
            dark(&bare)
        );
        let svg = std::fs::read_to_string(&s.files[0]).unwrap();
        // Bars over the reference (mkernel-fused, 2.0 ms at 8x8x8): 1.00, 0.75, 1.50, 1.25.
        for want in ["mkernel-fused", "gemm-alone", "NCCL+cuBLAS", "torch async-TP", "16x8x8", "abc1234"] {
            assert!(svg.contains(want), "{want} missing from the chart");
        }
        for want in ["1.00", "0.75", "1.50", "1.25"] {
            // The SVG backend writes a text element's content on its own line.
            assert!(svg.contains(&format!("\n{want}\n</text>")), "bar label {want} missing:\n{svg}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_input_is_named() {
        let d = temp_dir("bad");
        std::fs::write(d.join("a.jsonl"), format!("{}\nnot json\n", ours("gemm", "8x8x8", "mkernel", 1.0))).unwrap();
        let e = plot(&[d.join("a.jsonl")], &d).err().unwrap();
        assert!(format!("{e:#}").contains("a.jsonl:2: not a JSON object"), "{e:#}");
        std::fs::write(d.join("b.jsonl"), "{\"op\": \"gemm\", \"ours_ms\": 1.0}\n").unwrap();
        let e = plot(&[d.join("b.jsonl")], &d).err().unwrap();
        assert!(format!("{e}").contains("no mkernel records"), "{e}");
        assert!(plot(&[d.join("missing.jsonl")], &d).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn byte_shapes_read_as_sizes() {
        assert_eq!(shape_label("1048576"), "1 MiB");
        assert_eq!(shape_label("268435456"), "256 MiB");
        assert_eq!(shape_label("1000003"), "1000003 B");
        assert_eq!(shape_label("8192x8192x8192"), "8192x8192x8192");
    }
}
