//! The file source: files, directories (walked recursively, sorted, hidden files skipped),
//! gzip (recognised by its magic bytes, not its name) and standard input (`-`).
//!
//! Each input is one stream: opened (gzip undone), its first bytes peeked for format detection
//! (without a second pass over the data), decoded, and followed by a checkpoint whose position
//! is the input's index. An input that cannot be opened, whose format cannot be told, or that
//! breaks off (an I/O error, a corrupt gzip stream) becomes a reject of the whole input (line 0)
//! with what was decoded before it kept, and the other inputs go on.
//!
//! Zero padding at the start of a text input (a log truncated by logrotate's `copytruncate`
//! while its writer kept its offset: a hole as long as the file was) is skipped before the
//! format is detected or the input judged binary, however long it is, and reported as a reject
//! of line 1 (`silt_core::decode`'s padding rule, which the line framer applies further on).
//! Before, such an input was refused whole for the NUL bytes in its first line.
//!
//! Touches only the files it is given (read-only) and standard input.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use flate2::read::MultiGzDecoder;
use silt_core::decode::{nul_run, padding_reason};
use silt_core::format::PROBE_BYTES;
use silt_core::Reject;
use silt_core::SourceInfo;

use super::{whole_input_reject, Checkpoint, Opened, Source, SourceContext};

/// One input to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    pub fn info(&self) -> SourceInfo {
        match self {
            Input::Stdin => SourceInfo::stdin(),
            Input::File(p) => SourceInfo::from_path(p),
        }
    }

    /// Size on disk (compressed size for gzip files); `None` for stdin.
    pub fn size(&self) -> Option<u64> {
        match self {
            Input::Stdin => None,
            Input::File(p) => std::fs::metadata(p).ok().map(|m| m.len()),
        }
    }

    /// The path, for a file.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Input::Stdin => None,
            Input::File(p) => Some(p),
        }
    }

    /// Opens the input, transparently decompressing gzip. The returned reader counts the raw
    /// (on-disk) bytes it consumed in `counter`.
    pub fn open(&self, counter: Arc<AtomicU64>) -> anyhow::Result<Box<dyn BufRead + Send>> {
        let raw: Box<dyn Read + Send> = match self {
            Input::Stdin => Box::new(io::stdin()),
            Input::File(p) => Box::new(File::open(p).with_context(|| {
                format!(
                    "cannot open {}: check the path and permissions",
                    p.display()
                )
            })?),
        };
        let mut buf = BufReader::with_capacity(
            1 << 20,
            Counting {
                inner: raw,
                counter,
            },
        );
        let is_gzip = buf.fill_buf()?.starts_with(&[0x1f, 0x8b]);
        Ok(if is_gzip {
            Box::new(BufReader::with_capacity(1 << 20, MultiGzDecoder::new(buf)))
        } else {
            Box::new(buf)
        })
    }
}

struct Counting<R> {
    inner: R,
    counter: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Expands command-line arguments into inputs: `-` is stdin, a directory is walked recursively
/// (files sorted by path, names starting with `.` skipped; a directory with no file is an
/// error), a file is itself.
pub fn expand(args: &[PathBuf]) -> anyhow::Result<Vec<Input>> {
    let mut out = Vec::new();
    for a in args {
        if a.as_os_str() == "-" {
            out.push(Input::Stdin);
        } else if a.is_dir() {
            let mut files = Vec::new();
            walk(a, &mut files)?;
            anyhow::ensure!(
                !files.is_empty(),
                "{}: the directory holds no files to read (names starting with '.' are skipped); \
give a directory with logs in it, or the files themselves",
                a.display()
            );
            files.sort();
            out.extend(files.into_iter().map(Input::File));
        } else if a.exists() {
            out.push(Input::File(a.clone()));
        } else {
            anyhow::bail!("{}: no such file or directory", a.display());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let e = e?;
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if e.file_type()?.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// A stream whose first bytes were peeked: those bytes again, then the rest.
pub type Peeked = io::Chain<Cursor<Vec<u8>>, Box<dyn BufRead + Send>>;

/// Reads up to [`PROBE_BYTES`] from the start of `r` and gives back a reader that still yields
/// every byte (the peeked ones first), so detection costs no second pass and no copy of the rest.
pub fn peek(mut r: Box<dyn BufRead + Send>) -> io::Result<(Vec<u8>, Peeked)> {
    let mut head = Vec::with_capacity(PROBE_BYTES.min(64 << 10));
    (&mut r).take(PROBE_BYTES as u64).read_to_end(&mut head)?;
    Ok((head.clone(), Cursor::new(head).chain(r)))
}

/// Reads past the NUL bytes `stream` starts with; returns how many there were.
fn skip_padding(stream: &mut impl BufRead) -> io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        let buf = match stream.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let n = nul_run(buf);
        if n == 0 {
            return Ok(skipped);
        }
        stream.consume(n);
        skipped += n as u64;
    }
}

/// Files and standard input; see the module documentation.
pub struct FileSource {
    inputs: Vec<Input>,
    /// Indexes of the inputs whose checkpoint came back (their data is durable).
    acknowledged: Vec<usize>,
}

impl FileSource {
    pub fn new(inputs: Vec<Input>) -> Self {
        Self {
            inputs,
            acknowledged: Vec::new(),
        }
    }

    /// The inputs whose data the sink committed (all of them after a successful run).
    pub fn acknowledged_inputs(&self) -> impl Iterator<Item = &Input> {
        self.acknowledged.iter().map(|&i| &self.inputs[i])
    }

    fn read_one(&self, i: usize, ctx: &mut SourceContext<'_>) -> anyhow::Result<()> {
        let input = &self.inputs[i];
        let info = input.info();
        let r = match input.open(ctx.raw_bytes()) {
            Ok(r) => r,
            Err(e) => {
                ctx.out()
                    .reject(whole_input_reject(&info.display, format!("{e:#}")))?;
                return Ok(());
            }
        };
        let mut padding = 0;
        let mut peeked = peek(r);
        if matches!(&peeked, Ok((head, _)) if head.first() == Some(&0)) && ctx.may_be_text() {
            let (_, mut stream) = peeked.expect("matched Ok above");
            peeked = skip_padding(&mut stream).and_then(|n| {
                padding = n;
                peek(Box::new(stream))
            });
        }
        let (head, mut stream) = match peeked {
            Ok(x) => x,
            Err(e) => {
                ctx.out().reject(whole_input_reject(
                    &info.display,
                    format!("stopped reading: {e}"),
                ))?;
                return Ok(());
            }
        };
        if padding > 0 {
            ctx.out().reject(Reject {
                source: info.display.clone(),
                line: 1,
                reason: padding_reason(padding),
                raw: Vec::new(),
                table: None,
            })?;
        }
        match ctx.open(&info, &head)? {
            Opened::Decoder(_, mut d) => ctx.read_stream(&info, d.as_mut(), &mut stream),
            Opened::Empty | Opened::Rejected => Ok(()),
        }
    }
}

impl Source for FileSource {
    fn describe(&self) -> String {
        match self.inputs.as_slice() {
            [Input::Stdin] => "standard input".into(),
            [Input::File(p)] => p.display().to_string(),
            many => format!("{} inputs", many.len()),
        }
    }

    fn size_hint(&self) -> Option<u64> {
        self.inputs.iter().map(Input::size).sum()
    }

    fn run(&mut self, ctx: &mut SourceContext<'_>) -> anyhow::Result<()> {
        for i in 0..self.inputs.len() {
            if ctx.stopping() {
                break;
            }
            self.read_one(i, ctx)?;
            let stream: Arc<str> = self.inputs[i].info().display.into();
            ctx.checkpoint(Checkpoint {
                stream,
                position: i as u64,
            })?;
            for c in ctx.acknowledged() {
                self.acknowledge(&c);
            }
        }
        Ok(())
    }

    fn acknowledge(&mut self, c: &Checkpoint) {
        let i = c.position as usize;
        if i < self.inputs.len() && !self.acknowledged.contains(&i) {
            self.acknowledged.push(i);
        }
    }
}
