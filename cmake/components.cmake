# Optional components of libzeus. Everything about a component is in its one zeus_component()
# call below; the rest of the build only reads the variables it sets. To add one (a daemon, an
# exporter): write its sources in a folder of its own under src/, its commands as
# cli/cmd_<name>.c registered in cli/main.c with CLI_COMPONENT(cmd_<name>), and add a call here.
#
# zeus_component(<NAME>
#   DOC "<what it is>"         help of the option ZEUS_WITH_<NAME> (ON by default)
#   SOURCES <dir>...           folders under the source tree whose *.c files belong to it
#   PKGS <module>...           pkg-config modules it links (REQUIRED when ON; then listed in
#                              zeus.pc and the CMake package; never linked when OFF)
#   COMMANDS <command>...      zeus subcommands it enables (cli/cmd_<command, - as _>.c); the CLI
#                              leaves them out when OFF and says so in --help
#   USED_BY <glob>...          tests, examples, benchmarks and Python test files that need it:
#                              left out of the build and the test suite when OFF)
#   REQUIRES <NAME>...         components it cannot work without (declared above it): when one of
#                              them is OFF this one is left out too, and the summary says why, so
#                              that no combination of options gives a build that does not link
#                              (`make test-components` builds each one left out alone)
#
# Results, for the rest of the build:
#   ZEUS_WITH_<NAME>           the option (ON/OFF)
#   ZEUS_COMPONENT_LIBS        imported targets libzeus links
#   ZEUS_COMPONENT_PKGS        pkg-config modules of the components built
#   ZEUS_LEFT_OUT              absolute paths of every file of the components left out
#   ZEUS_PKGS_LEFT_OUT         their pkg-config modules (space-separated; libzeus must not link them)
#   ZEUS_PKGS_BUILT            the same for the components built (space-separated)
#   ZEUS_COMMANDS_LEFT_OUT     zeus commands left out, and ZEUS_COMMANDS_BUILT those built (spaces)
#   ZEUS_CONFIG_HAVE           the #define lines of zeus/config.h (ZEUS_HAVE_<NAME> 0 or 1)
#   ZEUS_CLI_DEFINITIONS       compile definitions telling cli/main.c which commands exist
#   ZEUS_COMPONENT_SUMMARY     one line per component for the configure log
# and zeus_left_out(<path> <var>): whether a file belongs to a component left out.

set(ZEUS_COMPONENT_LIBS "")
set(ZEUS_COMPONENT_PKGS "")
set(ZEUS_LEFT_OUT "")
set(ZEUS_CONFIG_HAVE "")
set(ZEUS_CLI_DEFINITIONS "")
set(ZEUS_PKGS_LEFT_OUT "")
set(ZEUS_PKGS_BUILT "")
set(ZEUS_COMMANDS_LEFT_OUT "")
set(ZEUS_COMMANDS_BUILT "")

function(zeus_component name)
  cmake_parse_arguments(C "" "DOC" "SOURCES;PKGS;COMMANDS;USED_BY;REQUIRES" ${ARGN})
  option(ZEUS_WITH_${name} "${C_DOC}" ON)
  set(enabled ${ZEUS_WITH_${name}})
  set(missing "")
  foreach(r ${C_REQUIRES})
    if(NOT DEFINED ZEUS_HAVE_COMPONENT_${r})
      message(FATAL_ERROR "component ${name} REQUIRES ${r}, which is not declared before it")
    endif()
    if(NOT ZEUS_HAVE_COMPONENT_${r})
      list(APPEND missing ZEUS_WITH_${r})
    endif()
  endforeach()
  set(forced FALSE)
  if(enabled AND missing)
    set(forced TRUE)
    set(enabled OFF)
    set(ZEUS_WITH_${name} OFF PARENT_SCOPE) # the rest of the build sees it left out
  endif()
  set(libs ${ZEUS_COMPONENT_LIBS})
  set(pkgs ${ZEUS_COMPONENT_PKGS})
  set(left ${ZEUS_LEFT_OUT})
  set(defs ${ZEUS_CLI_DEFINITIONS})
  string(REPLACE ";" " " deps "${C_PKGS}")
  string(REPLACE ";" " " cmds "${C_COMMANDS}")
  if(enabled)
    set(have 1)
    set(ZEUS_PKGS_BUILT "${ZEUS_PKGS_BUILT} ${deps}" PARENT_SCOPE)
    set(ZEUS_COMMANDS_BUILT "${ZEUS_COMMANDS_BUILT} ${cmds}" PARENT_SCOPE)
    foreach(p ${C_PKGS})
      string(TOUPPER "ZEUS_PKG_${p}" var)
      string(MAKE_C_IDENTIFIER "${var}" var)
      pkg_check_modules(${var} REQUIRED IMPORTED_TARGET ${p})
      list(APPEND libs PkgConfig::${var})
      list(APPEND pkgs ${p})
    endforeach()
  else()
    set(have 0)
    set(ZEUS_PKGS_LEFT_OUT "${ZEUS_PKGS_LEFT_OUT} ${deps}" PARENT_SCOPE)
    set(ZEUS_COMMANDS_LEFT_OUT "${ZEUS_COMMANDS_LEFT_OUT} ${cmds}" PARENT_SCOPE)
    foreach(d ${C_SOURCES})
      file(GLOB f CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${d}/*.c)
      list(APPEND left ${f})
    endforeach()
    foreach(g ${C_USED_BY})
      file(GLOB f CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${g})
      list(APPEND left ${f})
    endforeach()
  endif()
  foreach(cmd ${C_COMMANDS})
    string(REPLACE "-" "_" fn "cmd_${cmd}")
    if(NOT have)
      list(APPEND left ${CMAKE_SOURCE_DIR}/cli/${fn}.c)
    endif()
    list(APPEND defs "ZEUS_CLI_HAVE_${fn}=${have}" "ZEUS_CLI_OPTION_${fn}=\"ZEUS_WITH_${name}\""
         "ZEUS_CLI_DEPS_${fn}=\"${deps}\"")
  endforeach()
  list(REMOVE_DUPLICATES libs)
  list(REMOVE_DUPLICATES pkgs)
  set(ZEUS_COMPONENT_LIBS "${libs}" PARENT_SCOPE)
  set(ZEUS_COMPONENT_PKGS "${pkgs}" PARENT_SCOPE)
  set(ZEUS_LEFT_OUT "${left}" PARENT_SCOPE)
  set(ZEUS_CLI_DEFINITIONS "${defs}" PARENT_SCOPE)
  set(ZEUS_CONFIG_HAVE "${ZEUS_CONFIG_HAVE}/* ${C_DOC} (needs ${deps}) */\n#define ZEUS_HAVE_${name} ${have}\n"
      PARENT_SCOPE)
  set(ZEUS_HAVE_COMPONENT_${name} ${have} PARENT_SCOPE)
  if(have)
    set(state "ON (${deps})")
  elseif(forced)
    string(REPLACE ";" ", " why "${missing}")
    set(state "OFF (it needs ${why}, which is OFF; left out: ${deps})")
  else()
    set(state "OFF (left out: ${deps})")
  endif()
  set(ZEUS_COMPONENT_SUMMARY "${ZEUS_COMPONENT_SUMMARY}  ZEUS_WITH_${name}: ${state}\n" PARENT_SCOPE)
endfunction()

function(zeus_left_out path var)
  get_filename_component(abs ${path} ABSOLUTE)
  if(abs IN_LIST ZEUS_LEFT_OUT)
    set(${var} TRUE PARENT_SCOPE)
  else()
    set(${var} FALSE PARENT_SCOPE)
  endif()
endfunction()

# ---- the components -------------------------------------------------------------------------

zeus_component(PFO_SERVER
  DOC "the Perseus server: zeus pfo-server, zeus/pfo_server.h"
  SOURCES src/pfo_server
  PKGS libmicrohttpd
  COMMANDS pfo-server
  USED_BY tests/unit/test_pfo_server*.c tests/unit/test_pfo_sched.c tests/unit/test_pfo_client_*.c
          tests/unit/test_pfo_perseus.c tests/e2e/perseus.sh bench/bench_perseus.c tests/e2e/pfo_server_*.sh
          tests/e2e/pipeline_sim.sh tests/e2e/prometheus.sh tests/fuzz/fuzz_pfo_bodies.c
          tests/mpi/test_pfo_client_mpi.c bench/bench_pfo_server.c bench/bench_pfo_client.c
          python/tests/test_pipeline_frequency.py)

# The HTTP client side the components below that call a server share (src/http_client/: libcurl
# initialised once, bounded answers, errors that name the URL). Its users REQUIRE it; with all of
# them turned off on the command line, it defaults to off too, so that such a build links no libcurl.
if(NOT DEFINED ZEUS_WITH_HTTP_CLIENT AND DEFINED ZEUS_WITH_PFO_CLIENT AND NOT ZEUS_WITH_PFO_CLIENT
   AND DEFINED ZEUS_WITH_METRICS_PUSH AND NOT ZEUS_WITH_METRICS_PUSH AND DEFINED ZEUS_WITH_GRID AND NOT ZEUS_WITH_GRID)
  set(ZEUS_WITH_HTTP_CLIENT OFF CACHE BOOL
      "the HTTP client side (off: ZEUS_WITH_PFO_CLIENT, ZEUS_WITH_METRICS_PUSH and ZEUS_WITH_GRID were off)")
endif()
zeus_component(HTTP_CLIENT
  DOC "the HTTP client side of the Perseus client, the Pushgateway push and the grid providers: libcurl"
  SOURCES src/http_client
  PKGS libcurl
  USED_BY tests/unit/test_http_client.c)

zeus_component(PFO_CLIENT
  DOC "the Perseus client in each rank: zeus/pfo_client.h"
  SOURCES src/pfo_client
  PKGS libcurl
  REQUIRES HTTP_CLIENT
  USED_BY tests/unit/test_pfo_client_*.c tests/unit/test_pfo_controller.c tests/e2e/pipeline_sim.sh
          tests/mpi/test_pfo_client_mpi.c
          examples/pipeline_sim.c bench/bench_pfo_client.c python/tests/test_pipeline_frequency.py)

# The SQL store zeus bso-server and zeus run --state postgresql://... share (src/store/): SQLite,
# the schema and its migrations, the bounds and retries of both back ends in one place.
# Its users are declared below it (they REQUIRE it): with both of them turned off on the command
# line, the store defaults to off too, so that a build without them links no SQLite.
if(NOT DEFINED ZEUS_WITH_STORE AND DEFINED ZEUS_WITH_BSO_SERVER AND NOT ZEUS_WITH_BSO_SERVER AND DEFINED ZEUS_WITH_RUN
   AND NOT ZEUS_WITH_RUN)
  set(ZEUS_WITH_STORE OFF CACHE BOOL "the SQL store (off: ZEUS_WITH_BSO_SERVER and ZEUS_WITH_RUN were off)")
endif()
zeus_component(STORE
  DOC "the SQL store zeus bso-server and zeus run share: SQLite, the schema and its migrations"
  SOURCES src/store
  PKGS sqlite3
  USED_BY tests/unit/test_store.c)

# PostgreSQL for the store: zeus bso-server --database postgresql://... and zeus run --state
# postgresql://.... ZEUS_WITH_BSO_PG, its name before the store had a folder of its own, is still
# accepted (it sets this option).
if(DEFINED ZEUS_WITH_BSO_PG AND NOT "${ZEUS_WITH_BSO_PG}" STREQUAL "${ZEUS__BSO_PG_SEEN}")
  message(STATUS "ZEUS_WITH_BSO_PG is now ZEUS_WITH_STORE_PG; taking ZEUS_WITH_STORE_PG=${ZEUS_WITH_BSO_PG}")
  set(ZEUS_WITH_STORE_PG ${ZEUS_WITH_BSO_PG} CACHE BOOL "PostgreSQL for the store (set from ZEUS_WITH_BSO_PG)" FORCE)
  set(ZEUS__BSO_PG_SEEN "${ZEUS_WITH_BSO_PG}" CACHE INTERNAL "the last ZEUS_WITH_BSO_PG taken")
endif()
zeus_component(STORE_PG
  DOC "PostgreSQL for the store: zeus bso-server --database postgresql://..., zeus run --state postgresql://..."
  SOURCES src/store_pg
  PKGS libpq
  REQUIRES STORE
  USED_BY tests/e2e/bso_run_pg.sh)

zeus_component(RUN
  DOC "the recurring-job driver: zeus run, zeus/run.h"
  SOURCES src/run
  PKGS sqlite3
  COMMANDS run
  USED_BY tests/unit/test_run.c tests/unit/test_run_hardening.c tests/e2e/bso_cli.sh tests/e2e/bso_run_pg.sh
          tests/e2e/bso_valgrind.sh)

zeus_component(BSO_SERVER
  DOC "the batch-size optimizer server on SQLite: zeus bso-server, zeus/bso_server.h"
  SOURCES src/bso_server
  PKGS libmicrohttpd sqlite3
  COMMANDS bso-server
  REQUIRES STORE
  USED_BY tests/unit/test_bso_server*.c tests/e2e/bso_server*.sh bench/bench_bso_server.c tests/e2e/bso_run_pg.sh
          python/tests/test_bso_client.py)

zeus_component(DAEMON
  DOC "zeus daemon: the privileged daemon with zeusd's API and leases, zeus/daemon.h (the device
layer's client of a daemon is always built)"
  SOURCES src/daemon
  PKGS libmicrohttpd libcrypto
  COMMANDS daemon
  USED_BY tests/unit/test_daemon_*.c tests/e2e/daemon_*.sh tests/e2e/install_daemon_unit.sh
          bench/bench_daemon.c bench/bench_power_stream.c python/tests/test_daemon.py
          python/tests/test_power_streaming.py)

zeus_component(EXPORTER
  DOC "the Prometheus exporter: zeus exporter, zeus/exporter.h"
  SOURCES src/exporter
  PKGS libmicrohttpd
  COMMANDS exporter
  USED_BY tests/unit/test_exporter.c tests/e2e/prometheus.sh tests/e2e/exporter_cli.sh bench/bench_exporter.c)

zeus_component(METRICS_PUSH
  DOC "measurement windows pushed to a Prometheus Pushgateway: zeus/metric.h"
  SOURCES src/metric_push
  PKGS libcurl
  REQUIRES HTTP_CLIENT
  USED_BY tests/unit/test_metric*.c tests/e2e/pushgateway.sh python/tests/test_metric.py)

zeus_component(GRID
  DOC "measurement windows in grams of CO2 and in money (ElectricityMaps, OpenEI): zeus/grid.h"
  SOURCES src/grid
  PKGS libcurl
  REQUIRES HTTP_CLIENT
  USED_BY tests/unit/test_grid*.c tests/e2e/grid_*.sh python/tests/test_grid*.py)

# The name of ZEUS_HAVE_STORE_PG in zeus/config.h before the store had a folder of its own.
set(ZEUS_CONFIG_HAVE "${ZEUS_CONFIG_HAVE}/* its former name */\n#define ZEUS_HAVE_BSO_PG ZEUS_HAVE_STORE_PG\n")

# A library still linked by a component that was built (two components may share one) is not
# "left out".
separate_arguments(zeus_left_pkgs UNIX_COMMAND "${ZEUS_PKGS_LEFT_OUT}")
if(zeus_left_pkgs)
  list(REMOVE_DUPLICATES zeus_left_pkgs)
  if(ZEUS_COMPONENT_PKGS)
    list(REMOVE_ITEM zeus_left_pkgs ${ZEUS_COMPONENT_PKGS})
  endif()
endif()
string(REPLACE ";" " " ZEUS_PKGS_LEFT_OUT "${zeus_left_pkgs}")
string(REPLACE ";" " " ZEUS_PKGS_BUILT "${ZEUS_COMPONENT_PKGS}")
if(ZEUS_LEFT_OUT)
  list(REMOVE_DUPLICATES ZEUS_LEFT_OUT)
endif()
