/* GCC wrong code: loop SLP of if-converted conditional loads (.MASK_LOAD) uses the mask of the
 * first vector for every vector of the SLP group.
 *
 * Affected: GCC 12.2 (Debian 12.2.0-14) at -O3 or -O2 (which vectorizes in GCC 12) with any AVX
 * target (-mavx, -mavx2, -march=native on znver3); clang 14 and GCC without AVX (no masked-load
 * instructions) are correct. Other GCC versions were not available to test.
 *
 * What happens: if-conversion (-ftree-loop-if-convert) turns `t[i] ? x[i] : 0.0f` into
 * .MASK_LOAD (&x[i], mask = t[i] != 0). The three statements form one SLP group of size 3; with
 * 8 floats per vector one vector iteration covers 24 elements, i.e. 3 vectors of x and 3 vectors
 * of masks. The vectorizer emits the 3 masked loads (vmaskmovps) all with mask vector 0, so
 * elements of vectors 1 and 2 whose own mask is set but whose lane in mask 0 is clear load as 0.
 * (-fdump-tree-vect-details shows three `.MASK_LOAD (vectp_x..., 32B, mask__N)` with the same
 * mask__N.) Group sizes 3, 5, 6, 7, 12 fail; 2, 4, 8 do not. kiln hit this with
 * `p[a, b] = sum(select(t[a, b] == k, x[k, a, b], 0))` over f32[2, 64, 6].
 *
 * Avoided by -fno-tree-loop-if-convert (no masked loads are created; what kiln uses), or by
 * -fno-tree-loop-vectorize / -mno-avx (much slower). NOT avoided by -fno-tree-slp-vectorize,
 * -fvect-cost-model=very-cheap, -mprefer-vector-width=128, -mno-avx2, -O2.
 *
 *   gcc -O3 -mavx2 slp_masked_load_wrong_mask.c && ./a.out      # prints a mismatch, exit 1
 *   gcc -O3 -mavx2 -fno-tree-loop-if-convert slp_masked_load_wrong_mask.c && ./a.out   # ok
 */
#include <stdio.h>

#define N 64

#ifdef __clang__
#define NOIPA __attribute__((noinline))
#else
#define NOIPA __attribute__((noipa))
#endif

NOIPA void f(const int *restrict t, const float *restrict x, float *restrict p) {
  for (int a = 0; a < N; ++a) {
    p[3 * a + 0] = t[3 * a + 0] ? x[3 * a + 0] : 0.0f;
    p[3 * a + 1] = t[3 * a + 1] ? x[3 * a + 1] : 0.0f;
    p[3 * a + 2] = t[3 * a + 2] ? x[3 * a + 2] : 0.0f;
  }
}

int main(void) {
  static int t[3 * N];
  static float x[3 * N], p[3 * N];
  for (int i = 0; i < 3 * N; i++) {
    t[i] = i % 3 == 0;
    x[i] = (float)(i + 1);
  }
  f(t, x, p);
  int bad = 0;
  for (volatile int i = 0; i < 3 * N; i++) { /* volatile: keep the reference scalar */
    float want = t[i] ? x[i] : 0.0f;
    if (p[i] != want) {
      if (!bad) printf("mismatch: p[%d] = %g, want %g\n", (int)i, p[i], want);
      bad++;
    }
  }
  if (bad) {
    printf("%d of %d elements wrong\n", bad, 3 * N);
    return 1;
  }
  printf("ok\n");
  return 0;
}
