# CTest fixture for the build-cache tests: a private redis-server on 127.0.0.1.
#
#   cmake -DACTION=start -DREDIS_SERVER=<exe> -DPYTHON=<exe> -DSTATE_DIR=<dir> -P redis_fixture.cmake
#   cmake -DACTION=stop  -DSTATE_DIR=<dir> -P redis_fixture.cmake
#
# start: picks a free TCP port (redis-server cannot listen on port 0, so Python binds
# port 0 and reports the number the kernel gave), starts a daemonized server with no
# persistence, waits until it answers PING, and writes the port to STATE_DIR/port.
# A port taken between the probe and redis' own bind is retried with a new one.
# stop: kills the server by its pid file, whatever state the tests left it in.
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS ACTION STATE_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "redis_fixture.cmake: -D${var}=... is required")
  endif()
endforeach()
set(pidfile "${STATE_DIR}/redis.pid")
set(portfile "${STATE_DIR}/port")

if(ACTION STREQUAL "start")
  foreach(var IN ITEMS REDIS_SERVER PYTHON)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "redis_fixture.cmake: -D${var}=... is required for start")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${STATE_DIR}")
  file(MAKE_DIRECTORY "${STATE_DIR}")
  foreach(attempt RANGE 1 5)
    execute_process(
      COMMAND "${PYTHON}" -c
        "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
      OUTPUT_VARIABLE port OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "could not pick a free port with ${PYTHON}")
    endif()
    execute_process(
      COMMAND "${REDIS_SERVER}" --bind 127.0.0.1 --port "${port}" --save "" --appendonly no
              --daemonize yes --pidfile "${pidfile}" --logfile "${STATE_DIR}/redis.log"
              --dir "${STATE_DIR}" --protected-mode yes
      RESULT_VARIABLE rc)
    # Daemonized: the parent returns at once; the server is ready when it answers.
    foreach(wait RANGE 1 50)
      execute_process(
        COMMAND "${PYTHON}" -c
          "import socket, sys; s = socket.create_connection(('127.0.0.1', ${port}), 1); s.sendall(b'PING\\r\\n'); sys.exit(0 if s.recv(16).startswith(b'+PONG') else 1)"
        RESULT_VARIABLE ping OUTPUT_QUIET ERROR_QUIET)
      if(ping EQUAL 0)
        file(WRITE "${portfile}" "${port}\n")
        message(STATUS "redis-server listening on 127.0.0.1:${port} (state in ${STATE_DIR})")
        return()
      endif()
      execute_process(COMMAND "${CMAKE_COMMAND}" -E sleep 0.1)
    endforeach()
    file(READ "${STATE_DIR}/redis.log" log)
    message(STATUS "redis-server on port ${port} did not come up (attempt ${attempt}):\n${log}")
    if(EXISTS "${pidfile}")
      file(STRINGS "${pidfile}" pid LIMIT_COUNT 1)
      execute_process(COMMAND kill "${pid}" OUTPUT_QUIET ERROR_QUIET)
      file(REMOVE "${pidfile}")
    endif()
  endforeach()
  message(FATAL_ERROR "redis-server did not start on 127.0.0.1; see ${STATE_DIR}/redis.log")
elseif(ACTION STREQUAL "stop")
  if(NOT EXISTS "${pidfile}")
    message(STATUS "no redis-server pid file in ${STATE_DIR}; nothing to stop")
    return()
  endif()
  file(STRINGS "${pidfile}" pid LIMIT_COUNT 1)
  execute_process(COMMAND kill "${pid}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  # Wait for it to go, so the next fixture never meets a dying server on a reused port.
  foreach(wait RANGE 1 50)
    execute_process(COMMAND kill -0 "${pid}" RESULT_VARIABLE alive OUTPUT_QUIET ERROR_QUIET)
    if(NOT alive EQUAL 0)
      break()
    endif()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E sleep 0.1)
  endforeach()
  if(alive EQUAL 0)
    execute_process(COMMAND kill -9 "${pid}" OUTPUT_QUIET ERROR_QUIET)
  endif()
  file(REMOVE "${pidfile}" "${portfile}")
  message(STATUS "redis-server (pid ${pid}) stopped")
else()
  message(FATAL_ERROR "redis_fixture.cmake: ACTION='${ACTION}' is not start or stop")
endif()
