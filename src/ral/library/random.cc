// random_uniform and random_normal: Philox4x32-10 words mapped to numbers as docs/ral.md says.
// The numbers depend only on (seed, call site, run, element), so the host devices register this
// same code and get the same bits; cuda runs the same mapping as a kernel (cuda_kernels.h). f16
// and bf16 take the f32 numbers of the same stream, rounded to nearest even.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string_view>

#include "kiln/ral/execution_context.h"
#include "ral/library/library.h"
#include "ral/library/philox.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

PhiloxStream stream_of(const ExecutionContext& context, int64_t call_site) {
  return PhiloxStream{context.seed(), static_cast<uint32_t>(call_site), static_cast<uint32_t>(context.run())};
}

// Every function reads its stream's words in order, a chunk at a time: element i of an f32
// uniform takes word i, of an f64 uniform words 2i and 2i + 1; normal pair j takes words 2j and
// 2j + 1 (f32) or 4j to 4j + 3 (f64).
template <typename Consume>
void for_each_chunk(const PhiloxStream& stream, uint64_t words, Consume&& consume) {
  constexpr uint64_t kChunk = 4096;  // a multiple of 4: chunks start on a block
  uint32_t buffer[kChunk];
  for (uint64_t at = 0; at < words; at += kChunk) {
    const uint64_t n = std::min(kChunk, words - at);
    stream.fill(at / 4, buffer, n);
    consume(at, buffer, n);
  }
}

// The functions below fill `count` elements at `data`, whatever the tensor's rank: the functions
// of each rank (at the end) only pass those on, so that each is compiled once per element type.
template <typename T>
Status uniform_of(ExecutionContext* context, T* data, uint64_t count, T lo, T hi, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_uniform_range(lo, hi));
  if constexpr (std::is_same_v<T, float>) {
    // The numbers are made as the words are, in vector registers, with no buffer of words between.
    stream_of(*context, call_site).fill_uniform(0, data, count, lo, hi);
  } else {
    for_each_chunk(stream_of(*context, call_site), 2 * count, [&](uint64_t at, const uint32_t* words, uint64_t n) {
      for (uint64_t i = 0; i < n / 2; ++i) {
        data[at / 2 + i] = scale_uniform(uniform_f64(words[2 * i], words[2 * i + 1]), lo, hi);
      }
    });
  }
  return Status();
}

// Box-Muller on a pair of uniforms, u1 in (0, 1] (so the logarithm is finite) and u2 in [0, 1).
void box_muller(double u1, double u2, double* z0, double* z1) {
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  *z0 = radius * std::cos(angle);
  *z1 = radius * std::sin(angle);
}

// The normal numbers of T (float or double: the words a pair takes) in element order, each
// handed to store(i, value) in double.
template <typename T, typename Store>
void normal_numbers(const ExecutionContext& context, uint64_t count, T mean, T std_dev, int64_t call_site,
                    Store&& store) {
  constexpr uint64_t kWordsPerPair = 2 * sizeof(T) / 4;
  const uint64_t pairs = (count + 1) / 2;
  for_each_chunk(stream_of(context, call_site), pairs * kWordsPerPair,
                 [&](uint64_t at, const uint32_t* words, uint64_t n) {
                   for (uint64_t p = 0; p < n / kWordsPerPair; ++p) {
                     const uint32_t* w = words + p * kWordsPerPair;
                     double u1, u2;
                     if constexpr (std::is_same_v<T, float>) {
                       u1 = 1.0 - uniform_f32(w[0]);
                       u2 = uniform_f32(w[1]);
                     } else {
                       u1 = 1.0 - uniform_f64(w[0], w[1]);
                       u2 = uniform_f64(w[2], w[3]);
                     }
                     double z0, z1;
                     box_muller(u1, u2, &z0, &z1);
                     const uint64_t j = at / kWordsPerPair + p;
                     store(2 * j, mean + std_dev * z0);
                     if (2 * j + 1 < count) store(2 * j + 1, mean + std_dev * z1);
                   }
                 });
}

template <typename T>
Status normal_of(ExecutionContext* context, T* data, uint64_t count, T mean, T std_dev, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_normal_parameters(mean, std_dev));
  normal_numbers(*context, count, mean, std_dev, call_site, [&](uint64_t i, double v) { data[i] = static_cast<T>(v); });
  return Status();
}

// f16 and bf16 (T is Half or BFloat16): the f32 numbers of the same stream, each rounded to
// nearest even; lo, hi, mean and std are f32.
template <typename T>
void store_narrow(const float* from, uint64_t count, T* to) {
  for (uint64_t i = 0; i < count; ++i) {
    to[i].bits = std::is_same_v<T, Half> ? ir::f16_bits(from[i]) : ir::bf16_bits(from[i]);
  }
}

template <typename T>
Status uniform_narrow_of(ExecutionContext* context, T* data, uint64_t count, float lo, float hi, int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_uniform_range(lo, hi));
  constexpr uint64_t kChunk = 4096;  // a multiple of 4: chunks start on a block
  float numbers[kChunk];
  const PhiloxStream stream = stream_of(*context, call_site);
  for (uint64_t at = 0; at < count; at += kChunk) {
    const uint64_t n = std::min(kChunk, count - at);
    stream.fill_uniform(at / 4, numbers, n, lo, hi);
    store_narrow(numbers, n, data + at);
  }
  return Status();
}

template <typename T>
Status normal_narrow_of(ExecutionContext* context, T* data, uint64_t count, float mean, float std_dev,
                        int64_t call_site) {
  KILN_RETURN_IF_ERROR(check_normal_parameters(mean, std_dev));
  normal_numbers(*context, count, mean, std_dev, call_site, [&](uint64_t i, double v) {
    const float f = static_cast<float>(v);
    store_narrow(&f, 1, data + i);
  });
  return Status();
}

// random_uniform or random_normal of rank N through `Fill` (one of the functions above); P is the
// parameters' type (f32 for f16 and bf16).
template <auto Fill, typename T, typename P, int N>
Status fill_rank(ExecutionContext* context, MemRef<T, N> r, P a, P b, int64_t call_site) {
  return Fill(context, r.data, static_cast<uint64_t>(r.element_count()), a, b, call_site);
}

Status add_random(Registry& registry, std::string_view device) {
  KILN_RETURN_IF_ERROR((for_each_type_and_rank<Half, BFloat16>([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(
        make_function_for<"random_uniform", &fill_rank<&uniform_narrow_of<T>, T, float, N>>(device)));
    return registry.add(make_function_for<"random_normal", &fill_rank<&normal_narrow_of<T>, T, float, N>>(device));
  })));
  return for_each_type_and_rank<float, double>([&]<typename T, int N>() {
    KILN_RETURN_IF_ERROR(registry.add(make_function_for<"random_uniform", &fill_rank<&uniform_of<T>, T, T, N>>(device)));
    return registry.add(make_function_for<"random_normal", &fill_rank<&normal_of<T>, T, T, N>>(device));
  });
}

}  // namespace

Status register_random(Registry& registry) {
  for (std::string_view device : {"cpu", "opencl", "interp"}) KILN_RETURN_IF_ERROR(add_random(registry, device));
  return Status();
}

}  // namespace kiln::ral::library
