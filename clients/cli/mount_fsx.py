#!/usr/bin/env python3
"""An fsx-style exerciser for a mounted filesystem (cowkv mount).

Random operations through plain syscalls on a directory of the mount, the
same operations on an in-memory model, and after every step a comparison of
the touched file with the model (every file and every name every
--full-every steps). Any difference, or a syscall that fails where the model
says it must succeed (or succeeds where it must fail), stops the run with the
seed, the step and the operation log, so the run can be replayed:

  mount_fsx.py --dir /mnt/c/fsx --steps 2000 --seed 7

--planted-bug makes the model itself wrong (a write's last byte is dropped
from the model), to show that the comparison catches a wrong file.
"""

import argparse
import ctypes
import errno
import os
import random
import sys

MAX_FILE = 1 << 20
FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE, FALLOC_ZERO_RANGE = 0x01, 0x02, 0x10
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd, mode, off, length):
    if _libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Model:
    def __init__(self):
        self.files = {}  # name -> inode id
        self.data = {}  # inode id -> bytearray
        self.xattrs = {}  # inode id -> {name: value}
        self.next = 1

    def new_inode(self):
        i = self.next
        self.next += 1
        self.data[i] = bytearray()
        self.xattrs[i] = {}
        return i

    def drop_name(self, name):
        ino = self.files.pop(name)
        if ino not in self.files.values():
            del self.data[ino]
            del self.xattrs[ino]


class Fsx:
    def __init__(self, root, seed, planted_bug, use_xattr, use_falloc):
        self.root = root
        self.rng = random.Random(seed)
        self.m = Model()
        self.log = []
        self.planted_bug = planted_bug
        self.use_xattr = use_xattr
        self.use_falloc = use_falloc

    def path(self, name):
        return os.path.join(self.root, name)

    def fail(self, what):
        tail = "\n  ".join(self.log[-25:])
        raise AssertionError(f"{what}\n last operations:\n  {tail}")

    def pick_name(self, existing=True):
        """An existing name (existing=True; the caller checked there is one),
        or any name of the 12 this run uses."""
        if existing:
            return self.rng.choice(sorted(self.m.files))
        return f"f{self.rng.randrange(12)}"

    # Each op returns the names whose files it may have changed.
    def op_create(self):
        n = self.pick_name(existing=False)
        self.log.append(f"create {n}")
        try:
            fd = os.open(self.path(n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            ok = True
        except FileExistsError:
            ok = False
        if ok != (n not in self.m.files):
            self.fail(f"create {n}: syscall ok={ok}, model has it={n in self.m.files}")
        if ok:
            self.m.files[n] = self.m.new_inode()
        return [n]

    def op_write(self):
        if not self.m.files:
            return self.op_create()
        n = self.pick_name()
        ino = self.m.files[n]
        size = len(self.m.data[ino])
        off = self.rng.choice([0, size, self.rng.randrange(size + 1),
                               self.rng.randrange(MAX_FILE // 2), 4096 * self.rng.randrange(64)])
        ln = self.rng.choice([1, 7, 512, 4096, self.rng.randrange(1, 70000)])
        ln = min(ln, MAX_FILE - off) if off < MAX_FILE else 1
        buf = bytes(self.rng.getrandbits(8) for _ in range(min(ln, 64))) * (ln // 64 + 1)
        buf = buf[:ln]
        self.log.append(f"write {n} off={off} len={ln}")
        fd = os.open(self.path(n), os.O_WRONLY)
        try:
            done = os.pwrite(fd, buf, off)
        finally:
            os.close(fd)
        if done != ln:
            self.fail(f"short write {done} of {ln}")
        d = self.m.data[ino]
        if off > len(d):
            d.extend(b"\0" * (off - len(d)))
        model_buf = buf[:-1] if self.planted_bug and ln > 1 else buf
        d[off:off + len(model_buf)] = model_buf
        return [n]

    def op_truncate(self):
        if not self.m.files:
            return []
        n = self.pick_name()
        ino = self.m.files[n]
        size = len(self.m.data[ino])
        new = self.rng.choice([0, size // 2, size + self.rng.randrange(10000),
                               self.rng.randrange(MAX_FILE)])
        self.log.append(f"truncate {n} {new}")
        os.truncate(self.path(n), new)
        d = self.m.data[ino]
        if new < len(d):
            del d[new:]
        else:
            d.extend(b"\0" * (new - len(d)))
        return [n]

    def op_rename(self):
        if not self.m.files:
            return []
        a = self.pick_name()
        b = self.pick_name(existing=self.rng.random() < 0.4)
        self.log.append(f"rename {a} {b}")
        if b in self.m.files and self.m.files[a] == self.m.files[b]:
            # Two names of one inode: rename(2) does nothing, both stay.
            os.rename(self.path(a), self.path(b))
            return [a, b]
        os.rename(self.path(a), self.path(b))
        ino = self.m.files[a]
        if b in self.m.files:
            self.m.drop_name(b)
        del self.m.files[a]
        self.m.files[b] = ino
        return [a, b]

    def op_link(self):
        if not self.m.files:
            return []
        a = self.pick_name()
        b = self.pick_name(existing=False)
        self.log.append(f"link {a} {b}")
        try:
            os.link(self.path(a), self.path(b))
            ok = True
        except FileExistsError:
            ok = False
        if ok != (b not in self.m.files):
            self.fail(f"link {a} {b}: syscall ok={ok}")
        if ok:
            self.m.files[b] = self.m.files[a]
        return [a, b]

    def op_unlink(self):
        if not self.m.files:
            return []
        n = self.pick_name()
        self.log.append(f"unlink {n}")
        os.unlink(self.path(n))
        self.m.drop_name(n)
        return [n]

    def op_fsync(self):
        if not self.m.files:
            return []
        n = self.pick_name()
        self.log.append(f"fsync {n}")
        fd = os.open(self.path(n), os.O_RDONLY)
        try:
            (os.fdatasync if self.rng.random() < 0.3 else os.fsync)(fd)
        finally:
            os.close(fd)
        return [n]

    def op_copy_range(self):
        if len(self.m.files) < 1:
            return []
        a = self.pick_name()
        b = self.pick_name()
        src = self.m.data[self.m.files[a]]
        if not src:
            return []
        aligned = self.rng.random() < 0.5
        unit = 4096 if aligned else 1
        off_in = unit * self.rng.randrange(max(1, len(src) // unit))
        off_out = unit * self.rng.randrange(64)
        ln = unit * self.rng.randrange(1, 40) if aligned else self.rng.randrange(1, 20000)
        if self.m.files[a] == self.m.files[b] and off_in < off_out + ln and off_out < off_in + ln:
            return []  # overlapping copy within one file: EINVAL
        self.log.append(f"copy_range {a}@{off_in} -> {b}@{off_out} len={ln}")
        fi = os.open(self.path(a), os.O_RDONLY)
        fo = os.open(self.path(b), os.O_WRONLY)
        try:
            # One call: a loop would read back what this call wrote when the
            # source is the destination. A short count is allowed.
            total = os.copy_file_range(fi, fo, ln, off_in, off_out)
        finally:
            os.close(fi)
            os.close(fo)
        want = bytes(src[off_in:off_in + ln])
        if total > len(want) or (total == 0 and want):
            self.fail(f"copy_file_range copied {total}, model has {len(want)} to copy")
        chunk = want[:total]
        d = self.m.data[self.m.files[b]]
        if off_out > len(d) and chunk:
            d.extend(b"\0" * (off_out - len(d)))
        d[off_out:off_out + len(chunk)] = chunk
        return [b]

    def op_fallocate(self):
        if not self.m.files:
            return []
        n = self.pick_name()
        d = self.m.data[self.m.files[n]]
        mode = self.rng.choice([0, FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE,
                                FALLOC_ZERO_RANGE, FALLOC_ZERO_RANGE | FALLOC_KEEP_SIZE])
        unit = 4096 if self.rng.random() < 0.5 else 1
        off = unit * self.rng.randrange(max(1, (len(d) + 65536) // unit))
        ln = unit * self.rng.randrange(1, 64) if unit > 1 else self.rng.randrange(1, 70000)
        off = min(off, MAX_FILE - ln)
        self.log.append(f"fallocate {n} mode={mode:#x} off={off} len={ln}")
        fd = os.open(self.path(n), os.O_WRONLY)
        try:
            fallocate(fd, mode, off, ln)
        finally:
            os.close(fd)
        end = off + ln
        if mode & (FALLOC_PUNCH_HOLE | FALLOC_ZERO_RANGE):
            lo, hi = min(off, len(d)), min(end, len(d))
            d[lo:hi] = b"\0" * (hi - lo)
        if not mode & FALLOC_KEEP_SIZE and end > len(d):
            d.extend(b"\0" * (end - len(d)))
        return [n]

    def op_seek(self):
        if not self.m.files:
            return []
        n = self.pick_name()
        d = self.m.data[self.m.files[n]]
        if not d:
            return []
        off = self.rng.randrange(len(d))
        self.log.append(f"seek {n} {off}")
        fd = os.open(self.path(n), os.O_RDONLY)
        try:
            data_at = os.lseek(fd, off, os.SEEK_DATA)
            hole_at = os.lseek(fd, off, os.SEEK_HOLE)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            data_at = hole_at = None
        finally:
            os.close(fd)
        # Holes read as zeros: any byte in [off, data) must be zero, the
        # hole found must start at or after off and be inside the file.
        if data_at is not None:
            if data_at < off or any(d[off:data_at]):
                self.fail(f"SEEK_DATA from {off} gave {data_at}: skipped data")
        if hole_at is not None and not off <= hole_at <= len(d):
            self.fail(f"SEEK_HOLE from {off} gave {hole_at}, size {len(d)}")
        return []

    def op_xattr(self):
        if not self.m.files:
            return []
        n = self.pick_name()
        ino = self.m.files[n]
        name = f"user.a{self.rng.randrange(4)}"
        p = self.path(n)
        if self.rng.random() < 0.7:
            val = bytes(self.rng.getrandbits(8) for _ in range(self.rng.randrange(0, 300)))
            self.log.append(f"setxattr {n} {name} len={len(val)}")
            os.setxattr(p, name, val)
            self.m.xattrs[ino][name] = val
        else:
            self.log.append(f"removexattr {n} {name}")
            try:
                os.removexattr(p, name)
                ok = True
            except OSError as e:
                if e.errno != errno.ENODATA:
                    raise
                ok = False
            if ok != (name in self.m.xattrs[ino]):
                self.fail(f"removexattr {name}: ok={ok}")
            self.m.xattrs[ino].pop(name, None)
        return [n]

    def verify(self, names):
        for n in names:
            p = self.path(n)
            if n not in self.m.files:
                if os.path.lexists(p):
                    self.fail(f"{n} exists, model says it does not")
                continue
            ino = self.m.files[n]
            want = bytes(self.m.data[ino])
            with open(p, "rb") as f:
                got = f.read()
            if got != want:
                at = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                          min(len(got), len(want)))
                self.fail(f"{n}: {len(got)} bytes, model {len(want)}; first difference at {at}")
            if self.use_xattr:
                got_x = {x: os.getxattr(p, x) for x in os.listxattr(p) if x.startswith("user.")}
                if got_x != self.m.xattrs[ino]:
                    self.fail(f"{n}: xattrs {sorted(got_x)} != model {sorted(self.m.xattrs[ino])}")

    def verify_all(self):
        names = sorted(os.listdir(self.root))
        if names != sorted(self.m.files):
            self.fail(f"names {names} != model {sorted(self.m.files)}")
        self.verify(names)
        # Hard links: one inode number per model inode.
        by_ino = {}
        for n in names:
            by_ino.setdefault(self.m.files[n], set()).add(os.stat(self.path(n)).st_ino)
        for ino, seen in by_ino.items():
            if len(seen) != 1:
                self.fail(f"names of one inode have inode numbers {seen}")

    def run(self, steps, full_every):
        ops = [(self.op_create, 14), (self.op_write, 30), (self.op_truncate, 8),
               (self.op_rename, 10), (self.op_link, 6), (self.op_unlink, 6),
               (self.op_fsync, 6), (self.op_copy_range, 8), (self.op_seek, 6)]
        if self.use_xattr:
            ops.append((self.op_xattr, 6))
        if self.use_falloc:
            ops.append((self.op_fallocate, 8))
        funcs = [f for f, w in ops for _ in range(w)]
        for step in range(steps):
            changed = self.rng.choice(funcs)()
            self.verify(changed)
            if full_every and (step + 1) % full_every == 0:
                self.verify_all()
        self.verify_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="an empty directory on the mount")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--full-every", type=int, default=50)
    ap.add_argument("--no-xattr", action="store_true")
    ap.add_argument("--no-fallocate", action="store_true")
    ap.add_argument("--planted-bug", action="store_true",
                    help="drop a write's last byte from the model: the run must fail")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    if os.listdir(a.dir):
        sys.exit(f"mount_fsx: {a.dir} is not empty")
    fsx = Fsx(a.dir, a.seed, a.planted_bug, not a.no_xattr, not a.no_fallocate)
    try:
        fsx.run(a.steps, a.full_every)
    except AssertionError as e:
        print(f"mount_fsx: seed {a.seed}: MISMATCH: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"mount_fsx: seed {a.seed}: {a.steps} steps, {len(fsx.m.files)} names, all equal")


if __name__ == "__main__":
    main()
