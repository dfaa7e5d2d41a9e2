#include "kiln/hal/buffer.h"

#include <cstring>
#include <string>

namespace kiln::hal {

namespace {
std::string bits_string(uint32_t bits, std::initializer_list<std::pair<uint32_t, const char*>> names) {
  std::string out;
  for (const auto& [bit, name] : names) {
    if (bits & bit) {
      if (!out.empty()) out += '|';
      out += name;
    }
  }
  return out.empty() ? "none" : out;
}
}  // namespace

NativeMemory BufferStorage::native_memory() {
  NativeMemory native;
  if (void* host = host_pointer()) {
    native.kind = NativeMemory::Kind::kHost;
    native.host = host;
  }
  return native;
}

std::string memory_type_string(uint32_t type) {
  return bits_string(type, {{kMemoryDeviceLocal, "device-local"},
                            {kMemoryHostVisible, "host-visible"},
                            {kMemoryHostCoherent, "host-coherent"},
                            {kMemoryHostCached, "host-cached"}});
}

std::string buffer_usage_string(uint32_t usage) {
  return bits_string(usage, {{kUsageTransferSource, "transfer-source"},
                             {kUsageTransferTarget, "transfer-target"},
                             {kUsageDispatchStorage, "dispatch-storage"},
                             {kUsageMapping, "mapping"}});
}

Status check_buffer_params(const BufferParams& params) {
  constexpr uint32_t kKnownTypes = kMemoryDeviceLocal | kMemoryHostVisible | kMemoryHostCoherent |
                                   kMemoryHostCached;
  if (params.memory_type == 0 || (params.memory_type & ~kKnownTypes)) {
    return invalid_argument_error("memory type " + memory_type_string(params.memory_type) +
                                  " (bits " + std::to_string(params.memory_type) +
                                  ") is not a valid combination");
  }
  if (params.usage == 0 || (params.usage & ~uint32_t{kUsageDefault})) {
    return invalid_argument_error("buffer usage (bits " + std::to_string(params.usage) +
                                  ") is empty or has unknown bits");
  }
  return Status();
}

Status check_import_host(const BufferParams& params, const void* ptr, size_t size) {
  KILN_RETURN_IF_ERROR(check_buffer_params(params));
  if (!ptr && size > 0) return invalid_argument_error("import_host: null pointer");
  return Status();
}

// --- Mapping ---

Mapping::Mapping(Mapping&& other) noexcept { *this = std::move(other); }

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (storage_) storage_->unmap(offset_, length_, access_, data_);
    storage_ = std::move(other.storage_);
    offset_ = other.offset_;
    length_ = other.length_;
    access_ = other.access_;
    data_ = other.data_;
    other.storage_.reset();
    other.data_ = nullptr;
    other.length_ = 0;
  }
  return *this;
}

Mapping::~Mapping() {
  if (storage_) storage_->unmap(offset_, length_, access_, data_);
}

// --- Buffer ---

Buffer::Buffer(std::shared_ptr<BufferStorage> storage, const void* device_tag, uint32_t memory_type,
               uint32_t usage, size_t allocation_size, size_t offset, size_t length)
    : storage_(std::move(storage)),
      device_tag_(device_tag),
      memory_type_(memory_type),
      usage_(usage),
      allocation_size_(allocation_size),
      offset_(offset),
      length_(length) {}

Result<size_t> Buffer::check_range(size_t offset, size_t length, const char* what) const {
  if (offset > length_) {
    return invalid_argument_error(std::string(what) + ": offset " + std::to_string(offset) +
                                  " is past the end of a buffer of " + std::to_string(length_) +
                                  " bytes");
  }
  if (length == kWholeBuffer) return length_ - offset;
  if (length > length_ - offset) {
    return invalid_argument_error(std::string(what) + ": range [" + std::to_string(offset) + ", " +
                                  std::to_string(offset) + " + " + std::to_string(length) +
                                  ") is outside a buffer of " + std::to_string(length_) + " bytes");
  }
  return length;
}

Result<BufferRef> Buffer::subspan(size_t offset, size_t length) const {
  KILN_ASSIGN_OR_RETURN(size_t resolved, check_range(offset, length, "subspan"));
  return std::make_shared<Buffer>(storage_, device_tag_, memory_type_, usage_, allocation_size_,
                                  offset_ + offset, resolved);
}

Result<Mapping> Buffer::map(MapAccess access, size_t offset, size_t length) {
  if (!(memory_type_ & kMemoryHostVisible)) {
    return permission_denied_error("map: buffer memory is " + memory_type_string(memory_type_) +
                                   ", not host-visible");
  }
  if (!(usage_ & kUsageMapping)) {
    return permission_denied_error("map: buffer usage is " + buffer_usage_string(usage_) +
                                   ", without mapping");
  }
  KILN_ASSIGN_OR_RETURN(size_t resolved, check_range(offset, length, "map"));
  Mapping mapping;
  void* data = nullptr;
  if (resolved > 0) KILN_RETURN_IF_ERROR(storage_->map(offset_ + offset, resolved, access, &data));
  mapping.storage_ = resolved > 0 ? storage_ : nullptr;
  mapping.offset_ = offset_ + offset;
  mapping.length_ = resolved;
  mapping.access_ = access;
  mapping.data_ = data;
  return mapping;
}

Status Buffer::read_data(size_t offset, void* dst, size_t length) {
  KILN_ASSIGN_OR_RETURN(Mapping mapping, map(MapAccess::kRead, offset, length));
  if (length) std::memcpy(dst, mapping.data(), length);
  return Status();
}

Status Buffer::write_data(size_t offset, const void* src, size_t length) {
  KILN_ASSIGN_OR_RETURN(Mapping mapping, map(MapAccess::kWrite, offset, length));
  if (length) std::memcpy(mapping.data(), src, length);
  return Status();
}

}  // namespace kiln::hal
