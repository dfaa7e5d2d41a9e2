/* The job's processes through the C API, from plain C99: kiln_world_rank / _size / _describe and
 * a program with collectives run on every device given, its values checked against what the
 * ranks' inputs make. Three ways to run it (tests/CMakeLists.txt):
 *   kiln_capi_world_test DEVICE...                    alone: a world of one, every collective a copy
 *   mpiexec -np R kiln_capi_world_test DEVICE...      kiln initializes MPI itself
 *   mpiexec -np R kiln_capi_world_test --own-comm DEVICE...
 *       the test initializes MPI, splits MPI_COMM_WORLD into groups with their ranks reversed
 *       and hands its group's communicator to kiln (kiln_world_use_mpi_comm): kiln's world is
 *       then the group, which the values show (a sum over the group, not over every process).
 * A device that is not present is skipped; exit 0 when every check passed. */
#include <stdio.h>
#include <string.h>

#ifdef KILN_TEST_MPI
#include <mpi.h>
#endif

#include "checks.h"
#include "kiln/kiln.h"
#include "one_routine.h"

/* Rank r's inputs: x = [r + 1, 10 (r + 1), -r], k = [3 r, 7 - r]. */
static float x_of(int r, int i) { return i == 0 ? (float)(r + 1) : i == 1 ? (float)(10 * (r + 1)) : (float)-r; }
static int32_t k_of(int r, int i) { return i == 0 ? 3 * r : 7 - r; }

static const char* program_text(int ranks) {
  static char text[1024];
  snprintf(text, sizeof text,
           "input x : f32[3]\n"
           "input k : i32[2]\n"
           "output sum : f32[3]\noutput mean : f32[3]\noutput top : i32[2]\noutput low : i32[2]\n"
           "output all : f32[%d]\noutput last : f32[3]\noutput twice : f32[3]\n"
           "output r : i32\noutput n : i32\n"
           "call allreduce(x) -> sum\n"
           "call allreduce(x, op=1) -> mean\n"
           "call allreduce(k, op=2) -> top\n"
           "call allreduce(k, op=3) -> low\n"
           "call allgather(x) -> all\n"
           "call broadcast(x, root=%d) -> last\n"
           "twice[i] = sum[i] * 2\n"
           "call rank() -> r\n"
           "call world_size() -> n\n",
           3 * ranks, ranks - 1);
  return text;
}

/* Runs the program on `device` as rank `me` of `ranks` and checks every output. */
static int run_on(const char* device, int me, int ranks) {
  struct one_routine h;
  const int64_t x_dims[1] = {3}, k_dims[1] = {2};
  int64_t all_dims[1];
  float x[3], sum[3], mean[3], last[3], twice[3], all[3 * 8], expect;
  int32_t k[2], top[2], low[2], r = -1, n = -1;
  int i, q;

  REQUIRE(ranks <= 8);
  all_dims[0] = 3 * ranks;
  for (i = 0; i < 3; ++i) x[i] = x_of(me, i);
  for (i = 0; i < 2; ++i) k[i] = k_of(me, i);
  if (one_routine_open(&h, device, program_text(ranks), "main") != KILN_OK) {
    fprintf(stderr, "on %s: %s\n", device, kiln_last_error());
    one_routine_free(&h);
    return 1;
  }
  OK(kiln_tensor_write(h.tensors, "x", KILN_F32, x_dims, 1, x, sizeof x));
  OK(kiln_tensor_write(h.tensors, "k", KILN_I32, k_dims, 1, k, sizeof k));
  OK(kiln_routine_run(h.routine));
  OK(kiln_stream_await(h.stream));
  OK(kiln_tensor_read(h.tensors, "sum", KILN_F32, x_dims, 1, sum, sizeof sum));
  OK(kiln_tensor_read(h.tensors, "mean", KILN_F32, x_dims, 1, mean, sizeof mean));
  OK(kiln_tensor_read(h.tensors, "top", KILN_I32, k_dims, 1, top, sizeof top));
  OK(kiln_tensor_read(h.tensors, "low", KILN_I32, k_dims, 1, low, sizeof low));
  OK(kiln_tensor_read(h.tensors, "all", KILN_F32, all_dims, 1, all, sizeof(float) * 3 * (size_t)ranks));
  OK(kiln_tensor_read(h.tensors, "last", KILN_F32, x_dims, 1, last, sizeof last));
  OK(kiln_tensor_read(h.tensors, "twice", KILN_F32, x_dims, 1, twice, sizeof twice));
  OK(kiln_tensor_read(h.tensors, "r", KILN_I32, NULL, 0, &r, sizeof r));
  OK(kiln_tensor_read(h.tensors, "n", KILN_I32, NULL, 0, &n, sizeof n));
  one_routine_free(&h);
  for (i = 0; i < 3; ++i) {
    expect = 0;
    for (q = 0; q < ranks; ++q) expect += x_of(q, i);
    CHECK(sum[i] == expect);
    CHECK(twice[i] == 2 * expect);
    CHECK(mean[i] == expect / (float)ranks);
    CHECK(last[i] == x_of(ranks - 1, i));
    for (q = 0; q < ranks; ++q) CHECK(all[3 * q + i] == x_of(q, i));
  }
  /* k[0] = 3 r grows with the rank, k[1] = 7 - r falls. */
  CHECK(top[0] == k_of(ranks - 1, 0) && top[1] == k_of(0, 1));
  CHECK(low[0] == k_of(0, 0) && low[1] == k_of(ranks - 1, 1));
  CHECK(r == me);
  CHECK(n == ranks);
  if (failures) fprintf(stderr, "on %s, rank %d of %d\n", device, me, ranks);
  return 0;
}

int main(int argc, char** argv) {
  int first_device = 1, own_comm = 0, i;
  int32_t rank = -1, size = -1;
  const char* description = NULL;
#ifdef KILN_TEST_MPI
  int provided = 0, world_rank = 0, world_size = 1, initialized = 0, group_size = 1;
  MPI_Comm group = MPI_COMM_NULL;
#endif

  if (argc > 1 && strcmp(argv[1], "--own-comm") == 0) {
    own_comm = 1;
    first_device = 2;
  }
  if (own_comm) {
#ifdef KILN_TEST_MPI
    /* As a framework that manages MPI would: initialized here, kiln told which communicator. */
    REQUIRE(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    /* Groups of two where there are four or more processes, else one group; within a group the
     * ranks run backwards (key -rank). */
    group_size = world_size >= 4 ? 2 : world_size;
    REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, world_rank / group_size, -world_rank, &group) == MPI_SUCCESS);
    CHECK(kiln_world_use_mpi_comm(NULL) == KILN_INVALID_ARGUMENT);
    OK(kiln_world_use_mpi_comm(&group));
#else
    fprintf(stderr, "--own-comm needs a test built with MPI\n");
    return 1;
#endif
  }

  CHECK(kiln_world_rank(NULL) == KILN_INVALID_ARGUMENT);
  REQUIRE(kiln_world_rank(&rank) == KILN_OK);
  REQUIRE(kiln_world_size(&size) == KILN_OK);
  REQUIRE(kiln_world_describe(&description) == KILN_OK);
  CHECK(size >= 1 && rank >= 0 && rank < size);
#ifdef KILN_TEST_MPI
  MPI_Initialized(&initialized);
  if (own_comm) {
    CHECK(size == group_size);
    CHECK(rank == group_size - 1 - world_rank % group_size);
  } else if (initialized) {
    /* kiln initialized MPI (mpiexec started this process): its world is MPI_COMM_WORLD's. */
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    CHECK(rank == world_rank && size == world_size);
  }
  if (initialized) {
    CHECK(strstr(description, "MPI rank") != NULL);
    /* The world is made: a communicator handed in now comes too late. */
    CHECK(kiln_world_use_mpi_comm(&group) == KILN_FAILED_PRECONDITION);
    ERROR_SAYS("already");
  }
#endif
  if (size == 1 && !own_comm) {
    CHECK(rank == 0);
    CHECK(strstr(description, "world of one") != NULL);
  }

  for (i = first_device; i < argc; ++i) {
    if (!device_present(argv[i])) {
      printf("device %s is not available here: skipped\n", argv[i]);
      continue;
    }
    if (run_on(argv[i], rank, size) != 0) ++failures;
  }
#ifdef KILN_TEST_MPI
  if (own_comm) {
    /* The host finalizes the MPI it initialized (the communicator it handed in lives till then). */
    MPI_Finalize();
  }
#endif
  if (failures == 0) printf("rank %d of %d (%s): every check passed\n", (int)rank, (int)size, description);
  return failures == 0 ? 0 : 1;
}
