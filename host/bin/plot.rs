//! placeholder until the plot module lands
pub struct PlotSummary {
    pub files: Vec<std::path::PathBuf>,
    pub records: usize,
    pub skipped: usize,
}
pub fn plot(_inputs: &[std::path::PathBuf], _out: &std::path::Path) -> anyhow::Result<PlotSummary> {
    anyhow::bail!("not yet")
}
