# Optional dependencies. Modules whose sources need them add themselves here:
#   ZEUS_EXCLUDED_SOURCES  sources left out when a dependency is missing
#   ZEUS_OPTIONAL_LIBS     libraries linked into libzeus
set(ZEUS_EXCLUDED_SOURCES "")
set(ZEUS_OPTIONAL_LIBS "")

# libmicrohttpd: the Perseus server (src/pfo_server/server.c). Required.
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)
list(APPEND ZEUS_OPTIONAL_LIBS PkgConfig::MICROHTTPD)

# libcurl: the Perseus client (src/pfo_client/client_http.c). Required.
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
list(APPEND ZEUS_OPTIONAL_LIBS PkgConfig::CURL)

# SQLite: the state store of `zeus run` (src/bso/). Required.
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
list(APPEND ZEUS_OPTIONAL_LIBS PkgConfig::SQLITE3)

# `zeus daemon` (src/daemon/): libmicrohttpd (above) and OpenSSL's libcrypto for HMAC-SHA256 (JWT).
# Off: libzeus has no daemon server; its device layer still talks to any daemon as a client.
option(ZEUS_WITH_DAEMON "Build zeus daemon (libmicrohttpd, libcrypto)" ON)
if(ZEUS_WITH_DAEMON)
  pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
  list(APPEND ZEUS_OPTIONAL_LIBS PkgConfig::LIBCRYPTO)
else()
  file(GLOB ZEUS_DAEMON_SOURCES ${CMAKE_SOURCE_DIR}/src/daemon/*.c)
  list(APPEND ZEUS_EXCLUDED_SOURCES ${ZEUS_DAEMON_SOURCES})
endif()
