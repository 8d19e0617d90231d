"""A FUSE filesystem for the fault tests (test/fault): a pass-through to a backing directory
that keeps file contents in memory until fsync/fdatasync, like an OS page cache that a power
cut wipes. Killing this process (or SIGUSR1) therefore drops every unsynced write: a power
loss. Modelled on LazyFS (the fault-injection filesystem Jepsen uses), plus:

- fsync writes only the dirty tail of a file (LevelDB's log is append-only), not all of it;
- a control file makes writes fail on demand: its content is "ok", "enospc" (disk full: data
  writes, creates and syncs fail with ENOSPC), "erofs" (every change fails with EROFS) or
  "stall" (fsync blocks until the mode changes: a hung disk or network volume).

Usage: /usr/bin/python3 lazyfs.py <backing-dir> <mountpoint> <control-file>
Creates, renames, unlinks and mkdirs reach the backing dir at once (optimistic: ext4 can lose
an unsynced rename). No torn or reordered writes. Single-threaded.
"""
import errno
import os
import signal
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations


class Entry:
    """A file's content as the page cache holds it; `dirty_from` is the first unsynced byte."""

    def __init__(self, data, dirty_from=None):
        self.data = data
        self.dirty_from = dirty_from

    def touch(self, offset):
        self.dirty_from = offset if self.dirty_from is None else min(self.dirty_from, offset)


class LazyFs(Operations):
    def __init__(self, root, control):
        self.root, self.control = root, control
        self.cache = {}  # path -> Entry
        self.opened = {}  # path -> open handle count
        self._mu = threading.RLock()  # not "lock": fusepy dispatches the lock operation by name
        self._mode, self._mode_mtime = "ok", None
        signal.signal(signal.SIGUSR1, self._power_cut)

    def _power_cut(self, *_):
        with self._mu:
            self.cache.clear()

    def _mode_now(self):
        try:
            st = os.stat(self.control)
        except OSError:
            return "ok"
        if st.st_mtime_ns != self._mode_mtime:
            with open(self.control) as f:
                self._mode = f.read().strip() or "ok"
            self._mode_mtime = st.st_mtime_ns
        return self._mode

    def _check(self, data_write):
        mode = self._mode_now()
        if mode == "erofs":
            raise FuseOSError(errno.EROFS)
        if mode == "enospc" and data_write:
            raise FuseOSError(errno.ENOSPC)

    def _p(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def _load(self, p):
        entry = self.cache.get(p)
        if entry is None:
            with open(self._p(p), "rb") as f:
                entry = self.cache[p] = Entry(bytearray(f.read()))
        return entry

    def getattr(self, p, fh=None):
        try:
            st = os.lstat(self._p(p))
        except OSError as e:
            raise FuseOSError(e.errno)
        d = {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")}
        with self._mu:
            if p in self.cache:
                d["st_size"] = len(self.cache[p].data)
        return d

    def statfs(self, p):
        st = os.statvfs(self._p(p))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def readdir(self, p, fh):
        return [".", ".."] + os.listdir(self._p(p))

    def mkdir(self, p, mode):
        self._check(False)
        os.mkdir(self._p(p), mode)

    def rmdir(self, p):
        self._check(False)
        os.rmdir(self._p(p))

    def unlink(self, p):
        self._check(False)
        with self._mu:
            self.cache.pop(p, None)
        os.unlink(self._p(p))

    def rename(self, a, b):
        self._check(False)
        with self._mu:
            os.rename(self._p(a), self._p(b))
            if a in self.cache:
                self.cache[b] = self.cache.pop(a)
            else:
                self.cache.pop(b, None)

    def create(self, p, mode, fi=None):
        self._check(True)
        os.close(os.open(self._p(p), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode))
        with self._mu:
            self.cache[p] = Entry(bytearray(), 0)
            self.opened[p] = self.opened.get(p, 0) + 1
        return 0

    def open(self, p, flags):
        with self._mu:
            if flags & os.O_TRUNC:
                self._check(True)
                self.cache[p] = Entry(bytearray(), 0)
            self.opened[p] = self.opened.get(p, 0) + 1
        return 0

    def read(self, p, size, off, fh):
        with self._mu:
            if p in self.cache:
                return bytes(self.cache[p].data[off:off + size])
        with open(self._p(p), "rb") as f:
            f.seek(off)
            return f.read(size)

    def write(self, p, data, off, fh):
        self._check(True)
        with self._mu:
            entry = self._load(p)
            b = entry.data
            old_len = len(b)
            if old_len < off:
                b.extend(b"\0" * (off - old_len))
            b[off:off + len(data)] = data
            entry.touch(min(off, old_len))
        return len(data)

    def truncate(self, p, length, fh=None):
        self._check(True)
        with self._mu:
            entry = self._load(p)
            b = entry.data
            old_len = len(b)
            if old_len > length:
                del b[length:]
            else:
                b.extend(b"\0" * (length - old_len))
            entry.touch(min(length, old_len))

    def fsync(self, p, datasync, fh):
        while self._mode_now() == "stall":
            time.sleep(0.05)
        with self._mu:
            entry = self.cache.get(p)
            if entry is None or entry.dirty_from is None:
                return 0
            self._check(True)
            with open(self._p(p), "r+b") as f:
                f.seek(entry.dirty_from)
                f.write(entry.data[entry.dirty_from:])
                f.truncate(len(entry.data))
                f.flush()
                os.fsync(f.fileno())
            entry.dirty_from = None
        return 0

    def flush(self, p, fh):
        return 0  # close() is not durability

    def release(self, p, fh):
        with self._mu:
            left = self.opened.get(p, 1) - 1
            if left > 0:
                self.opened[p] = left
            else:
                self.opened.pop(p, None)
                entry = self.cache.get(p)
                if entry is not None and entry.dirty_from is None:
                    del self.cache[p]  # clean and closed: the backing file is the truth
        return 0


if __name__ == "__main__":
    backing, mountpoint, control = sys.argv[1:4]
    FUSE(LazyFs(backing, control), mountpoint, foreground=True, nothreads=True)
