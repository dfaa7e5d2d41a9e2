// Files a user names (a program, an .npy input or output, a trace): reading them with a bound on
// what is read, since a name may be a device that never ends (/dev/zero) or a FIFO, and writing
// them without destroying what the name refers to (a device node, a FIFO, a symbolic link).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln {

// Which file a name refers to (after symbolic links): two names are the same file exactly when
// their identities are equal.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  bool regular = false;  // a regular file (not a device, FIFO, directory or socket)
  friend bool operator==(const FileIdentity& a, const FileIdentity& b) {
    return a.device == b.device && a.inode == b.inode;
  }
};

// The identity of what `path` names; nullopt when nothing exists there (or a symbolic link
// dangles). Other failures (permission denied on a parent, ...) are errors naming the path.
Result<std::optional<FileIdentity>> file_identity(const std::string& path);

// A file opened for reading, read in bounded steps: memory grows only with the bytes the file
// actually holds, never with a size announced in advance. Movable, not copyable.
class InputFile {
 public:
  // NOT_FOUND, PERMISSION_DENIED, ... naming the path; a directory is refused (EISDIR).
  static Result<InputFile> open(const std::string& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  // The size of a regular file; nullopt for a device, a FIFO or a socket, whose end is unknown.
  std::optional<uint64_t> regular_size() const { return regular_size_; }

  // Up to `n` bytes: fewer only when the file ends first.
  Result<std::string> read(size_t n);
  // The same into `out` (which may be a device's memory): how many bytes were read, fewer than
  // out.size() only when the file ends first.
  Result<size_t> read_into(std::span<std::byte> out);
  // The rest of the file; INVALID_ARGUMENT "PATH: WHAT is larger than MAX bytes ..." when it
  // holds more than `max_bytes` (after reading at most max_bytes + 1 of them).
  Result<std::string> read_to_end(size_t max_bytes, std::string_view what);
  // Whether the file has nothing left (reads one byte, which is then lost).
  Result<bool> at_end();

 private:
  InputFile(int fd, std::string path, std::optional<uint64_t> regular_size)
      : fd_(fd), path_(std::move(path)), regular_size_(regular_size) {}
  int fd_ = -1;
  std::string path_;
  std::optional<uint64_t> regular_size_;
};

// A whole file of at most `max_bytes` bytes; `what` names it in the message when it is larger
// ("the program", "an .npy file").
Result<std::string> read_bounded_file(const std::string& path, size_t max_bytes, std::string_view what);

// Writes `bytes` to the file that `path` names, keeping what the name refers to:
// - nothing, or a regular file: written to a temporary sibling and renamed over it, so that a
//   reader sees the old or the new contents, whole;
// - a symbolic link: the same for the file it finally points to (the link stays a link);
// - a character device (/dev/null, a terminal) or a FIFO: opened and written through.
// A directory, a block device or a socket is refused (FAILED_PRECONDITION naming it).
Status write_output_file(const std::string& path, std::string_view bytes);
// The same for the concatenation of `parts` (a header and data that live apart), never joined in
// memory.
Status write_output_file(const std::string& path, std::span<const std::string_view> parts);
// Whether write_output_file(path, ...) can write there, checked before the work that produces
// the bytes: the kind of file, and that its directory takes a new file (one is created and
// removed). The error names `path` and the directory at fault.
Status check_output_file(const std::string& path);

// Output files written all or none (`kiln run`'s outputs: a run that fails at its third file, or
// whose other ranks fail, leaves none of them). stage() writes a file's bytes where
// write_output_file would, but to a temporary sibling that nothing reads yet; a character device
// or FIFO cannot be staged, so its bytes are kept in memory. commit() writes the devices and
// FIFOs (where a write can still fail: /dev/full), then renames every staged file into place (a
// rename of a sibling, which does not fail for want of space). What is staged and not committed
// is removed when the object goes.
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();
  Status stage(const std::string& path, std::span<const std::string_view> parts);
  Status stage(const std::string& path, std::string_view bytes);
  Status commit();

 private:
  struct File {
    std::string path;    // as given, for messages
    std::string target;  // what the rename replaces (a link's file), or the device or FIFO
    std::string temp;    // the staged sibling; empty for a device or FIFO
    std::string bytes;   // a device's or FIFO's bytes
    bool through = false;  // a device or FIFO: written at commit()
  };
  std::vector<File> files_;
};

// Writes all of `bytes` to `fd`, retrying short writes and EINTR: 0, or the errno of the failure.
int write_all(int fd, std::string_view bytes);

}  // namespace kiln
