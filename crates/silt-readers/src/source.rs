//! Opening inputs: files, directories (walked recursively, sorted, hidden files skipped),
//! gzip (recognised by its magic bytes, not its name) and standard input (`-`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use flate2::read::MultiGzDecoder;
use silt_core::SourceInfo;

/// One input to read.
#[derive(Debug, Clone)]
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

    /// Opens the input, transparently decompressing gzip. The returned reader counts the raw
    /// (on-disk) bytes it consumed in `counter`.
    pub fn open(&self, counter: ByteCounter) -> anyhow::Result<Box<dyn BufRead + Send>> {
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

/// Shared counter of raw bytes read, for progress and the "bytes in" figure.
pub type ByteCounter = std::sync::Arc<std::sync::atomic::AtomicU64>;

struct Counting<R> {
    inner: R,
    counter: ByteCounter,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Expands command-line arguments into inputs: `-` is stdin, a directory is walked recursively
/// (files sorted by path, names starting with `.` skipped), a file is itself.
pub fn expand(args: &[PathBuf]) -> anyhow::Result<Vec<Input>> {
    let mut out = Vec::new();
    for a in args {
        if a.as_os_str() == "-" {
            out.push(Input::Stdin);
        } else if a.is_dir() {
            let mut files = Vec::new();
            walk(a, &mut files)?;
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
