# FfpaSourceRecord.cmake: the source record an sdist carries (ffpa-source.json), from
# the one version computation (FfpaVersion.cmake), so the sdist builds the wheel its
# checkout would have built: same version, commit, dirty flag and commit time; and the
# version of that wheel (channel, cuda_version), which is the sdist's version too.
#
#   cmake -DOUT=<file> [-DMETADATA=<file>] [-DUNTRACKED=<file>] -P cmake/FfpaSourceRecord.cmake
#                                              (working directory: the source root)
#
# METADATA: also write the core metadata fields the wheel carries after Name and Version
# (ffpa_core_metadata, the wheels' one source), for the sdist's PKG-INFO (PEP 643).
# UNTRACKED: also write the untracked files that make the tree dirty (FfpaVersion.cmake's
# FFPA_SOURCE_UNTRACKED), for the backend's refusal of a dirty tree.
#
# Run by the PEP 517 backend (tools/pep517/ffpa_build_backend.py) when it makes an sdist;
# it reads <file> as data. In script mode CMAKE_SOURCE_DIR is the working directory.
cmake_minimum_required(VERSION 3.25)
if(NOT OUT)
  message(FATAL_ERROR "FfpaSourceRecord.cmake: pass -DOUT=<file>")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/FfpaVersion.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/FfpaReleaseMatrix.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/FfpaReleasePlan.cmake")
ffpa_compute_version()
# What the sdist builds: the local CUDA wheel of the newest channel (the one the release
# builds), whose version is also the sdist's own (installers require the two to agree).
list(GET FFPA_RELEASE_CHANNELS -1 _channel)
ffpa_channel_version("${FFPA_VERSION}" "${_channel}" _cuda_version LOCAL)
if(FFPA_SOURCE_DIRTY)
  set(_dirty true)
else()
  set(_dirty false)
endif()
set(_json "{}")
string(JSON _json SET "${_json}" name "\"ffpa-attn\"")
string(JSON _json SET "${_json}" version "\"${FFPA_VERSION}\"")
string(JSON _json SET "${_json}" channel "\"${_channel}\"")
string(JSON _json SET "${_json}" cuda_version "\"${_cuda_version}\"")
string(JSON _json SET "${_json}" source_commit "\"${FFPA_SOURCE_COMMIT}\"")
string(JSON _json SET "${_json}" source_dirty ${_dirty})
string(JSON _json SET "${_json}" source_date_epoch ${FFPA_SOURCE_DATE_EPOCH})
file(WRITE "${OUT}" "${_json}\n")
if(METADATA)
  ffpa_core_metadata(OUT_VAR _metadata CHANNEL "${_channel}" JIT_EXTRA ON)
  file(WRITE "${METADATA}" "${_metadata}")
endif()
if(UNTRACKED)
  file(WRITE "${UNTRACKED}" "${FFPA_SOURCE_UNTRACKED}")
endif()
