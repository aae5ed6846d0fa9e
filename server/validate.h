// Input checks at the server's edge (STYLE.md point 20): every request field
// that reaches the engine is checked here first, and a bad one is
// INVALID_ARGUMENT with the field and the limit in the message. The engine
// checks again; the server's checks give clients one consistent message and
// keep oversized input from doing any work. File checks put the POSIX name
// first ("ENAMETOOLONG: ...").
//
// Thread-safe (pure functions).
#ifndef COWKV_SERVER_VALIDATE_H_
#define COWKV_SERVER_VALIDATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace server {

// A subvolume name: 1..255 bytes, no '/' or NUL. `field` names the request
// field in the message.
absl::Status ValidateSubvolumeName(absl::string_view field, absl::string_view name);
// A KV key: 1..1024 bytes.
absl::Status ValidateKey(absl::string_view field, absl::string_view key);
// A KV value: at most 16 MiB.
absl::Status ValidateValue(absl::string_view value);
// A range bound: at most 1025 bytes (a key plus one byte, for exclusive ends).
absl::Status ValidateBound(absl::string_view field, absl::string_view bound);
// A file path: at most 4096 bytes and 256 components of 1..255 bytes, no NUL,
// no "." or ".." component. Empty is the root directory.
absl::Status ValidatePath(absl::string_view field, absl::string_view path);
// A path whose last component is the name a call creates, removes or
// changes (Mkdir, Create, Symlink, Link's new path, Rename, Unlink, Rmdir):
// as ValidatePath, and not the root directory, which has no name.
absl::Status ValidateNamedPath(absl::string_view field, absl::string_view path);
// A path field that names a file unless `ino` (non-zero) does: the path is
// checked only when it is used.
absl::Status ValidatePathOrIno(absl::string_view field, absl::string_view path, uint64_t ino);
// A symlink target: 1..4095 bytes without NUL.
absl::Status ValidateSymlinkTarget(absl::string_view target);
// offset + length must not overflow the 2^63 range the engine computes in.
absl::Status ValidateByteRange(absl::string_view what, uint64_t offset, uint64_t length);
// Data written at [offset, offset + length) must end within the largest
// file (2^50 bytes): EFBIG otherwise. Also for a truncate to `offset`
// (length 0).
absl::Status ValidateFileEnd(absl::string_view what, uint64_t offset, uint64_t length);
// A short, printable form of a key for messages ("a\x00b", cut at 64 bytes).
std::string KeyForMessage(absl::string_view key);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_VALIDATE_H_
