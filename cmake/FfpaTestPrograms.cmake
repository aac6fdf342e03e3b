# FfpaTestPrograms.cmake: what only the tests run is built by the test job, not the main job.
#
# The main job (`cmake --workflow --preset wheels`, build preset `wheels`: targets all and
# package) builds what the wheels ship: the kernel library, the bindings, the staged
# package and the release engine. The programs that only tests run (the CPU emulator,
# the GoogleTest binaries, the ELF test libraries, the device-check runner and its
# reference) are left out of ALL and collected under one target, ffpa_test_programs,
# which the build presets of the test jobs (`dev`, `ci`) name next to all. The fuzzers
# are built by their own CTest fixture (index/fuzz), never by either.
include_guard(GLOBAL)

if(NOT TARGET ffpa_test_programs)
  add_custom_target(ffpa_test_programs
    COMMENT "Programs that only the tests run (built by the dev and ci build presets, not by wheels)")
endif()

# ffpa_test_program(<target>...): out of ALL, built by ffpa_test_programs.
function(ffpa_test_program)
  foreach(_target IN LISTS ARGN)
    if(NOT TARGET ${_target})
      message(FATAL_ERROR "ffpa_test_program: no target '${_target}'")
    endif()
    set_target_properties(${_target} PROPERTIES EXCLUDE_FROM_ALL ON)
    add_dependencies(ffpa_test_programs ${_target})
  endforeach()
endfunction()

# ffpa_test_program_directory(<dir>...): every target that <dir> and the directories
# below it define is a test program (a directory that holds only tests).
function(ffpa_test_program_directory)
  foreach(_dir IN LISTS ARGN)
    get_property(_targets DIRECTORY "${_dir}" PROPERTY BUILDSYSTEM_TARGETS)
    if(_targets)
      ffpa_test_program(${_targets})
    endif()
    get_property(_subdirs DIRECTORY "${_dir}" PROPERTY SUBDIRECTORIES)
    if(_subdirs)
      ffpa_test_program_directory(${_subdirs})
    endif()
  endforeach()
endfunction()
