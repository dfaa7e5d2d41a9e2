#include "base/disk_cache.h"

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
#include <array>
#include <span>

#include "kiln/base/env.h"
#include "kiln/base/file.h"
#include "kiln/base/log.h"
#include "kiln/base/settings.h"
#include "kiln/base/time.h"
#include "base/sha256.h"

namespace kiln {

namespace {

// Trailer: magic (8) | payload length, little-endian (8) | SHA-256 of the entry's name, i.e. the
// key and suffix it was stored under (32) | SHA-256 of the payload (32). The name's digest makes an
// entry copied or renamed to another key's file a miss, not a wrong hit.
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', '2'};
constexpr size_t kTrailerSize = 8 + 8 + 32 + 32;

// Bigger files are not entries; the bound keeps a hostile file from exhausting memory.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

std::string entry_name(std::string_view key, std::string_view suffix) {
  std::string name(key);
  name += '.';
  name += suffix;
  return name;
}

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

// What reading an entry file found.
enum class EntryRead { kFound, kMissing, kInvalid };

// Reads the entry file `name` of `dir` without trusting it: a symbolic link, FIFO, device,
// directory, oversized or short file, or one the directory's rule does not trust (another user's,
// one others may write) is kInvalid (`why` says which), never followed, waited on or read
// unboundedly. `st` receives the identity of what was opened. Other errors are returned as errno.
int read_entry_file(const CacheDir& dir, const std::string& name, std::string* out, struct stat* st,
                    EntryRead* found, std::string* why) {
  *found = EntryRead::kInvalid;
  int fd;
  do {
    fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      *found = EntryRead::kMissing;
      return 0;
    }
    if (errno == ELOOP || errno == ENXIO || errno == EISDIR) {
      *why = errno == ELOOP ? "a symbolic link" : "not a regular file";
      if (::fstatat(dir.fd(), name.c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
      return 0;
    }
    return errno;
  }
  Fd guard(fd);
  if (::fstat(fd, st) != 0) return errno;
  if (!S_ISREG(st->st_mode)) {
    *why = "not a regular file";
    return 0;
  }
  if (std::string distrusted = dir.distrust_file(*st); !distrusted.empty()) {
    *why = distrusted;
    return 0;
  }
  if (st->st_size < static_cast<off_t>(kTrailerSize) ||
      static_cast<uint64_t>(st->st_size) > kMaxEntryBytes) {
    *why = "a file of " + std::to_string(st->st_size) + " bytes";
    return 0;
  }
  const size_t size = static_cast<size_t>(st->st_size);
  out->resize(size);
  size_t done = 0;
  while (done < size) {  // bounded by the size fstat reported; a file that grows is cut there
    ssize_t n = ::read(fd, out->data() + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done != size) {
    *why = "shorter than its size";
    return 0;
  }
  *found = EntryRead::kFound;
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

// Files at least this large get their blocks allocated before they are written.
constexpr size_t kPreallocateBytes = size_t{1} << 20;

// Creates a temporary sibling of `name` (relative to `dirfd`, or a path with AT_FDCWD) with
// `mode` and writes the concatenation of `parts` to it; its name in `*temp`. 0 or an errno, with
// `*created` saying whether the file could be made at all; nothing is left behind on failure.
int write_temp_at(int dirfd, const std::string& name, std::span<const std::string_view> parts, mode_t mode,
                  std::string* temp, bool* created) {
  int fd = -1;
  *created = false;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    *temp = temp_path_for(name);
    fd = ::openat(dirfd, temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0 && errno != EEXIST && errno != EINTR) break;
  }
  if (fd < 0) return errno;
  *created = true;
  Fd guard(fd);
  int err = 0;
  size_t total = 0;
  for (std::string_view part : parts) total += part.size();
  // Blocks allocated up front for a large file: the rename that replaces an existing file then
  // has no delayed allocation left to force out (ext4 writes such a file back synchronously
  // inside rename(2), 0.3 s per GiB), and a full disk fails here, before any byte is written.
  // Filesystems without fallocate (EOPNOTSUPP) are written as before.
  if (total >= kPreallocateBytes && ::fallocate(fd, 0, 0, static_cast<off_t>(total)) != 0 && errno == ENOSPC) {
    err = ENOSPC;
  }
  for (std::string_view part : parts) {
    if (err != 0 || (err = write_all(fd, part)) != 0) break;
  }
  int close_err = guard.close_now();
  if (err == 0) err = close_err;
  if (err != 0) ::unlinkat(dirfd, temp->c_str(), 0);
  return err;
}

// Writes `parts` as the file `name` of `dir` (a temporary sibling renamed into place); its path.
Result<std::string> write_parts_at(const CacheDir& dir, const std::string& name,
                                   std::span<const std::string_view> parts) {
  const std::string path = dir.file_path(name);
  std::string temp;
  bool created = false;
  if (int err = write_temp_at(dir.fd(), name, parts, dir.file_mode(), &temp, &created); err != 0) {
    return errno_error(err, created ? "writing " + path : "writing " + path + ": cannot create a file in " + dir.path());
  }
  if (::renameat(dir.fd(), temp.c_str(), dir.fd(), name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir.fd(), temp.c_str(), 0);
    return errno_error(err, "writing " + path);
  }
  return path;
}

}  // namespace

Result<std::string> write_parts_to_temp(const std::string& path, std::span<const std::string_view> parts) {
  std::string temp;
  bool created = false;
  if (int err = write_temp_at(AT_FDCWD, path, parts, 0644, &temp, &created); err != 0) {
    if (created) return errno_error(err, "writing " + path);
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
    return errno_error(err, "writing " + path + ": cannot create a file in " + dir);
  }
  return temp;
}

Status write_parts_atomic(const std::string& path, std::span<const std::string_view> parts) {
  KILN_ASSIGN_OR_RETURN(std::string temp, write_parts_to_temp(path, parts));
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return errno_error(err, "writing " + path);
  }
  return Status();
}

namespace {

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

// Reports the first invalid entry of the process: one line is enough to explain rebuilds, and a
// cache full of bad entries must not flood the log.
void warn_invalid_entry_once(const std::string& path, const std::string& why) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true, std::memory_order_relaxed)) return;
  KILN_LOG(kWarn, "cache entry " + path + " is not valid (" + why +
                      "); it is rebuilt and replaced (further invalid entries are not reported)");
}

// The payload of the valid entry `name` in `dir`, nullopt on a miss (missing, or invalid: warned
// about and removed when it can be).
Result<std::optional<std::string>> read_valid_entry(const CacheDir& dir, const std::string& name) {
  const std::string path = dir.file_path(name);
  std::string bytes;
  struct stat st;
  EntryRead found;
  std::string why;
  int err = read_entry_file(dir, name, &bytes, &st, &found, &why);
  if (err != 0) return errno_error(err, "reading cache entry " + path);
  if (found == EntryRead::kMissing) return std::optional<std::string>();
  std::optional<std::string_view> payload;
  if (found == EntryRead::kFound) {
    payload = DiskCache::parse_entry(bytes, name);
    if (!payload) why = "wrong key, length or checksum";
  }
  if (!payload) {
    warn_invalid_entry_once(path, why);
    // Remove it, unless another writer has already replaced it with a new file. Only a regular
    // file or a link is removed: the rebuilt entry is renamed over it anyway.
    struct stat now;
    if (::fstatat(dir.fd(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
        now.st_ino == st.st_ino && (S_ISREG(now.st_mode) || S_ISLNK(now.st_mode))) {
      ::unlinkat(dir.fd(), name.c_str(), 0);  // errors ignored: it is a miss either way
    }
    return std::optional<std::string>();
  }
  bytes.resize(payload->size());
  return std::optional<std::string>(std::move(bytes));
}

}  // namespace

Result<DiskCache> DiskCache::configured(const std::optional<std::string>& dir) {
  KILN_ASSIGN_OR_RETURN(std::optional<uint64_t> shared, setting_uint("KILN_CACHE_SHARED"));
  return DiskCache(dir.value_or(default_dir()), shared.value_or(0) == 1 ? CacheSharing::kShared : CacheSharing::kPrivate);
}

std::string DiskCache::default_dir() {
  if (auto dir = env_string("KILN_CACHE_DIR")) return *dir;
  if (auto xdg = env_string("XDG_CACHE_HOME")) return *xdg + "/kiln";
  if (auto home = env_string("HOME")) return *home + "/.cache/kiln";
  return temp_directory() + "/kiln-cache-" + std::to_string(static_cast<unsigned long>(::getuid()));
}

std::string DiskCache::entry_path(std::string_view key, std::string_view suffix) const {
  std::string path = dir_;
  if (!path.empty() && path.back() != '/') path += '/';
  path += key;
  path += '.';
  path += suffix;
  return path;
}

std::optional<std::string_view> DiskCache::parse_entry(std::string_view file_bytes,
                                                       std::string_view name) {
  if (file_bytes.size() < kTrailerSize) return std::nullopt;
  size_t payload_size = file_bytes.size() - kTrailerSize;
  const char* trailer = file_bytes.data() + payload_size;
  if (std::memcmp(trailer, kMagic, sizeof kMagic) != 0) return std::nullopt;
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= uint64_t{static_cast<uint8_t>(trailer[8 + i])} << (8 * i);
  }
  if (length != payload_size) return std::nullopt;
  std::array<uint8_t, 32> name_digest = Sha256().update(name).digest();
  if (std::memcmp(trailer + 16, name_digest.data(), name_digest.size()) != 0) return std::nullopt;
  std::string_view payload = file_bytes.substr(0, payload_size);
  std::array<uint8_t, 32> digest = Sha256().update(payload).digest();
  if (std::memcmp(trailer + 48, digest.data(), digest.size()) != 0) return std::nullopt;
  return payload;
}

std::string DiskCache::make_entry(std::string_view name, std::string_view payload) {
  std::string entry;
  entry.reserve(payload.size() + kTrailerSize);
  entry.append(payload);
  entry.append(kMagic, sizeof kMagic);
  uint64_t length = payload.size();
  for (int i = 0; i < 8; ++i) entry += static_cast<char>(length >> (8 * i));
  std::array<uint8_t, 32> name_digest = Sha256().update(name).digest();
  entry.append(reinterpret_cast<const char*>(name_digest.data()), name_digest.size());
  std::array<uint8_t, 32> digest = Sha256().update(payload).digest();
  entry.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return entry;
}

Result<std::optional<std::string>> DiskCache::load(std::string_view key,
                                                   std::string_view suffix) const {
  if (!enabled()) return std::optional<std::string>();
  KILN_RETURN_IF_ERROR(check_name(key, suffix));
  KILN_ASSIGN_OR_RETURN(std::optional<CacheDir> dir, CacheDir::open_existing(dir_, sharing_));
  if (!dir) return std::optional<std::string>();
  return read_valid_entry(*dir, entry_name(key, suffix));
}

Result<std::string> DiskCache::store(std::string_view key, std::string_view suffix,
                                     std::string_view payload) const {
  if (!enabled()) return failed_precondition_error("the disk cache is disabled (no directory)");
  KILN_RETURN_IF_ERROR(check_name(key, suffix));
  Result<CacheDir> dir = CacheDir::open_or_create(dir_, sharing_);
  if (!dir.ok()) return dir.status().annotate("storing cache entry " + entry_path(key, suffix));
  const std::string name = entry_name(key, suffix);
  const std::string entry = make_entry(name, payload);
  const std::string_view parts[] = {entry};
  return write_parts_at(*dir, name, parts);
}

Result<std::string> DiskCache::keep_file(std::string_view subdir, std::string_view name,
                                         std::string_view bytes) const {
  if (!enabled()) return failed_precondition_error("the disk cache is disabled (no directory)");
  if (!valid_name_part(subdir) || !valid_name_part(name)) {
    return invalid_argument_error("bad name '" + std::string(subdir) + "/" + std::string(name) + "' in the disk cache");
  }
  KILN_ASSIGN_OR_RETURN(CacheDir dir, CacheDir::open_or_create(dir_, sharing_));
  if (dir.substituted()) {
    return failed_precondition_error("the cache directory " + dir_ + " is not used, so nothing is kept there");
  }
  KILN_ASSIGN_OR_RETURN(CacheDir sub, dir.subdirectory(std::string(subdir)));
  const std::string_view parts[] = {bytes};
  return write_parts_at(sub, std::string(name), parts);
}

Result<std::string> read_file(const std::string& path) {
  std::string bytes;
  int err = read_all(path, &bytes, nullptr);
  if (err != 0) return errno_error(err, "reading " + path);
  return bytes;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string_view parts[] = {bytes};
  return write_parts_atomic(path, parts);
}

Status make_directories(const std::string& path, mode_t mode) {
  if (path.empty()) return invalid_argument_error("make_directories: empty path");
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (::mkdir(p.c_str(), mode) == 0) return Status();
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
  KILN_RETURN_IF_ERROR(make_directories(p.substr(0, slash), mode));
  if (::mkdir(p.c_str(), mode) == 0) return Status();
  err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status();
  return errno_error(err, "creating directory " + path);
}

}  // namespace kiln
