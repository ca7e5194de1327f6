# tests/backend-ops.cmake -- the op conformance suite (included from tests/CMakeLists.txt).
# Runs every op on the cpu backend and on every other backend that initialises
# (opencl:0, cuda:0; absent devices are skipped with "not available: ...").
add_executable(test-backend-ops ${CMAKE_CURRENT_LIST_DIR}/test-backend-ops.c
               ${CMAKE_CURRENT_LIST_DIR}/backend-ops/cases.c    # per-op builders, tolerances, descriptors
               ${CMAKE_CURRENT_LIST_DIR}/backend-ops/cases-train.c   # the training ops' (float64 references, fd checks)
               ${CMAKE_CURRENT_LIST_DIR}/backend-ops/cases.c     # per-op builders, tolerances, descriptors
               ${CMAKE_CURRENT_LIST_DIR}/backend-ops/cases-train-b.c  # training ops, set B: float64 refs, finite differences
               ${CMAKE_CURRENT_LIST_DIR}/backend-ops/cases-train-c.c  # training ops, set C (TabSTAR): float64 refs
               ${CMAKE_CURRENT_LIST_DIR}/backend-ops/cases-attn-drop.c) # ATTENTION with dropout: float64 refs
target_include_directories(test-backend-ops PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/core)
target_link_libraries(test-backend-ops PRIVATE nofall)
add_test(NAME backend-ops COMMAND test-backend-ops)
set_tests_properties(backend-ops PROPERTIES TIMEOUT 900)
