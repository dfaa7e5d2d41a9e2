# `train_moons --ranks` under mpiexec (tests/CMakeLists.txt runs it with cmake -P):
#  - every rank ends with bitwise-identical parameters (the files each rank saves, by SHA-256, and
#    the fingerprints the ranks print);
#  - the ring of streams inside each rank composes with the sum across ranks: `--streams 2` and
#    `--streams 1` train bitwise the same parameters across the same ranks (STREAMS_TOO);
#  - the accuracy is one process's to within what the other order of the sums gives;
#  - `--ranks` in a process started alone is a world of one: bitwise what training without it is.
#
# -D variables: MPIEXEC, NP_FLAG, RANKS, STREAMS, STREAMS_TOO (ON/OFF), TRAIN_MOONS, WORK, EPOCHS.

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# Runs COMMAND...; fails the test unless it exits 0; OUT gets its standard output.
function(run out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exit status ${rc} from: ${ARGN}\n${stdout}\n${stderr}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

# The training accuracy of the last epoch that rank 0 prints, in tenths of a percent.
function(accuracy_of out text)
  if(NOT text MATCHES "accuracy ([0-9]+)\\.([0-9])%, ")
    message(FATAL_ERROR "no accuracy line in:\n${text}")
  endif()
  math(EXPR tenths "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
  set(${out} ${tenths} PARENT_SCOPE)
endfunction()

set(common --epochs ${EPOCHS} --points 10000)

# Across RANKS processes; every rank saves its parameters and prints their fingerprint.
function(train_on_ranks out streams)
  run(stdout ${MPIEXEC} ${NP_FLAG} ${RANKS} --oversubscribe ${TRAIN_MOONS} --ranks --streams ${streams} ${common}
      --save ${WORK}/streams${streams}.rank{rank}.bin)
  file(SHA256 ${WORK}/streams${streams}.rank0.bin first)
  math(EXPR last "${RANKS} - 1")
  foreach(r RANGE 1 ${last})
    file(SHA256 ${WORK}/streams${streams}.rank${r}.bin hash)
    if(NOT hash STREQUAL first)
      message(FATAL_ERROR "--streams ${streams}: rank ${r}'s parameters differ from rank 0's\n${stdout}")
    endif()
  endforeach()
  string(REGEX MATCHALL "rank [0-9]+ of ${RANKS}: parameters fingerprint [0-9a-f]+" lines "${stdout}")
  list(LENGTH lines count)
  string(REGEX MATCHALL "fingerprint [0-9a-f]+" prints "${lines}")
  list(REMOVE_DUPLICATES prints)
  list(LENGTH prints distinct)
  if(NOT count EQUAL RANKS OR NOT distinct EQUAL 1)
    message(FATAL_ERROR "--streams ${streams}: expected ${RANKS} equal fingerprints:\n${stdout}")
  endif()
  if(NOT stdout MATCHES "across ${RANKS} ranks, 2 shards each \\(MPI rank 0 of ${RANKS}")
    message(FATAL_ERROR "rank 0 does not say it trains across ${RANKS} ranks over MPI:\n${stdout}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

train_on_ranks(ranks_output ${STREAMS})
if(STREAMS_TOO)
  train_on_ranks(one_stream_output 1)
  file(SHA256 ${WORK}/streams1.rank0.bin one_stream)
  file(SHA256 ${WORK}/streams${STREAMS}.rank0.bin streams)
  if(NOT one_stream STREQUAL streams)
    message(FATAL_ERROR "across ${RANKS} ranks, --streams ${STREAMS} and --streams 1 trained different parameters")
  endif()
endif()

# One process, and one process with --ranks (a world of one): the same parameters bit for bit.
run(alone_output ${TRAIN_MOONS} --streams ${STREAMS} ${common} --save ${WORK}/alone.bin)
run(world_of_one_output ${TRAIN_MOONS} --ranks --streams ${STREAMS} ${common} --save ${WORK}/world_of_one.bin)
file(SHA256 ${WORK}/alone.bin alone)
file(SHA256 ${WORK}/world_of_one.bin world_of_one)
if(NOT alone STREQUAL world_of_one)
  message(FATAL_ERROR "--ranks in a process started alone trained other parameters than without it")
endif()
if(NOT world_of_one_output MATCHES "across 1 rank, 2 shards each \\(a world of one")
  message(FATAL_ERROR "a process started alone does not say it is a world of one:\n${world_of_one_output}")
endif()

# Each step sums the gradients of the same points as one process, in another order: rounding
# apart, the same training, so the same accuracy to within a point.
accuracy_of(on_ranks "${ranks_output}")
accuracy_of(alone "${alone_output}")
math(EXPR gap "${on_ranks} - ${alone}")
if(gap GREATER 10 OR gap LESS -10)
  message(FATAL_ERROR "accuracy across ${RANKS} ranks ${on_ranks}/1000, one process ${alone}/1000\n"
                      "${ranks_output}\n${alone_output}")
endif()
message(STATUS "accuracy across ${RANKS} ranks ${on_ranks}/1000, one process ${alone}/1000; ranks bitwise equal")
