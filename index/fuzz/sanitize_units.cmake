# Injected into a configure of index/ by the test index.sanitize.unit
# (-DCMAKE_PROJECT_ffpa_index_INCLUDE=<this file>): the core library and its
# GoogleTest units are compiled and linked with ASan+UBSan, every finding fatal.
#
# Only those two targets: not CMAKE_CXX_FLAGS, because the test shared objects
# (index/tests/testlib) must stay plain ELF files. The Elf and Manylinux tests compare
# their DT_NEEDED and symbol versions with the policy, and an instrumented .so
# would need libasan and libubsan.
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}/../../cmake")
include(FfpaCompilerLauncher)

# After the Release flags on the command line, so these win: -O0 because building
# is most of this test's time and -O1 nearly doubles it (ASan checks every access
# either way), and assertions stay on.
set(_ffpa_sanitize_flags -O0 -g -UNDEBUG -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)

# Runs once the whole of index/ is configured, when both targets exist.
function(_ffpa_sanitize_unit_targets)
  foreach(target IN ITEMS ffpa_index_core ffpa_index_unit_tests)
    if(NOT TARGET ${target})
      message(FATAL_ERROR "sanitize_units.cmake: index/ defines no target ${target}; update the list "
                          "in index/fuzz/sanitize_units.cmake")
    endif()
    target_compile_options(${target} PRIVATE ${_ffpa_sanitize_flags})
  endforeach()
  target_link_options(ffpa_index_unit_tests PRIVATE ${_ffpa_sanitize_flags})
  # A fixed place for the driver to run it from.
  set_target_properties(ffpa_index_unit_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin")
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _ffpa_sanitize_unit_targets)
