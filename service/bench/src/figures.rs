//! Figures a scenario records for `scripts/bench-compare.sh`, and `askgate-bench
//! compare`, which sets two builds' runs side by side.
//!
//! With `--figures FILE` every scenario appends one line per figure it prints:
//! `name<TAB>value<TAB>unit<TAB>better`, `better` being `higher` or `lower`. `compare`
//! reads the files of two directories (one per build, one file per run), takes each
//! figure's median over the runs and prints both, their range and their ratio as a
//! Markdown table.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use anyhow::{Context, bail};
use clap::Args;
use parking_lot::Mutex;

/// The file figures go to, when `--figures` was given.
static SINK: OnceLock<Mutex<std::fs::File>> = OnceLock::new();

/// Figures from now on are appended to `path`.
pub fn record_to(path: &Path) -> anyhow::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let _ = SINK.set(Mutex::new(file));
    Ok(())
}

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

impl Better {
    fn name(self) -> &'static str {
        match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "higher" => Some(Better::Higher),
            "lower" => Some(Better::Lower),
            _ => None,
        }
    }
}

/// Records one figure of this run (nothing without `--figures`).
pub fn record(name: &str, value: f64, unit: &str, better: Better) {
    let Some(sink) = SINK.get() else {
        return;
    };
    if !value.is_finite() {
        return;
    }
    let line = format!("{name}\t{value}\t{unit}\t{}\n", better.name());
    // A figure that cannot be written fails the comparison that reads it, not the run.
    if let Err(e) = sink.lock().write_all(line.as_bytes()) {
        eprintln!("askgate-bench: writing a figure: {e}");
    }
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The directory of the base build's figure files (one file per run).
    pub base: PathBuf,
    /// The directory of the compared build's figure files.
    pub head: PathBuf,
    /// The base build's name in the table's header.
    #[arg(long, default_value = "base")]
    pub base_name: String,
    /// The compared build's name in the table's header.
    #[arg(long, default_value = "head")]
    pub head_name: String,
}

/// One figure over a build's runs.
#[derive(Debug, Default)]
struct Series {
    unit: String,
    better: Option<Better>,
    values: Vec<f64>,
}

/// Every figure of one build: by name, and the order they were first seen in.
#[derive(Debug, Default)]
struct Runs {
    order: Vec<String>,
    series: BTreeMap<String, Series>,
}

impl Runs {
    fn read(dir: &Path) -> anyhow::Result<Self> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "tsv"))
            .collect();
        files.sort();
        let mut runs = Runs::default();
        for file in &files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            for (n, line) in text.lines().enumerate() {
                runs.add(line)
                    .with_context(|| format!("{}:{}", file.display(), n + 1))?;
            }
        }
        Ok(runs)
    }

    fn add(&mut self, line: &str) -> anyhow::Result<()> {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, value, unit, better] = fields[..] else {
            bail!("expected name, value, unit and better separated by tabs: {line:?}");
        };
        let value: f64 = value.parse().with_context(|| format!("value {value:?}"))?;
        let better = Better::parse(better).with_context(|| format!("better {better:?}"))?;
        if !self.series.contains_key(name) {
            self.order.push(name.to_owned());
        }
        let series = self.series.entry(name.to_owned()).or_default();
        series.unit = unit.to_owned();
        series.better = Some(better);
        series.values.push(value);
        Ok(())
    }
}

/// The median of `values` (the mean of the middle two when even), none when empty.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// A figure for the table: three significant digits, thousands grouped.
fn shown(value: f64) -> String {
    let magnitude = value.abs();
    let decimals = match magnitude {
        m if m >= 100.0 || m == 0.0 => 0,
        m if m >= 10.0 => 1,
        m if m >= 1.0 => 2,
        _ => 3,
    };
    let text = format!("{value:.decimals$}");
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let (sign, digits) = match whole.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", whole),
    };
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match fraction {
        "" => format!("{sign}{grouped}"),
        f => format!("{sign}{grouped}.{f}"),
    }
}

/// A build's column: the median, and the range and count of the runs.
fn column(series: Option<&Series>) -> String {
    let Some(series) = series else {
        return "—".to_owned();
    };
    let Some(mid) = median(&series.values) else {
        return "—".to_owned();
    };
    let low = series.values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = series
        .values
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    match series.values.len() {
        1 => format!("{} (1 run)", shown(mid)),
        n => format!("{} ({}–{}, {n} runs)", shown(mid), shown(low), shown(high)),
    }
}

/// The head's median over the base's, and whether that is better, worse or within
/// 5% (the project's bound on what one change may cost without saying why).
fn verdict(base: Option<&Series>, head: Option<&Series>) -> (String, String) {
    let (Some(base), Some(head)) = (base, head) else {
        return ("—".to_owned(), String::new());
    };
    let (Some(b), Some(h)) = (median(&base.values), median(&head.values)) else {
        return ("—".to_owned(), String::new());
    };
    if b == 0.0 {
        return ("—".to_owned(), String::new());
    }
    let ratio = h / b;
    let gain = match head.better.or(base.better) {
        Some(Better::Higher) => ratio - 1.0,
        Some(Better::Lower) => 1.0 - ratio,
        None => 0.0,
    };
    let word = match gain {
        g if g > 0.05 => "better",
        g if g < -0.05 => "worse",
        _ => "within 5%",
    };
    (format!("{ratio:.2}x"), word.to_owned())
}

/// The table `compare` prints.
fn table(base: &Runs, head: &Runs, base_name: &str, head_name: &str) -> String {
    let mut names = head.order.clone();
    names.extend(
        base.order
            .iter()
            .filter(|n| !head.series.contains_key(*n))
            .cloned(),
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| figure | {base_name} | {head_name} | {head_name}/{base_name} | |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for name in names {
        let (b, h) = (base.series.get(&name), head.series.get(&name));
        let unit = h.or(b).map(|s| s.unit.as_str()).unwrap_or_default();
        let label = match unit {
            "" => name.clone(),
            unit => format!("{name} ({unit})"),
        };
        let (ratio, word) = verdict(b, h);
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {ratio} | {word} |",
            column(b),
            column(h)
        );
    }
    out
}

pub fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let base = Runs::read(&args.base)?;
    let head = Runs::read(&args.head)?;
    if base.series.is_empty() && head.series.is_empty() {
        bail!(
            "no figures in {} or {}: run the scenarios with --figures DIR/RUN.tsv",
            args.base.display(),
            args.head.display()
        );
    }
    print!("{}", table(&base, &head, &args.base_name, &args.head_name));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(lines: &[&str]) -> Runs {
        let mut runs = Runs::default();
        for line in lines {
            runs.add(line).expect("a well-formed line");
        }
        runs
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn shown_groups_thousands_and_keeps_three_digits() {
        assert_eq!(shown(24250.4), "24,250");
        assert_eq!(shown(1234567.0), "1,234,567");
        assert_eq!(shown(54.26), "54.3");
        assert_eq!(shown(0.531), "0.531");
        assert_eq!(shown(-1520.0), "-1,520");
        assert_eq!(shown(0.0), "0");
    }

    #[test]
    fn the_table_takes_medians_and_says_which_way_each_figure_moved() {
        let base = runs(&[
            "memory c=64 asks/s\t100\tasks/s\thigher",
            "memory c=64 asks/s\t120\tasks/s\thigher",
            "memory c=64 asks/s\t110\tasks/s\thigher",
            "bytes per pending ask\t8000\tB\tlower",
        ]);
        let head = runs(&[
            "memory c=64 asks/s\t90\tasks/s\thigher",
            "memory c=64 asks/s\t80\tasks/s\thigher",
            "memory c=64 asks/s\t100\tasks/s\thigher",
            "bytes per pending ask\t4000\tB\tlower",
            "sqlite c=64 asks/s\t50\tasks/s\thigher",
        ]);
        let table = table(&base, &head, "014abab", "main");
        assert!(
            table.contains("| memory c=64 asks/s (asks/s) | 110 (100–120, 3 runs) | 90.0 (80.0–100, 3 runs) | 0.82x | worse |"),
            "{table}"
        );
        assert!(
            table.contains(
                "| bytes per pending ask (B) | 8,000 (1 run) | 4,000 (1 run) | 0.50x | better |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| sqlite c=64 asks/s (asks/s) | — | 50.0 (1 run) | — |  |"),
            "{table}"
        );
    }

    #[test]
    fn a_malformed_line_is_refused_with_what_was_expected() {
        let mut runs = Runs::default();
        let e = runs.add("asks/s 100").expect_err("no tabs");
        assert!(e.to_string().contains("separated by tabs"), "{e}");
        let e = runs.add("a\tx\tB\tlower").expect_err("not a number");
        assert!(format!("{e:#}").contains("value \"x\""), "{e:#}");
    }
}
