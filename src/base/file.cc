#include "kiln/base/file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "base/disk_cache.h"

namespace kiln {

namespace {

// Reads are done in steps of this size, so that memory follows the bytes actually read.
constexpr size_t kReadStep = 1 << 20;
// As many symbolic links as Linux follows in one lookup (MAXSYMLINKS).
constexpr int kMaxSymlinkHops = 40;

std::string describe_size(size_t bytes) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file, character device or FIFO";
}

// Opens and writes a device or FIFO in place: no O_CREAT (it exists), no O_TRUNC (meaningless).
Status write_through(const std::string& path, std::span<const std::string_view> parts) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno_error(errno, "writing " + path);
  int err = 0;
  for (std::string_view part : parts) {
    if ((err = write_all(fd, part)) != 0) break;
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err != 0) return errno_error(err, "writing " + path);
  return Status();
}

// The path a chain of symbolic links starting at `path` ends at, where nothing exists: the
// file a write through the (dangling) link creates.
Result<std::string> follow_dangling_link(const std::string& path) {
  std::string current = path;
  for (int hop = 0; hop < kMaxSymlinkHops; ++hop) {
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0) {
      if (errno == ENOENT) return current;
      return errno_error(errno, "writing " + path + " (following its link to " + current + ")");
    }
    if (!S_ISLNK(st.st_mode)) return current;
    char target[PATH_MAX];
    ssize_t n = ::readlink(current.c_str(), target, sizeof target - 1);
    if (n < 0) return errno_error(errno, "writing " + path + " (reading the link " + current + ")");
    std::string next(target, static_cast<size_t>(n));
    if (next.empty() || next[0] != '/') {
      size_t slash = current.rfind('/');
      if (slash != std::string::npos) next = current.substr(0, slash + 1) + next;
    }
    current = std::move(next);
  }
  return errno_error(ELOOP, "writing " + path);
}

}  // namespace

int write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

Result<std::optional<FileIdentity>> file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<FileIdentity>();
    return errno_error(errno, "examining " + path);
  }
  return std::optional<FileIdentity>(FileIdentity{static_cast<uint64_t>(st.st_dev),
                                                  static_cast<uint64_t>(st.st_ino), S_ISREG(st.st_mode)});
}

Result<InputFile> InputFile::open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno_error(errno, "reading " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    return errno_error(err, "reading " + path);
  }
  std::optional<uint64_t> size;
  if (S_ISREG(st.st_mode)) size = static_cast<uint64_t>(st.st_size);
  return InputFile(fd, path, size);
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), regular_size_(other.regular_size_) {
  other.fd_ = -1;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    regular_size_ = other.regular_size_;
    other.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<size_t> InputFile::read_into(std::span<std::byte> out) {
  size_t done = 0;
  while (done < out.size()) {
    // Linux's read(2) moves at most about 2 GiB per call.
    const size_t step = std::min<size_t>(out.size() - done, size_t{1} << 30);
    ssize_t got = ::read(fd_, out.data() + done, step);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "reading " + path_);
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

Result<std::string> InputFile::read(size_t n) {
  std::string out;
  while (out.size() < n) {
    const size_t step = std::min(kReadStep, n - out.size());
    const size_t old = out.size();
    out.resize(old + step);
    ssize_t got = ::read(fd_, out.data() + old, step);
    if (got < 0) {
      if (errno == EINTR) {
        out.resize(old);
        continue;
      }
      return errno_error(errno, "reading " + path_);
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  return out;
}

Result<std::string> InputFile::read_to_end(size_t max_bytes, std::string_view what) {
  if (regular_size_ && *regular_size_ > max_bytes) {
    return invalid_argument_error(path_ + ": " + std::string(what) + " is larger than " +
                                  describe_size(max_bytes) + " (" + std::to_string(*regular_size_) +
                                  " bytes)");
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, read(max_bytes == SIZE_MAX ? max_bytes : max_bytes + 1));
  if (bytes.size() > max_bytes) {
    return invalid_argument_error(path_ + ": " + std::string(what) + " is larger than " +
                                  describe_size(max_bytes) + " (it does not end there)");
  }
  return bytes;
}

Result<bool> InputFile::at_end() {
  KILN_ASSIGN_OR_RETURN(std::string next, read(1));
  return next.empty();
}

Result<std::string> read_bounded_file(const std::string& path, size_t max_bytes, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  return file.read_to_end(max_bytes, what);
}

namespace {

// Where write_output_file writes `path`: through it (a character device or FIFO, `through`), or
// atomically to `target` (the regular file, or the file a link leads to, that is replaced).
struct OutputTarget {
  bool through = false;
  std::string target;
};

Result<OutputTarget> resolve_output(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return errno_error(errno, "writing " + path);
    // Nothing there, or a link to nothing: create the file the name leads to.
    KILN_ASSIGN_OR_RETURN(std::string target, follow_dangling_link(path));
    return OutputTarget{false, target};
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return OutputTarget{true, path};
  if (!S_ISREG(st.st_mode)) {
    return failed_precondition_error("writing " + path + ": it is " + kind_of(st.st_mode) +
                                     "; kiln writes regular files, character devices and FIFOs");
  }
  struct stat link;
  if (::lstat(path.c_str(), &link) == 0 && !S_ISLNK(link.st_mode)) return OutputTarget{false, path};
  // A link to a regular file: replace the file it points to, not the link.
  std::unique_ptr<char, decltype(&std::free)> target(::realpath(path.c_str(), nullptr), &std::free);
  if (!target) return errno_error(errno, "writing " + path + " (resolving its link)");
  return OutputTarget{false, target.get()};
}

}  // namespace

Status write_output_file(const std::string& path, std::string_view bytes) {
  const std::string_view parts[] = {bytes};
  return write_output_file(path, parts);
}

Status write_output_file(const std::string& path, std::span<const std::string_view> parts) {
  KILN_ASSIGN_OR_RETURN(OutputTarget out, resolve_output(path));
  Status written = out.through ? write_through(path, parts) : write_parts_atomic(out.target, parts);
  return written.ok() || out.target == path ? written : written.annotate("writing " + path);
}

Status check_output_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(OutputTarget out, resolve_output(path));
  if (out.through) return Status();
  // The file is replaced by renaming a sibling over it: that sibling must be creatable.
  std::string dir = std::filesystem::path(out.target).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno_error(errno, "writing " + path + " (its directory " + dir + ")");
  if (!S_ISDIR(st.st_mode)) return errno_error(ENOTDIR, "writing " + path + " (" + dir + ")");
  static std::atomic<uint64_t> probes{0};
  const std::string probe =
      dir + "/.kiln-probe-" + std::to_string(::getpid()) + "-" + std::to_string(probes.fetch_add(1));
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error(errno, "writing " + path + ": cannot create a file in " + dir);
  ::close(fd);
  ::unlink(probe.c_str());
  return Status();
}

StagedFiles::~StagedFiles() {
  for (const File& f : files_) {
    if (!f.temp.empty()) ::unlink(f.temp.c_str());
  }
}

Status StagedFiles::stage(const std::string& path, std::string_view bytes) {
  const std::string_view parts[] = {bytes};
  return stage(path, parts);
}

Status StagedFiles::stage(const std::string& path, std::span<const std::string_view> parts) {
  KILN_ASSIGN_OR_RETURN(OutputTarget out, resolve_output(path));
  File file{path, out.target, "", "", out.through};
  if (out.through) {
    for (std::string_view part : parts) file.bytes += part;
  } else {
    Result<std::string> temp = write_parts_to_temp(out.target, parts);
    if (!temp.ok()) return out.target == path ? temp.status() : temp.status().annotate("writing " + path);
    file.temp = std::move(*temp);
  }
  files_.push_back(std::move(file));
  return Status();
}

Status StagedFiles::commit() {
  // Devices and FIFOs first: a write there can fail (ENOSPC on /dev/full, a reader gone), and
  // no regular file has been replaced yet when it does.
  for (const File& f : files_) {
    if (!f.through) continue;
    const std::string_view parts[] = {f.bytes};
    KILN_RETURN_IF_ERROR(write_through(f.target, parts));
  }
  for (File& f : files_) {
    if (f.through) continue;
    if (::rename(f.temp.c_str(), f.target.c_str()) != 0) return errno_error(errno, "writing " + f.path);
    f.temp.clear();
  }
  files_.clear();
  return Status();
}

}  // namespace kiln
