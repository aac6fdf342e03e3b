# FfpaDocsChannels.cmake: docs advertise no CUDA channel that does not exist. One rule
# for the configure guard of profile full (FfpaReleaseGuards) and the publish targets
# (FfpaPublish runs this file as a script before the engine), so the two can never
# disagree about what counts as a mention.
#
#   ffpa_check_docs_channels(DOCS <file-or-dir>... CHANNELS <channel>... [BASE <dir>])
#     DOCS      files, or directories scanned for *.md, *.rst, *.txt and *.html
#     CHANNELS  the channels that exist (cmake/release-matrix.json "channels")
#     BASE      paths in the message are shown relative to it
#   A mention is an index path (whl/cu14/, cu14/), a local version (+cu14) or an option
#   value (=cu14, channel cu14) naming a channel not in CHANNELS; prose such as "there
#   is no cu14" is not one. Any mention is a FATAL_ERROR listing the lines.
#
# As a script: cmake "-DDOCS=a@@b" "-DCHANNELS=cu13" [-DBASE=dir] -P FfpaDocsChannels.cmake
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  cmake_minimum_required(VERSION 3.25)  # script mode: the policies of the project (IN_LIST)
endif()
include_guard(GLOBAL)

function(ffpa_check_docs_channels)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "BASE" "DOCS;CHANNELS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ffpa_check_docs_channels: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_CHANNELS)
    message(FATAL_ERROR "ffpa_check_docs_channels: CHANNELS is required (cmake/release-matrix.json)")
  endif()
  set(_files "")
  foreach(_d IN LISTS arg_DOCS)
    if(IS_DIRECTORY "${_d}")
      file(GLOB_RECURSE _more "${_d}/*.md" "${_d}/*.rst" "${_d}/*.txt" "${_d}/*.html")
      list(SORT _more)
      list(APPEND _files ${_more})
    elseif(EXISTS "${_d}")
      list(APPEND _files "${_d}")
    endif()
  endforeach()
  set(_re "([/+=]cu[0-9]+|cu[0-9]+/|channel cu[0-9]+)")
  set(_hits "")
  foreach(_f IN LISTS _files)
    file(STRINGS "${_f}" _lines REGEX "${_re}")
    foreach(_l IN LISTS _lines)
      string(REGEX MATCHALL "${_re}" _tokens "${_l}")
      foreach(_t IN LISTS _tokens)
        string(REGEX MATCH "cu[0-9]+" _ch "${_t}")
        if(NOT _ch IN_LIST arg_CHANNELS)
          set(_shown "${_f}")
          if(arg_BASE)
            file(RELATIVE_PATH _shown "${arg_BASE}" "${_f}")
          endif()
          list(APPEND _hits "${_shown}: ${_l}")
          break()
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(_hits)
    list(JOIN _hits "\n  " _list)
    list(JOIN arg_CHANNELS ", " _known)
    message(FATAL_ERROR "docs mention a channel that does not exist (channels: ${_known}); fix these lines:\n  ${_list}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  string(REPLACE "@@" ";" _docs "${DOCS}")
  string(REPLACE "@@" ";" _channels "${CHANNELS}")
  ffpa_check_docs_channels(DOCS ${_docs} CHANNELS ${_channels} BASE "${BASE}")
  message(STATUS "docs name no channel besides ${_channels}")
endif()
