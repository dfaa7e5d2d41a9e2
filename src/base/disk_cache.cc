#include "kiln/base/disk_cache.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "kiln/base/env.h"
#include "kiln/base/sha256.h"
#include "kiln/base/time.h"

namespace kiln {

namespace {

// Trailer: magic (8) | payload length, little-endian (8) | SHA-256 of the payload (32).
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', '1'};
constexpr size_t kTrailerSize = 8 + 8 + 32;

// Closes a descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports close(2)'s error (0 if none).
  int close_now() {
    int fd = fd_;
    fd_ = -1;
    return (fd >= 0 && ::close(fd) != 0) ? errno : 0;
  }

 private:
  int fd_;
};

// Reads a whole file; 0 or an errno. `st` receives the opened file's identity.
int read_all(const std::string& path, std::string* out, struct stat* st) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  Fd guard(fd);
  struct stat local;
  if (st == nullptr) st = &local;
  if (::fstat(fd, st) != 0) return errno;
  if (S_ISDIR(st->st_mode)) return EISDIR;
  out->clear();
  if (st->st_size > 0) out->reserve(static_cast<size_t>(st->st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return 0;
}

uint64_t random_u64() {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    r = static_cast<uint64_t>(now_ns()) * 0x9e3779b97f4a7c15ull;
  }
  return r;
}

// A name for a temporary sibling of `path` that no other thread or process will pick.
std::string temp_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  std::string dir, base;
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    base = path;
  } else {
    dir = path.substr(0, slash + 1);
    base = path.substr(slash + 1);
  }
  char tail[128];
  std::snprintf(tail, sizeof tail, ".tmp.%ld.%ld.%llu.%016llx", static_cast<long>(::getpid()),
                static_cast<long>(::syscall(SYS_gettid)),
                static_cast<unsigned long long>(counter.fetch_add(1, std::memory_order_relaxed)),
                static_cast<unsigned long long>(random_u64()));
  return dir + "." + base + tail;
}

int write_all(int fd, const char* p, size_t size) {
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

// Writes the concatenation of `parts` to a temporary sibling of `path` and renames it into place.
Status write_parts_atomic(const std::string& path, std::initializer_list<std::string_view> parts) {
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temp = temp_path_for(path);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST && errno != EINTR) break;
  }
  if (fd < 0) return errno_error(errno, "writing " + path + " (creating " + temp + ")");
  Fd guard(fd);
  int err = 0;
  for (std::string_view part : parts) {
    if ((err = write_all(fd, part.data(), part.size())) != 0) break;
  }
  int close_err = guard.close_now();
  if (err == 0) err = close_err;
  if (err == 0 && ::rename(temp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return errno_error(err, "writing " + path);
  }
  return Status();
}

bool valid_name_part(std::string_view s) {
  return !s.empty() && s.find('/') == std::string_view::npos &&
         s.find('\0') == std::string_view::npos && s.find("..") == std::string_view::npos;
}

Status check_name(std::string_view key, std::string_view suffix) {
  if (!valid_name_part(key)) {
    return invalid_argument_error("bad disk cache key '" + std::string(key) + "'");
  }
  if (!valid_name_part(suffix)) {
    return invalid_argument_error("bad disk cache suffix '" + std::string(suffix) + "'");
  }
  return Status();
}

// The whole valid entry file at `path`, nullopt on a miss (missing, or corrupt and removed).
Result<std::optional<std::string>> read_valid_entry(const std::string& path) {
  std::string bytes;
  struct stat st;
  int err = read_all(path, &bytes, &st);
  if (err == ENOENT || err == ENOTDIR) return std::optional<std::string>();
  if (err != 0) return errno_error(err, "reading cache entry " + path);
  if (!DiskCache::validate(bytes)) {
    // Remove the corrupt entry, unless another writer has already replaced it with a new file.
    struct stat now;
    if (::stat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
      ::unlink(path.c_str());  // errors ignored: it is a miss either way
    }
    return std::optional<std::string>();
  }
  return std::optional<std::string>(std::move(bytes));
}

}  // namespace

std::string DiskCache::default_dir() {
  if (auto dir = env_string("KILN_CACHE_DIR")) return *dir;
  if (auto xdg = env_string("XDG_CACHE_HOME")) return *xdg + "/kiln";
  if (auto home = env_string("HOME")) return *home + "/.cache/kiln";
  return "/tmp/kiln-cache-" + std::to_string(static_cast<unsigned long>(::getuid()));
}

std::string DiskCache::entry_path(std::string_view key, std::string_view suffix) const {
  std::string path = dir_;
  if (!path.empty() && path.back() != '/') path += '/';
  path += key;
  path += '.';
  path += suffix;
  return path;
}

std::optional<size_t> DiskCache::validate(std::string_view file_bytes) {
  if (file_bytes.size() < kTrailerSize) return std::nullopt;
  size_t payload_size = file_bytes.size() - kTrailerSize;
  const char* trailer = file_bytes.data() + payload_size;
  if (std::memcmp(trailer, kMagic, sizeof kMagic) != 0) return std::nullopt;
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= uint64_t{static_cast<uint8_t>(trailer[8 + i])} << (8 * i);
  }
  if (length != payload_size) return std::nullopt;
  std::array<uint8_t, 32> digest = Sha256().update(file_bytes.substr(0, payload_size)).digest();
  if (std::memcmp(trailer + 16, digest.data(), digest.size()) != 0) return std::nullopt;
  return payload_size;
}

Result<std::optional<std::string>> DiskCache::lookup(std::string_view key,
                                                     std::string_view suffix) const {
  if (!enabled()) return std::optional<std::string>();
  KILN_RETURN_IF_ERROR(check_name(key, suffix));
  std::string path = entry_path(key, suffix);
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> bytes, read_valid_entry(path));
  if (!bytes) return std::optional<std::string>();
  return std::optional<std::string>(std::move(path));
}

Result<std::optional<std::string>> DiskCache::load(std::string_view key,
                                                   std::string_view suffix) const {
  if (!enabled()) return std::optional<std::string>();
  KILN_RETURN_IF_ERROR(check_name(key, suffix));
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                        read_valid_entry(entry_path(key, suffix)));
  if (!bytes) return std::optional<std::string>();
  bytes->resize(bytes->size() - kTrailerSize);
  return bytes;
}

Result<std::string> DiskCache::store(std::string_view key, std::string_view suffix,
                                     std::string_view payload) const {
  if (!enabled()) return failed_precondition_error("the disk cache is disabled (no directory)");
  KILN_RETURN_IF_ERROR(check_name(key, suffix));
  std::string path = entry_path(key, suffix);
  Status made = make_directories(dir_);
  if (!made.ok()) return made.annotate("storing cache entry " + path);

  char trailer[kTrailerSize];
  std::memcpy(trailer, kMagic, sizeof kMagic);
  uint64_t length = payload.size();
  for (int i = 0; i < 8; ++i) trailer[8 + i] = static_cast<char>(length >> (8 * i));
  std::array<uint8_t, 32> digest = Sha256().update(payload).digest();
  std::memcpy(trailer + 16, digest.data(), digest.size());

  KILN_RETURN_IF_ERROR(write_parts_atomic(path, {payload, std::string_view(trailer, kTrailerSize)}));
  return path;
}

Result<std::string> read_file(const std::string& path) {
  std::string bytes;
  int err = read_all(path, &bytes, nullptr);
  if (err != 0) return errno_error(err, "reading " + path);
  return bytes;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  return write_parts_atomic(path, {bytes});
}

Status make_directories(const std::string& path) {
  if (path.empty()) return invalid_argument_error("make_directories: empty path");
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (::mkdir(p.c_str(), 0755) == 0) return Status();
  int err = errno;
  if (err == EEXIST) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status();
    return errno_error(EEXIST, "creating directory " + path + " (not a directory)");
  }
  if (err != ENOENT) return errno_error(err, "creating directory " + path);
  // A parent is missing: create it, then retry (another process may race us; EEXIST is fine).
  size_t slash = p.rfind('/');
  if (slash == std::string::npos || slash == 0) return errno_error(err, "creating directory " + path);
  KILN_RETURN_IF_ERROR(make_directories(p.substr(0, slash)));
  if (::mkdir(p.c_str(), 0755) == 0) return Status();
  err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status();
  return errno_error(err, "creating directory " + path);
}

}  // namespace kiln
