#include <math.h>
#include <stdint.h>

static inline float kiln_pick_f32(int pick, float a, float b) {
  union { float f; uint32_t u; } x, y;
  x.f = a;
  y.f = b;
  const uint32_t m = (uint32_t)0 - (uint32_t)(pick != 0);
  x.u = (x.u & ~m) | (y.u & m);
  return x.f;
}
static inline float kiln_relu_f32(float x) { return kiln_pick_f32(x <= 0.0f, x, 0.0f); }

/* kiln: translation unit */
int main_0(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  if (s->binding_count < 3u) return 1;
  if (id->x >= s->workgroup_count[0] || id->y != 0u || id->z != 0u) return 0;
  const float* restrict n0 = (const float*)s->bindings[0];
  const float* restrict n1 = (const float*)s->bindings[1];
  float* restrict n2 = (float*)s->bindings[2];
  const int64_t chunk = (8 + (int64_t)s->workgroup_count[0] - 1) / (int64_t)s->workgroup_count[0];
  const int64_t begin = (int64_t)id->x * chunk;
  const int64_t end = begin + chunk < 8 ? begin + chunk : 8;
  for (int64_t v0 = begin; v0 < end; ++v0) {
    for (int64_t v1 = 0; v1 < 5; ++v1) {
      n2[v0 * 5 + v1] = kiln_relu_f32(n0[v0 * 5 + v1] * 2.0f + n1[v1]);
    }
  }
  return 0;
}
