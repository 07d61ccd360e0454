"""Peak RSS of a benchmark's child process, from the rusage that os.wait4 returns.

Linux carries the high-water mark of the memory a child was forked from into the child's
ru_maxrss (the forked copy of the parent counts until exec), so a child's figure is the larger of
its own peak and its parent's peak at the fork. It is the child's own only when it exceeds the
parent's. A benchmark's parent therefore stays small (large files are streamed, DuckDB runs in a
child of its own), and `child_peak` warns when a figure could be the parent's.
"""
import resource
import sys


def child_peak(ru, cmd):
    """The child's peak RSS in bytes from its wait4 rusage; warns on stderr when it is not above
    this process's own peak, which it may then be."""
    child = ru.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    if child <= parent:
        print(f"peak RSS of {' '.join(map(str, cmd))[:120]} not measurable: {child / 2**20:.0f} MiB "
              f"is not above the benchmark process's own peak ({parent / 2**20:.0f} MiB)",
              file=sys.stderr, flush=True)
    return child
