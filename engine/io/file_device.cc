// FileDevice: pread/pwrite/fdatasync over one file descriptor (see
// file_device.h). Every system call is retried on EINTR and on short
// transfers, so a Status is either OK for all `n` bytes or an error.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cowkv/device.h"
#include "engine/base/check.h"
#include "engine/base/status.h"

namespace cowkv {
namespace {

// O_DIRECT alignment of offsets, lengths and buffer addresses. 4096 is a
// multiple of every logical block size Linux devices report in practice.
constexpr uint64_t kDirectAlign = 4096;
// Bound on one bounce buffer; longer unaligned requests go in chunks.
constexpr uint64_t kBounceBytesMax = uint64_t{1} << 20;
static_assert(kBounceBytesMax % kDirectAlign == 0,
              "bounce chunks must be whole aligned blocks");

uint64_t AlignDown(uint64_t x) { return x - x % kDirectAlign; }
uint64_t AlignUp(uint64_t x) { return AlignDown(x + kDirectAlign - 1); }

bool IsAligned(uint64_t offset, const void* buf, size_t n) {
  return offset % kDirectAlign == 0 && n % kDirectAlign == 0 &&
         reinterpret_cast<uintptr_t>(buf) % kDirectAlign == 0;
}

std::string ErrnoText(int err) {
  char text[256];
  // GNU strerror_r returns a pointer to the message (maybe not into `text`).
  return std::string(strerror_r(err, text, sizeof(text)));
}

// The Status for a failed pread/pwrite/fdatasync; `what` names the call, the
// path and the range. ENOSPC (and EDQUOT, the same condition for one user) is
// RESOURCE_EXHAUSTED, anything else INTERNAL.
absl::Status IoError(int err, absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", ErrnoText(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status IoError(int err, absl::string_view op, const std::string& path,
                     uint64_t offset, size_t n) {
  return IoError(err, absl::StrCat(op, " ", path, " offset=", offset, " len=", n));
}

// The Status for a failed open/create/stat of `path`.
absl::Status OpenError(int err, absl::string_view op, const std::string& path,
                       bool direct_io) {
  std::string msg = absl::StrCat(op, " ", path, ": ", ErrnoText(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    case EISDIR:
      return absl::InvalidArgumentError(msg);
    case EINVAL:
      if (direct_io) {
        return absl::InvalidArgumentError(
            absl::StrCat(msg, " (O_DIRECT not supported by this filesystem?)"));
      }
      return absl::InternalError(msg);
    default:
      return absl::InternalError(msg);
  }
}

int OpenRetry(const std::string& path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

void CloseFd(int fd) {
  // Linux releases the descriptor even when close fails (EINTR included), so
  // retrying could close another thread's descriptor; there is nothing to do.
  (void)::close(fd);
}

absl::Status PreadFull(int fd, const std::string& path, char* buf, size_t n,
                       uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done,
                        static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError(errno, "pread", path, offset + done, n - done);
    if (r == 0) {
      // Size() was checked, so the file shrank under us.
      return absl::InternalError(absl::StrCat("pread ", path, " offset=",
                                              offset + done,
                                              ": unexpected end of file"));
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::Status PwriteFull(int fd, const std::string& path, const char* buf,
                        size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(fd, buf + done, n - done,
                         static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError(errno, "pwrite", path, offset + done, n - done);
    if (r == 0) {
      // POSIX allows it only for n == 0; treat it as no space rather than
      // spin forever.
      return IoError(ENOSPC, "pwrite", path, offset + done, n - done);
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

// fsync of a file or directory, retried on EINTR.
absl::Status FsyncRetry(int fd, const std::string& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return OpenError(errno, "fsync", path, false);
  }
  return absl::OkStatus();
}

// Makes the directory entry of a newly created `path` durable.
absl::Status SyncParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  int fd = OpenRetry(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return OpenError(errno, "open directory", dir, false);
  absl::Status s = FsyncRetry(fd, dir);
  CloseFd(fd);
  return s;
}

// Creates `path` as a sparse file of `size` bytes and makes it durable. OK
// when another process created the path first (the caller then opens that).
absl::Status CreateSparseFile(const std::string& path, uint64_t size) {
  int fd = OpenRetry(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) return absl::OkStatus();
  if (fd < 0) return OpenError(errno, "create", path, false);
  absl::Status s;
  while (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (errno == EINTR) continue;
    std::string what = absl::StrCat("ftruncate to ", size, " bytes");
    s = errno == EFBIG ? absl::InvalidArgumentError(absl::StrCat(
                             what, " ", path, ": ", ErrnoText(EFBIG)))
                       : OpenError(errno, what, path, false);
    break;
  }
  if (s.ok()) s = FsyncRetry(fd, path);
  CloseFd(fd);
  if (!s.ok()) {
    (void)::unlink(path.c_str());  // Best effort: do not leave a stub behind.
    return s;
  }
  return SyncParentDir(path);
}

// Size in bytes of the open regular file or block device `fd`.
absl::StatusOr<uint64_t> DeviceSize(int fd, const std::string& path,
                                    bool* is_block_device) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return OpenError(errno, "fstat", path, false);
  *is_block_device = S_ISBLK(st.st_mode);
  if (S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  if (!*is_block_device) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file or block device"));
  }
  uint64_t size = 0;
  if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
    return OpenError(errno, "ioctl BLKGETSIZE64", path, false);
  }
  return size;
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeDeleter>;

AlignedBuffer AllocateAligned(size_t n) {
  void* p = nullptr;
  COWKV_CHECK_MSG(::posix_memalign(&p, kDirectAlign, n) == 0,
                  "out of memory for an O_DIRECT bounce buffer");
  return AlignedBuffer(static_cast<char*>(p));
}

// Size of the bounce buffer a request [offset, offset + n) needs.
size_t BounceBytes(uint64_t offset, size_t n) {
  return static_cast<size_t>(
      std::min(kBounceBytesMax, AlignUp(offset + n) - AlignDown(offset)));
}

// The next chunk of a bounced request: user bytes [pos, pos + len) inside
// the aligned span [start, end) of at most kBounceBytesMax bytes.
struct Chunk {
  uint64_t pos;
  uint64_t len;
  uint64_t start;
  uint64_t end;
};

Chunk NextChunk(uint64_t pos, uint64_t request_end) {
  Chunk c;
  c.pos = pos;
  c.start = AlignDown(pos);
  c.len = std::min(request_end - pos, kBounceBytesMax - (pos - c.start));
  c.end = AlignUp(pos + c.len);
  COWKV_DCHECK(c.end - c.start <= kBounceBytesMax);
  COWKV_DCHECK(c.len > 0);
  return c;
}

}  // namespace

absl::Status LockDevice(int fd, const std::string& path, bool shared) {
  int r;
  do {
    r = ::flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  if (r == 0) return absl::OkStatus();
  const int err = errno;
  if (err == EWOULDBLOCK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", path, " is in use: a cowkvd or another cowkv tool holds its lock",
        shared ? "" : " (stop it first; this refuses even with --force)"));
  }
  return IoError(err, absl::StrCat("lock ", path));
}

absl::StatusOr<std::unique_ptr<FileDevice>> FileDevice::Open(
    const std::string& path, const FileDeviceOptions& options) {
  int flags = (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  if (options.direct_io) flags |= O_DIRECT;
  // A writable block device is also claimed with O_EXCL: the kernel refuses
  // it (EBUSY) while a filesystem is mounted on it or another exclusive
  // opener holds it, as mkfs.btrfs does.
  struct stat pre;
  if (options.lock && !options.read_only && ::stat(path.c_str(), &pre) == 0 &&
      S_ISBLK(pre.st_mode)) {
    flags |= O_EXCL;
  }
  int fd = OpenRetry(path, flags);
  if (fd < 0 && errno == EBUSY && (flags & O_EXCL)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", path, " is in use: mounted, or held open exclusively by another program"));
  }
  // A read-only open never creates: it must not change the filesystem.
  if (fd < 0 && errno == ENOENT && options.create_size > 0 &&
      !options.read_only) {
    COWKV_RETURN_IF_ERROR(CreateSparseFile(path, options.create_size));
    fd = OpenRetry(path, flags);
  }
  if (fd < 0) return OpenError(errno, "open", path, options.direct_io);
  if (options.lock) {
    absl::Status locked = LockDevice(fd, path, options.read_only);
    if (!locked.ok()) {
      CloseFd(fd);
      return locked;
    }
  }

  bool is_block_device = false;
  absl::StatusOr<uint64_t> size = DeviceSize(fd, path, &is_block_device);
  if (size.ok() && options.direct_io && *size % kDirectAlign != 0) {
    // The last partial block could only be written by extending the file.
    size = absl::InvalidArgumentError(
        absl::StrCat("open ", path, ": direct_io needs a size that is a ",
                     "multiple of ", kDirectAlign, ", have ", *size));
  }
  if (!size.ok()) {
    CloseFd(fd);
    return size.status();
  }
  return std::unique_ptr<FileDevice>(new FileDevice(
      path, fd, *size, is_block_device, options.direct_io, options.read_only));
}

FileDevice::FileDevice(std::string path, int fd, uint64_t size,
                       bool is_block_device, bool direct_io, bool read_only)
    : path_(std::move(path)),
      fd_(fd),
      size_(size),
      is_block_device_(is_block_device),
      direct_io_(direct_io),
      read_only_(read_only) {
  COWKV_CHECK(fd_ >= 0);
}

FileDevice::~FileDevice() { CloseFd(fd_); }

absl::Status FileDevice::CheckRange(const char* op, uint64_t offset,
                                    size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(op, " ", path_,
                                              " past end of device: offset=",
                                              offset, " len=", n,
                                              " size=", size_));
  }
  return absl::OkStatus();
}

absl::Status FileDevice::ReadAt(uint64_t offset, void* buf, size_t n) {
  COWKV_RETURN_IF_ERROR(CheckRange("read", offset, n));
  char* out = static_cast<char*>(buf);
  if (n == 0) return absl::OkStatus();
  if (direct_io_ && !IsAligned(offset, buf, n)) {
    return BounceRead(offset, out, n);
  }
  return PreadFull(fd_, path_, out, n, offset);
}

absl::Status FileDevice::WriteAt(uint64_t offset, const void* buf, size_t n) {
  if (read_only_) {
    return absl::FailedPreconditionError(
        absl::StrCat("write ", path_, " offset=", offset,
                     ": device was opened read-only"));
  }
  COWKV_RETURN_IF_ERROR(CheckRange("write", offset, n));
  const char* in = static_cast<const char*>(buf);
  if (n == 0) return absl::OkStatus();
  if (!direct_io_) return PwriteFull(fd_, path_, in, n, offset);
  if (IsAligned(offset, buf, n)) {
    absl::ReaderMutexLock lock(&rmw_mu_);
    return PwriteFull(fd_, path_, in, n, offset);
  }
  absl::WriterMutexLock lock(&rmw_mu_);
  return BounceWrite(offset, in, n);
}

absl::Status FileDevice::BounceRead(uint64_t offset, char* buf, size_t n) {
  AlignedBuffer bounce = AllocateAligned(BounceBytes(offset, n));
  const uint64_t request_end = offset + n;
  for (uint64_t pos = offset; pos < request_end;) {
    Chunk c = NextChunk(pos, request_end);
    COWKV_RETURN_IF_ERROR(PreadFull(fd_, path_, bounce.get(), c.end - c.start, c.start));
    std::memcpy(buf + (c.pos - offset), bounce.get() + (c.pos - c.start), c.len);
    pos += c.len;
  }
  return absl::OkStatus();
}

absl::Status FileDevice::BounceWrite(uint64_t offset, const char* buf,
                                     size_t n) {
  rmw_mu_.AssertHeld();
  AlignedBuffer bounce = AllocateAligned(BounceBytes(offset, n));
  const uint64_t request_end = offset + n;
  for (uint64_t pos = offset; pos < request_end;) {
    Chunk c = NextChunk(pos, request_end);
    // Read the blocks at either end that the request covers only in part.
    const uint64_t last_block = c.end - kDirectAlign;
    const bool head_partial = c.pos != c.start;
    const bool tail_partial = c.pos + c.len != c.end;
    if (head_partial) {
      COWKV_RETURN_IF_ERROR(PreadFull(fd_, path_, bounce.get(), kDirectAlign, c.start));
    }
    if (tail_partial && !(head_partial && last_block == c.start)) {
      COWKV_RETURN_IF_ERROR(
          PreadFull(fd_, path_, bounce.get() + (last_block - c.start), kDirectAlign, last_block));
    }
    std::memcpy(bounce.get() + (c.pos - c.start), buf + (c.pos - offset), c.len);
    COWKV_RETURN_IF_ERROR(PwriteFull(fd_, path_, bounce.get(), c.end - c.start, c.start));
    pos += c.len;
  }
  return absl::OkStatus();
}

absl::Status FileDevice::Flush() {
  // Nothing can be dirty on a read-only descriptor.
  if (read_only_) return absl::OkStatus();
  absl::MutexLock lock(&flush_mu_);
  if (!flush_error_.ok()) return flush_error_;
  while (::fdatasync(fd_) != 0) {
    if (errno == EINTR) continue;
    flush_error_ = IoError(errno, absl::StrCat("fdatasync ", path_));
    return flush_error_;
  }
  return absl::OkStatus();
}

}  // namespace cowkv
