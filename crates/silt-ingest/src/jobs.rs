//! The jobs the commands run, as library calls: [`import`] (inputs into a lake: `silt import`,
//! `silt demo`) and [`convert`] (inputs into one file: `silt convert`). Each puts a file source, a
//! [`Pipeline`] and a sink together and returns what the sink and the pipeline report; the CLI
//! only parses flags, calls one of these and prints.
//!
//! Touches the inputs (read), the lake or output file, and the rejects directory.

use std::path::{Path, PathBuf};

use anyhow::Context;
use silt_lake::imports::{ImportLog, InputIdentity, Recovered, RunRecord};
use silt_lake::publish::DirectoryPublisher;
use silt_lake::remote::record::{self, RemoteImportLog};
use silt_lake::remote::LakeRoot;
use silt_lake::single::{SingleFileWriter, SingleSummary};
use silt_lake::{ImportSummary, LakeWriter, WriterConfig};

use crate::pipeline::{Observer, Pipeline, RunReport};
use crate::sink::OneTable;
use crate::source::file::{FileSource, Input};

/// What an import did: the lake writer's summary, the pipeline's report, and what the lake's
/// import record (`silt_lake::imports`) made of the inputs.
#[derive(Debug)]
pub struct ImportOutcome {
    pub summary: ImportSummary,
    pub run: RunReport,
    /// Inputs skipped because the lake already holds their content.
    pub skipped: Vec<Skipped>,
    /// Inputs not imported because an earlier run imported their start: logs appended to since
    /// (importing them would add the rows of that start again; `--force` imports them whole).
    pub grown: Vec<Grown>,
    /// Interrupted earlier imports whose files were removed before this one started (their
    /// inputs were not recorded as imported, so this run imports them again in full).
    pub recovered: Recovered,
    /// Compactions a crash had interrupted, finished or undone before this one started.
    pub replacements: silt_lake::replace::Recovery,
    /// This run's id in the import record.
    pub run_id: String,
}

/// An input already imported (by an earlier run, or given twice to this one).
#[derive(Debug, Clone)]
pub struct Skipped {
    pub path: PathBuf,
    /// The earlier run that imported it and when it finished; `None` when this run already
    /// takes the same content from another argument.
    pub run: Option<(String, String)>,
    /// The path the content had then (a copy or a renamed file has the same content).
    pub was: String,
}

/// An input that grew since an earlier run imported its start.
#[derive(Debug, Clone)]
pub struct Grown {
    pub path: PathBuf,
    /// The earlier run and when it finished.
    pub run: (String, String),
    /// The path the input had then.
    pub was: String,
    /// Bytes the earlier run read, and the input's size now.
    pub imported_bytes: u64,
    pub size: u64,
}

/// How an import treats inputs the lake already holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reimport {
    /// Skip them (the default: a re-run never duplicates rows).
    #[default]
    Skip,
    /// Import them again (`--force`).
    Force,
}

/// Imports `inputs` into the lake at `lake` (created if missing).
///
/// Before reading anything it recovers interrupted imports (see `silt_lake::imports`) and, with
/// [`Reimport::Skip`], leaves out every input whose content an earlier run imported, and every
/// input that grew since an earlier run imported its start ([`Grown`]). Every file
/// this run publishes is journaled before it becomes visible; when the run ends, the inputs
/// that gave rows are recorded as imported (an input that gave none, e.g. one given the wrong
/// format, can be imported again without `--force`).
pub fn import(
    inputs: Vec<Input>,
    pipeline: Pipeline,
    lake: &Path,
    cfg: WriterConfig,
    reimport: Reimport,
    observer: &mut dyn Observer,
) -> anyhow::Result<ImportOutcome> {
    let log = ImportLog::open(lake)?.with_table_format(cfg.table_format);
    let writer = LakeWriter::new(lake, cfg)?;
    let recovered = log.recover()?;
    // A compaction a crash interrupted is finished (or undone) now, so that other engines' globs
    // see the lake right again.
    let replacements = silt_lake::replace::recover_if_idle(lake, silt_lake::replace::RECORD_GRACE)?
        .unwrap_or_default();
    let Selected {
        kept,
        ids,
        skipped,
        grown,
    } = select_inputs(inputs, &log.runs()?, reimport)?;
    let journal = log.begin()?;
    let mut writer = writer.with_publisher(journal.publisher(Box::new(DirectoryPublisher))?);
    let (_source, run) = pipeline.run(FileSource::new(kept), &mut writer, observer)?;
    let summary = writer.finish()?;
    let imported = imported_inputs(&run, &ids);
    let run_id = journal.id.clone();
    journal.finish(imported, &summary.files)?;
    Ok(ImportOutcome {
        summary,
        run,
        skipped,
        grown,
        recovered,
        replacements,
        run_id,
    })
}

/// What [`select_inputs`] made of the inputs.
struct Selected {
    /// The inputs to read, and their identities (in the same order).
    kept: Vec<Input>,
    ids: Vec<Option<InputIdentity>>,
    skipped: Vec<Skipped>,
    grown: Vec<Grown>,
}

/// With [`Reimport::Skip`], leaves out every input whose content a run in `done` imported or
/// that an earlier argument already gives, and every input whose start a run in `done` imported.
fn select_inputs(
    inputs: Vec<Input>,
    done: &[RunRecord],
    reimport: Reimport,
) -> anyhow::Result<Selected> {
    let mut out = Selected {
        kept: Vec::new(),
        ids: Vec::new(),
        skipped: Vec::new(),
        grown: Vec::new(),
    };
    for input in inputs {
        let id = match input.path() {
            Some(p) => InputIdentity::of_file(p)?,
            None => None,
        };
        if let (Some(id), Some(p), Reimport::Skip) = (&id, input.path(), reimport) {
            let before = done
                .iter()
                .rev()
                .find_map(|r| r.inputs.iter().find(|i| i.same_content(id)).map(|i| (r, i)));
            let path = p.to_path_buf();
            if let Some((r, was)) = before {
                out.skipped.push(Skipped {
                    path,
                    run: Some((r.run.clone(), r.finished.clone())),
                    was: was.path.clone(),
                });
                continue;
            }
            if let Some(twice) = out.ids.iter().flatten().find(|i| i.same_content(id)) {
                out.skipped.push(Skipped {
                    path,
                    run: None,
                    was: twice.path.clone(),
                });
                continue;
            }
            if let Some((r, was)) = silt_lake::imports::grown_from(p, id, done)? {
                out.grown.push(Grown {
                    path,
                    run: (r.run.clone(), r.finished.clone()),
                    was: was.path.clone(),
                    imported_bytes: was.size,
                    size: id.size,
                });
                continue;
            }
        }
        out.kept.push(input);
        out.ids.push(id);
    }
    Ok(out)
}

/// The identities of the inputs that gave rows (checkpoint positions are input indexes: the
/// file source's rule).
fn imported_inputs(run: &RunReport, ids: &[Option<InputIdentity>]) -> Vec<InputIdentity> {
    run.streams
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| ids.get(s.checkpoint.position as usize).cloned().flatten())
        .collect()
}

/// [`import`] into the lake `lake` names: a directory, or an object store
/// ([`silt_lake::remote`]). On an object store the files are written and sealed in a staging
/// directory under `$TMPDIR` (removed when the import ends, or by a later import when this one
/// was killed: [`silt_lake::scratch`]), then uploaded one by one as they
/// are finished; the import record keeps the same promises (see
/// [`silt_lake::remote::record`]).
pub fn import_into(
    inputs: Vec<Input>,
    pipeline: Pipeline,
    lake: &LakeRoot,
    cfg: WriterConfig,
    reimport: Reimport,
    observer: &mut dyn Observer,
) -> anyhow::Result<ImportOutcome> {
    let remote = match lake {
        LakeRoot::Dir(dir) => return import(inputs, pipeline, dir, cfg, reimport, observer),
        LakeRoot::Remote(r) => r,
    };
    let staging = silt_lake::scratch::ScratchDir::new(None, "silt-staging-")
        .context("cannot create a staging directory for the upload (set TMPDIR to a disk with room for one file per table and partition being written)")?;
    let pulled = record::pull_records(remote, staging.path())?;
    let format = cfg.table_format;
    // Under `--table-format delta` every table is written as a Delta table's; otherwise only
    // those that have a log already (one listing request per table).
    let delta_tables = match format {
        silt_lake::TableFormat::Delta => Vec::new(),
        silt_lake::TableFormat::Hive => silt_lake::delta::remote_delta_tables(remote)?,
    };
    let writer = LakeWriter::new(staging.path(), cfg)?.with_delta_tables(delta_tables);
    let log = RemoteImportLog::new(remote.clone()).with_table_format(format);
    let recovered = log.recover()?;
    let replacements =
        silt_lake::remote::replace::recover_if_idle(remote, silt_lake::replace::RECORD_GRACE)?
            .unwrap_or_default();
    let Selected {
        kept,
        ids,
        skipped,
        grown,
    } = select_inputs(inputs, &log.runs()?, reimport)?;
    let journal = log.begin()?;
    let mut writer = writer.with_publisher(journal.publisher(staging.path()));
    let (_source, run) = pipeline.run(FileSource::new(kept), &mut writer, observer)?;
    let mut summary = writer.finish()?;
    let pushed = record::push_records(remote, staging.path(), &pulled)?;
    for p in &mut summary.rejects_files {
        if let Some((_, up)) = pushed.iter().find(|(local, _)| local == p) {
            *p = up.clone();
        }
    }
    let imported = imported_inputs(&run, &ids);
    let run_id = journal.id.clone();
    journal.finish(imported, &summary.files)?;
    Ok(ImportOutcome {
        summary,
        run,
        skipped,
        grown,
        recovered,
        replacements,
        run_id,
    })
}

/// What a conversion did.
#[derive(Debug)]
pub struct ConvertOutcome {
    pub summary: SingleSummary,
    pub run: RunReport,
}

/// Converts `inputs` into the one file `output` (all inputs are one table, named by the first);
/// rejects go to `<rejects_root>/_rejects/`.
pub fn convert(
    inputs: Vec<Input>,
    pipeline: Pipeline,
    output: &Path,
    cfg: WriterConfig,
    rejects_root: &Path,
    observer: &mut dyn Observer,
) -> anyhow::Result<ConvertOutcome> {
    let mut writer = SingleFileWriter::new(output, cfg, rejects_root)?;
    let (_source, run) = {
        let mut one = OneTable::new(&mut writer);
        pipeline.run(FileSource::new(inputs), &mut one, observer)?
    };
    let summary = writer.finish()?;
    Ok(ConvertOutcome { summary, run })
}

/// Decodes the one file at `path` (gzip undone) with `format` into `out`, on the caller's
/// thread, without detection, transforms or a sink's commits: for tests and tools that want a
/// format's rows as they are.
pub fn read_file(
    format: &silt_core::FormatSpec,
    path: &Path,
    options: &silt_core::FormatOptions,
    out: &mut dyn silt_core::Emit,
) -> anyhow::Result<()> {
    let input = Input::File(path.to_path_buf());
    let mut r = input.open(Default::default())?;
    let mut decoder = (format.open)(options, &input.info())?;
    decoder.read(&mut r, out)
}
