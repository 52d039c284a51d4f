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
