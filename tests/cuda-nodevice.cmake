# tests/cuda-nodevice.cmake -- cuda backend tests that need no GPU.
# Included from tests/CMakeLists.txt (after the nofall-cli target exists).
#
# cuda-nodevice: on a GPU-less machine `nofall devices` reports cuda as
#   compiled in with no device (or not compiled in) and `nofall run --device
#   cuda:0` fails with a message naming cuda and writes no logits.
#   Skipped (77) where a CUDA device is actually present.
# cuda-emu-verify (NOFALL_CUDA_EMU=ON builds only): the cuda backend's host
#   and kernel code, run on the host emulator, matches the cpu reference on
#   a small Mitra model.
add_test(NAME cuda-nodevice
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cuda-nodevice.sh $<TARGET_FILE:nofall-cli>
                 ${CMAKE_CURRENT_BINARY_DIR}/cuda-nodevice)
set_tests_properties(cuda-nodevice PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT 120
    ENVIRONMENT "NF_CUDA_EMU_DEVICES=0")

if(NOFALL_CUDA_EMU)
  add_test(NAME cuda-emu-verify
           COMMAND sh -c "rm -rf \"$1\" && \"$0\" gen-weights mitra --out \"$1\" --dim 16 --layers 2 --heads 2 --outputs 3 --seed 7 && \"$0\" verify --model \"$1\" --device cuda:0 --against cpu --seeds 42 --max-abs 1e-5 --mean-abs 1e-6"
                   $<TARGET_FILE:nofall-cli> ${CMAKE_CURRENT_BINARY_DIR}/cuda-emu-model)
  set_tests_properties(cuda-emu-verify PROPERTIES TIMEOUT 600 PASS_REGULAR_EXPRESSION "RESULT=PASS")
  # Mitra's queries in passes (STREAM, RECOMPUTE) on the emulator, without the RSS part, on smaller tables
  # (the same plans; the cpu and opencl:0 run the full ones)
  add_test(NAME cuda-emu-stream COMMAND test-stream cuda:0 0 quick WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(cuda-emu-stream PROPERTIES TIMEOUT 600)
  add_test(NAME cuda-emu-workspace COMMAND test-workspace ${CMAKE_CURRENT_BINARY_DIR}/small-model cuda:0)
  set_tests_properties(cuda-emu-workspace PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED small_model)
  # device out of memory, at load and at the forward: clean failure, no artifacts
  add_test(NAME cuda-emu-oom COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cuda-emu-oom.sh $<TARGET_FILE:nofall-cli>
           ${CMAKE_CURRENT_BINARY_DIR}/cuda-emu-oom)
  set_tests_properties(cuda-emu-oom PROPERTIES TIMEOUT 120)
endif()

# cuda-emu-sptransformer-small (emulator builds): SpTransformer at small
# configurations on cuda:0 (the emulator) against the cpu: logits within fp32
# rounding, identical bucket choices, two runs bitwise identical
# (tests/test-spt-small.c, --quick: 7 of its 12 length cases, ~30 s); the
# real model is far too slow for the emulator.
# sptransformer-small-cuda (real cuda builds): the same on a GPU; skipped (77)
# without one.
if(NOFALL_CUDA_EMU)
  add_test(NAME cuda-emu-sptransformer-small COMMAND test-spt-small cuda:0 cpu --quick WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(cuda-emu-sptransformer-small PROPERTIES TIMEOUT 600)
  add_test(NAME cuda-emu-sptransformer-reuse COMMAND test-spt-reuse cuda:0 --quick WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(cuda-emu-sptransformer-reuse PROPERTIES TIMEOUT 600)
elseif(TARGET nofall-cuda-kernels)
  add_test(NAME sptransformer-small-cuda COMMAND test-spt-small cuda:0 cpu WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(sptransformer-small-cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# fixtures-cuda (real cuda builds): the upstream fixtures on cuda:0, against
# their PyTorch logits and against the cpu (tests/fixtures.sh); skipped (77)
# without a GPU. Not in emulator builds: too slow there (cuda-emu-verify and
# backend-ops cover the emulator).
if(TARGET nofall-cuda-kernels AND NOT NOFALL_CUDA_EMU)
  add_test(NAME fixtures-cuda COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/fixtures.sh $<TARGET_FILE:nofall-cli>
           ${CMAKE_CURRENT_LIST_DIR}/fixtures/mitra ${CMAKE_CURRENT_BINARY_DIR}/fixtures-cuda.tmp cuda:0)
  set_tests_properties(fixtures-cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()

# cuda-emu-chunked (emulator builds): the same with every ATTENTION through
# cuBLAS (NF_CUDA_ATTENTION=cublas; the small model's attentions would
# otherwise all take the one-kernel path) and a tiny work-buffer cap, so that
# attention runs in group and query-row chunks and accumulating LINEARs in
# row chunks.
if(NOFALL_CUDA_EMU)
  add_test(NAME cuda-emu-chunked
           COMMAND sh -c "rm -rf \"$1\" && \"$0\" gen-weights mitra --out \"$1\" --dim 16 --layers 2 --heads 2 --outputs 3 --seed 8 && \"$0\" verify --model \"$1\" --device cuda:0 --against cpu --seeds 100 --max-abs 1e-5 --mean-abs 1e-6"
                   $<TARGET_FILE:nofall-cli> ${CMAKE_CURRENT_BINARY_DIR}/cuda-emu-chunked-model)
  set_tests_properties(cuda-emu-chunked PROPERTIES TIMEOUT 600 PASS_REGULAR_EXPRESSION "RESULT=PASS"
                       ENVIRONMENT "NF_CUDA_CHUNK_FLOATS=37;NF_CUDA_ATTENTION=cublas")
endif()
